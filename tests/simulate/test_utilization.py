"""Simulated DCGM series against their truth: the ledger's idle.allocated on a simulated cluster."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from gpuyield.cli import app
from gpuyield.report.summary import build_report


def test_idle_allocated_within_half_a_percent_of_the_simulators_truth(tmp_path: Path) -> None:
    out, db = tmp_path / "sim", tmp_path / "db.duckdb"
    runner = CliRunner()
    simulated = runner.invoke(
        app,
        [
            "simulate",
            "run",
            "ledger-check",
            "--out",
            str(out),
            "--duration",
            "12h",
            "--utilization",
        ],
    )
    assert simulated.exit_code == 0, simulated.output
    for args in (
        ["ingest", "slurm", "--dir", str(out), "--db", str(db), "--json"],
        ["ingest", "utilization", "--prom-json", str(out / "utilization.json"), "--db", str(db)],
    ):
        done = runner.invoke(app, args)
        assert done.exit_code == 0, done.output
    truth = json.loads((out / "truth.json").read_text())["gpu_activity"]
    report = build_report(db)
    measured = report.subcategories["idle.allocated"]
    assert report.activity is not None
    assert report.activity.samples.unattributed == 0
    assert report.activity.samples.total > 100_000
    # At one sample a minute the ledger cannot see the part of a sample a stall ends in, nor a
    # GPU's first part-step after it changed hands: it may only undercount, and by little.
    expected = truth["idle_allocated_gpu_seconds"]
    assert 0.995 * expected <= measured <= expected
    assert abs(sum(report.categories.values()) - report.installed_gpu_seconds) < 1e-3
