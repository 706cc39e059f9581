"""The ``--sacct-usage`` reader on its own: the samples each line gives, column for column, and
its bounds (issue 26: a file's node lists and GPU counts cannot make unbounded work)."""

from __future__ import annotations

import base64
import gzip
import json
from pathlib import Path

import pytest

from gpuyield.errors import ParseError
from gpuyield.ingest.utilization import sacct_usage

HEADER = "JobID|JobIDRaw|Start|End|NodeList|AllocTRES|TRESUsageInAve|AdminComment"
T0 = 1_796_032_800  # 2026-11-30T10:00:00Z


def _summary(document: object) -> str:
    return "JS1:" + base64.b64encode(gzip.compress(json.dumps(document).encode())).decode()


def _write(tmp_path: Path, *rows: str) -> Path:
    path = tmp_path / "usage.psv"
    path.write_text("\n".join((HEADER, *rows)) + "\n")
    return path


def test_each_gpu_of_each_line_is_one_sample_covering_its_run(tmp_path: Path) -> None:
    summary = _summary({"nodes": {"n9": {"gpu_utilization": {"3": 40, "5": 0}}}})
    path = _write(
        tmp_path,
        "7|7|2026-11-30T10:00:00|2026-11-30T10:10:00|n[1-2]|gres/gpu=4|gres/gpuutil=25|",
        "7.0|7.0|2026-11-30T10:00:00|2026-11-30T10:05:00|n[1-2]|gres/gpu=2|gres/gpuutil=90|",
        "8|8|2026-11-30T11:00:00|Unknown|n3|gres/gpu=8|gres/gpuutil=10|",  # still running
        f"9|9|2026-11-30T10:00:00|2026-11-30T10:01:00|n9|gres/gpu=8||{summary}",
    )
    rows = sacct_usage.read(path).to_pylist()
    got = [
        (r["field"], r["node"], r["gpu"], r["job_label"], r["ts"], r["vs"], r["step_s"])
        for r in rows
    ]
    assert got == [
        ("line 2", "n1", 0, "7", [T0 + 600], [0.25], 600),
        ("line 2", "n1", 1, "7", [T0 + 600], [0.25], 600),
        ("line 2", "n2", 0, "7", [T0 + 600], [0.25], 600),
        ("line 2", "n2", 1, "7", [T0 + 600], [0.25], 600),
        # the same node list again (expanded once): the step's GPUs, its own run
        ("line 3", "n1", 0, "7", [T0 + 300], [0.9], 300),
        ("line 3", "n2", 0, "7", [T0 + 300], [0.9], 300),
        ("line 5", "n9", 3, "9", [T0 + 60], [0.4], 60),
        ("line 5", "n9", 5, "9", [T0 + 60], [0.0], 60),
    ]
    assert {r["source"] for r in rows} == {str(path)}
    assert {r["role"] for r in rows} == {"active"}


def test_a_file_of_no_finished_run_gives_no_sample(tmp_path: Path) -> None:
    path = _write(tmp_path, "8|8|2026-11-30T11:00:00|Unknown|n3|gres/gpu=8|gres/gpuutil=10|")
    assert sacct_usage.read(path).num_rows == 0


def test_more_samples_than_the_budget_is_refused_at_the_line_before_they_are_made(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sacct_usage, "MAX_SAMPLES", 20)
    row = "1|1|2026-11-30T10:00:00|2026-11-30T10:10:00|n[1-2]|gres/gpu=16|gres/gpuutil=5|"
    path = _write(tmp_path, row, row)
    with pytest.raises(ParseError) as error:
        sacct_usage.read(path, max_gpus_per_node=8)
    assert error.value.line == 3
    assert "more than 20 GPU samples" in error.value.message
    assert "sacct -S/-E" in (error.value.hint or "")


def test_a_node_list_past_the_inventory_is_refused_naming_the_field(tmp_path: Path) -> None:
    row = "1|1|2026-11-30T10:00:00|2026-11-30T10:10:00|n[0-99999999]|gres/gpu=8|gres/gpuutil=5|"
    with pytest.raises(ParseError) as error:
        sacct_usage.read(_write(tmp_path, row), max_nodes=4)
    assert (error.value.line, error.value.field) == (2, "NodeList")
