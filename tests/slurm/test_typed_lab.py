"""The lab as an H100 + A100 fleet (typed GRES): what Slurm 22.05 records for every kind of GPU
request, and the ledger by GPU type against a computation from the capture's raw files."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from tests.ledger.test_weights_typed import MODEL, expected_by_type
from tests.slurm.conftest import LabRun, gpuyield, ledger_report
from tests.slurm.typed_lab import FLEET

pytestmark = pytest.mark.slurm


def _jobs(lab_run: LabRun) -> dict[str, dict[str, str]]:
    assert lab_run.typed is not None
    lines = (lab_run.typed.capture / "sacct-X-D.psv").read_text().splitlines()
    header = lines[0].split("|")
    by_id = {
        row[0]: dict(zip(header, row, strict=True))
        for row in (line.split("|") for line in lines[1:])
    }
    return {role: by_id[job_id] for role, job_id in lab_run.typed.job_ids.items()}


def _typed(tres: str) -> dict[str, int]:
    return {t: int(n) for t, n in re.findall(r"gres/gpu:(\w+)=(\d+)", tres)}


def test_slurm_records_every_type_a_job_holds(lab_run: LabRun) -> None:
    jobs = _jobs(lab_run)
    assert _typed(jobs["pt-typed"]["AllocTRES"]) == {"h100": 4}
    # An untyped request is accounted with the type it got.
    assert _typed(jobs["untyped"]["ReqTRES"]) == {}
    assert _typed(jobs["untyped"]["AllocTRES"]) == {"a100": 2}
    assert _typed(jobs["span"]["AllocTRES"]) == {"h100": 2, "a100": 2}
    # --gpus=12 over an 8-GPU H100 node and a 4-GPU A100 node: 8 + 4, not 6 + 6.
    assert _typed(jobs["uneven"]["AllocTRES"]) == {"h100": 8, "a100": 4}
    assert _typed(jobs["exclusive"]["ReqTRES"]) == {"h100": 2}
    assert _typed(jobs["exclusive"]["AllocTRES"]) == {"h100": 8}
    nodes = (lab_run.typed.capture / "nodes.txt").read_text()  # type: ignore[union-attr]
    for node, (gres_type, count) in FLEET.items():
        assert re.search(rf"NodeName={node} .*Gres=gpu:{gres_type}:{count} ", nodes), node


def test_the_ledger_by_gpu_type_equals_the_raw_capture(lab_run: LabRun) -> None:
    typed = lab_run.typed
    assert typed is not None
    db = typed.capture / "typed.duckdb"
    start, end = (typed.capture / "window.txt").read_text().split()
    gpuyield(
        "ingest",
        "slurm",
        "--db",
        db,
        "--sacct",
        typed.capture / "sacct-X-D.psv",
        "--events",
        typed.capture / "events.psv",
        "--nodes",
        typed.capture / "nodes.txt",
        "--manifest",
        typed.capture / "manifest.toml",
        "--since",
        start,
        "--until",
        end,
    )
    gpuyield("ingest", "gres-conf", typed.capture / "gres.conf", "--db", db)
    report: dict[str, Any] = ledger_report(db)
    expected = expected_by_type(typed.capture)
    for gres_type, cats in expected.items():
        got = report["by_gpu_type"][MODEL[gres_type]]
        assert got["installed_gpu_seconds"] == pytest.approx(cats["installed"], abs=1e-6)
        for category, value in got["categories"].items():
            assert value == pytest.approx(cats.get(category, 0.0), abs=1e-6), category
        assert any("GRES type" in s or "gres.conf" in s for s in got["model_source"])
    h100e = report["weighted"]["h100_equiv_seconds"]
    assert sum(h100e["categories"].values()) == pytest.approx(h100e["installed"], rel=1e-12)
    (typed.capture / "report.json").write_text(json.dumps(report, indent=2))
