"""Hostile utilization inputs (issues 24 and 26): each is refused with one clear error (exit 1,
no traceback) naming the file, line or series and what is wrong, and the store unchanged row
for row; or, where the input means something, the same answer on every reader.

The store holds the good cluster (inputs.py: four nodes of 8 GPUs) before each case.
"""

from __future__ import annotations

import base64
import gzip
import json
import shutil
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from gpuyield.errors import InputError
from gpuyield.ingest.utilization import Limits, PrometheusSource, ingest_utilization
from tests.hostile.inputs import (
    UNTIL,
    conserves,
    report_json,
    run_cli,
    snapshot,
)

T0 = 1_796_032_800  # 2026-11-30T10:00:00Z, the good cluster's first job
USAGE_HEADER = "JobID|JobIDRaw|Start|End|NodeList|AllocTRES|TRESUsageInAve|AdminComment"


def series(node: str, gpu: str, points: list[tuple[int, str]], job: str | None = None) -> dict:
    labels = {"__name__": "DCGM_FI_DEV_GPU_UTIL", "Hostname": node, "gpu": gpu}
    if job is not None:
        labels["hpc_job"] = job
    return {"metric": labels, "values": [[t, v] for t, v in points]}


def answer(*result: dict) -> str:
    return json.dumps({"status": "success", "data": {"resultType": "matrix", "result": result}})


def minutes(count: int, value: str = "0", start: int = T0) -> list[tuple[int, str]]:
    return [(start + 60 * (i + 1), value) for i in range(count)]


def usage(*rows: str) -> str:
    return "\n".join((USAGE_HEADER, *rows)) + "\n"


def jobstats(document: object) -> str:
    return "JS1:" + base64.b64encode(gzip.compress(json.dumps(document).encode())).decode()


def _refused(db: Path, tmp_path: Path, flag: str, content: str | bytes, *words: str) -> str:
    """Ingest one file after the good cluster: exit 1, one message naming the file and ``words``,
    no traceback, the store as it was."""
    path = tmp_path / ("hostile.json" if flag == "--prom-json" else "hostile.psv")
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content)
    before = snapshot(db)
    outcome = run_cli(["ingest", "utilization", "--db", str(db), flag, str(path)])
    assert outcome.traceback is None, outcome.traceback
    assert outcome.exit_code == 1, outcome.output
    assert "Traceback" not in outcome.output
    assert str(path) in outcome.output
    for word in words:
        assert word in outcome.output, (word, outcome.output)
    assert snapshot(db) == before, "a refused ingest changed the store"
    return outcome.output


GPU_INDEX_CASES = {
    "beyond the node": ("16", ["n1 GPU 16", "8 GPUs"]),
    "negative": ("-1", ["'-1'", "not a GPU"]),
    "not a number": ("3.0", ["'3.0'", "not a GPU"]),
    "beyond any node": ("500", ["'500'", "not a GPU"]),
}


@pytest.mark.parametrize("case", sorted(GPU_INDEX_CASES))
def test_a_gpu_the_inventory_does_not_have_is_refused(
    case: str, base_db: Path, tmp_path: Path
) -> None:
    gpu, words = GPU_INDEX_CASES[case]
    content = answer(series("n1", "0", minutes(5)), series("n1", gpu, minutes(5)))
    output = _refused(base_db, tmp_path, "--prom-json", content, *words)
    assert "data.result[1]" in output


def test_sacct_usage_gpus_above_the_nodes_are_refused(base_db: Path, tmp_path: Path) -> None:
    row = f"1|1|{T0}|{T0 + 600}|n1|gres/gpu=16|gres/gpuutil=50|"
    text = (
        usage(row)
        .replace(str(T0), "2026-11-30T10:00:00")
        .replace(str(T0 + 600), "2026-11-30T10:10:00")
    )
    _refused(base_db, tmp_path, "--sacct-usage", text, "hostile.psv:2", "16 GPUs a node", "8")


def test_a_billion_gpus_is_refused_before_any_sample_is_made(base_db: Path, tmp_path: Path) -> None:
    """Issue 26: a 173-byte file with gres/gpu=1e9 made 2.6 GB of samples in 11 s."""
    row = "1|1|2026-11-30T10:00:00|2026-11-30T10:10:00|n1|gres/gpu=1e9|gres/gpuutil=50|"
    began = time.monotonic()
    _refused(base_db, tmp_path, "--sacct-usage", usage(row), "hostile.psv:2", "1e+09")
    assert time.monotonic() - began < 30  # a refusal, not 10^9 samples (loose: loaded CI)


def test_a_fractional_gpu_count_is_refused(base_db: Path, tmp_path: Path) -> None:
    row = "1|1|2026-11-30T10:00:00|2026-11-30T10:10:00|n1|gres/gpu=1.5|gres/gpuutil=50|"
    _refused(base_db, tmp_path, "--sacct-usage", usage(row), "hostile.psv:2", "whole number")


def test_a_jobstats_gzip_bomb_is_refused(base_db: Path, tmp_path: Path) -> None:
    """A summary of a few kB compressed that decompresses to 64 MB (the bomb of issue 26 was
    1.4 MB to 2.2 GB): refused at the summary's budget, not decompressed."""
    bomb = gzip.compress(b"{" + b" " * (64 << 20) + b"}")
    summary = "JS1:" + base64.b64encode(bomb).decode()
    row = f"1|1|2026-11-30T10:00:00|2026-11-30T10:10:00|n1|gres/gpu=8||{summary}"
    _refused(
        base_db, tmp_path, "--sacct-usage", usage(row), "hostile.psv:2", "AdminComment", "bytes"
    )


def test_a_jobstats_gpu_beyond_the_node_is_refused(base_db: Path, tmp_path: Path) -> None:
    summary = jobstats({"nodes": {"n1": {"gpu_utilization": {"0": 50, "16": 0}}}})
    row = f"1|1|2026-11-30T10:00:00|2026-11-30T10:10:00|n1|gres/gpu=8||{summary}"
    _refused(base_db, tmp_path, "--sacct-usage", usage(row), "hostile.psv:2", "GPU index 16")


def test_jobstats_summaries_are_read(base_db: Path, tmp_path: Path) -> None:
    """The same input shape, well-formed: job 1 (8 GPUs, 600 s) had GPU 7 idle for its run."""
    gpus = {str(g): 0 if g == 7 else 95 for g in range(8)}
    summary = jobstats({"nodes": {"n1": {"gpu_utilization": gpus}}})
    row = f"1|1|2026-11-30T10:00:00|2026-11-30T10:10:00|n1|gres/gpu=8||{summary}"
    path = tmp_path / "usage.psv"
    path.write_text(usage(row))
    outcome = run_cli(["ingest", "utilization", "--db", str(base_db), "--sacct-usage", str(path)])
    assert outcome.exit_code == 0, outcome.output
    data = report_json(base_db)
    assert conserves(data)
    assert data["subcategories"]["idle.allocated"] == pytest.approx(600.0)


def test_repeated_times_are_one_sample_on_both_readers(
    base_db: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every point of node n1 GPU 0 given three times: the same store and the same report as
    once, whichever reader reads it."""
    from tests.ingest.test_utilization import use_python_reader

    once = answer(series("n1", "0", minutes(10), job="1"))
    points = [p for p in minutes(10) for _ in range(3)]
    thrice = answer(series("n1", "0", points, job="1"))
    reports = []
    for text, python in ((once, False), (thrice, False), (thrice, True)):
        db = tmp_path / f"{len(reports)}.duckdb"
        shutil.copyfile(base_db, db)
        path = tmp_path / f"{len(reports)}.json"
        path.write_text(text)
        if python:
            use_python_reader(monkeypatch)
        (result,) = ingest_utilization(db, prom_json=[path])
        assert result.samples == 10
        report = report_json(db)
        report.pop("sources")  # the files differ; everything they say does not
        reports.append(report)
    assert reports[0] == reports[1] == reports[2]
    assert reports[0]["subcategories"]["idle.allocated"] == pytest.approx(600.0)


# --- A Prometheus server that floods or drips ---------------------------------------------------


class _Hostile(BaseHTTPRequestHandler):
    """Answers every query with an endless body (``flood``) or a byte at a time (``drip``)."""

    mode = "flood"

    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        try:
            if self.mode == "flood":
                self.wfile.write(b'{"status":"success","data":{"resultType":"matrix","result":[')
                chunk = b" " * (1 << 16)
                while True:
                    self.wfile.write(chunk)
            else:
                for byte in answer().encode():
                    self.wfile.write(bytes([byte]))
                    self.wfile.flush()
                    time.sleep(0.2)
        except (BrokenPipeError, ConnectionResetError):
            return

    def log_message(self, *args: object) -> None:
        return


def _serve(mode: str) -> tuple[ThreadingHTTPServer, str]:
    handler = type("Handler", (_Hostile,), {"mode": mode})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}"


@pytest.mark.parametrize(("mode", "words"), [("flood", "4,194,304 bytes"), ("drip", "within 3 s")])
def test_a_flooding_or_dripping_prometheus_is_cut_off(mode: str, words: str, base_db: Path) -> None:
    server, url = _serve(mode)
    limits = Limits(deadline_s=3.0, max_bytes=4 << 20, read_timeout_s=2.0)
    source = PrometheusSource(url=url, since_s=T0, until_s=T0 + 3600, limits=limits)
    before = snapshot(base_db)
    began = time.monotonic()
    try:
        with pytest.raises(InputError) as caught:
            ingest_utilization(base_db, server=source)
    finally:
        server.shutdown()
        server.server_close()
    assert url in caught.value.message
    assert words in caught.value.message, caught.value.message
    assert time.monotonic() - began < 30  # cut off at its limits (loose: loaded CI machines)
    assert snapshot(base_db) == before


def test_the_cli_takes_the_deadline_and_names_the_server(base_db: Path) -> None:
    server, url = _serve("drip")
    args = ["ingest", "utilization", "--db", str(base_db), "--prometheus", url]
    args += ["--since", "2026-11-30T10:00:00", "--until", UNTIL, "--timeout", "2s"]
    try:
        outcome = run_cli(args)
    finally:
        server.shutdown()
        server.server_close()
    assert outcome.traceback is None, outcome.traceback
    assert outcome.exit_code == 1
    assert url in outcome.output and "within 2 s" in outcome.output
    assert "--timeout" in outcome.output  # the hint says how to allow longer
