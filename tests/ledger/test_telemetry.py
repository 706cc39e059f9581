"""With run telemetry the ledger measures lost progress, start-up and checkpoint stalls."""

from __future__ import annotations

import json
from pathlib import Path

from gpuyield.ingest.runlog import ingest_telemetry_files
from gpuyield.ingest.slurm import SlurmInputs, ingest_slurm
from gpuyield.ledger import compute_ledger
from gpuyield.ledger.ledger import backend_for
from gpuyield.report.summary import report_from_ledger
from gpuyield.store import connect
from tests.ledger.timeline import HOUR_S, T0_S, Cluster, Job

STARTUP_S = 100
SAVE_S = 30
SAVES_AT = (1100, 2100)  # seconds after job start when each save finished
FAIL_AT = 2500
GPUS = 8

MANIFEST = """
[[releases]]
model = "m"
runs = ["pt"]
[run_settings.pt]
checkpoint_interval_s = 1000
"""


def _line(event: str, offset_s: float, **fields: object) -> str:
    return json.dumps({"v": 1, "event": event, "t": T0_S + offset_s, **fields})


def _pt_telemetry(path: Path) -> None:
    lines = [_line("job_start", 0, run="pt", job_id="1", host="n1")]
    lines += [_line("step", STARTUP_S + 10 * i, step=i, loss=3.0 - i * 1e-3) for i in range(240)]
    lines += [
        _line("checkpoint_saved", at, step=int((at - STARTUP_S) / 10), duration_s=SAVE_S)
        for at in SAVES_AT
    ]
    path.write_text("\n".join(sorted(lines, key=lambda s: json.loads(s)["t"])) + "\n")


def _div_telemetry(path: Path) -> None:
    # A research run: healthy, then the loss goes NaN at step 150 (t = 1500 s).
    lines = [_line("step", 10 * i, step=i, loss=2.0 - i * 1e-3) for i in range(150)]
    lines += [_line("step", 10 * i, step=i, loss=float("nan")) for i in range(150, 200)]
    path.write_text("\n".join(lines).replace("NaN", "NaN") + "\n")


def test_measured_overhead_and_lost_progress(tmp_path: Path) -> None:
    cluster = Cluster(
        jobs=[
            Job(1, 0, FAIL_AT, state="NODE_FAIL", run="pt", nodes="n1"),
            Job(2, 0, 2000, run="div", gpus=4, nodes="n2"),
        ]
    )
    files = cluster.write(tmp_path)
    manifest = tmp_path / "manifest.toml"
    manifest.write_text(MANIFEST)
    db = tmp_path / "db.duckdb"
    ingest_slurm(
        db,
        SlurmInputs(
            sacct=files["sacct"], events=files["events"], nodes=files["nodes"], manifest=manifest
        ),
        until_s=T0_S + HOUR_S,
    )
    _pt_telemetry(tmp_path / "pt.jsonl")
    _div_telemetry(tmp_path / "div.jsonl")
    ingest_telemetry_files(db, "pt", [tmp_path / "pt.jsonl"])
    results = ingest_telemetry_files(db, "div", [tmp_path / "div.jsonl"])
    assert results[0].divergence_events >= 1
    con = connect(db, read_only=True)
    ledger = compute_ledger(backend_for(con))
    report = report_from_ledger(ledger)
    con.close()

    overhead_s = STARTUP_S + SAVE_S * len(SAVES_AT)
    lost_s = FAIL_AT - SAVES_AT[-1]  # measured: job end minus the last save, not 2500 mod 1000
    assert ledger.categories["overhead"] == overhead_s * GPUS
    assert ledger.subcategories["failed.hardware"] == lost_s * GPUS
    assert ledger.categories["released"] == (FAIL_AT - overhead_s - lost_s) * GPUS
    assert ledger.measured_lost_jobs == 1 and ledger.estimated_lost_jobs == 0
    # The watch found the NaN at t = 1500 s: the research run is diverged from there.
    assert ledger.categories["diverged"] == (2000 - 1500) * 4
    assert ledger.categories["experiment"] == 1500 * 4
    assert report.figures["overhead"] == "measured"
    assert report.figures["lost_progress"] == "measured"
    assert any(e["run"] == "div" and e["kind"] == "nonfinite" for e in report.divergence_evidence)


def test_same_telemetry_twice_changes_nothing(tmp_path: Path) -> None:
    files = Cluster(jobs=[Job(1, 0, FAIL_AT, run="pt")]).write(tmp_path)
    db = tmp_path / "db.duckdb"
    ingest_slurm(db, SlurmInputs(sacct=files["sacct"]), until_s=T0_S + HOUR_S)
    _pt_telemetry(tmp_path / "pt.jsonl")
    first = ingest_telemetry_files(db, "pt", [tmp_path / "pt.jsonl"])
    second = ingest_telemetry_files(db, "pt", [tmp_path / "pt.jsonl"])
    con = connect(db, read_only=True)
    count = con.execute("SELECT count(*) FROM telemetry").fetchall()[0][0]
    con.close()
    assert not first[0].skipped and second[0].skipped
    assert count == first[0].records
