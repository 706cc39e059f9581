"""Simulated DCGM series against their truth: the ledger's idle.allocated on a simulated cluster."""

from __future__ import annotations

import json
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from gpuyield.cli import app
from gpuyield.hostlist import expand_hostlist
from gpuyield.report.summary import build_report
from gpuyield.simulate.utilization import BUSY_PERCENT, _epoch, _Grid, _Job

STEP_S = 60


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
    # Only samples of a job requeued on the same node that overlap two of its runs there are
    # not charged (the label cannot say which run's GPU they measured): counted from the files.
    assert report.activity.samples.unattributed == ambiguous_samples(out)
    assert report.activity.samples.unattributed < 100
    assert report.activity.samples.total > 100_000
    # At one sample a minute the ledger cannot see the part of a sample a stall ends in, nor a
    # GPU's first part-step after it changed hands: it may only undercount, and by little.
    expected = truth["idle_allocated_gpu_seconds"]
    assert 0.995 * expected <= measured <= expected
    assert abs(sum(report.categories.values()) - report.installed_gpu_seconds) < 1e-3


def ambiguous_samples(out: Path) -> int:
    """Samples (each covering the minute before it) whose job has two runs on the sample's node
    that both overlap the sample: from sacct.psv and utilization.json alone."""
    lines = (out / "sacct.psv").read_text().splitlines()
    col = {name: i for i, name in enumerate(lines[0].split("|"))}
    runs: dict[tuple[str, str], list[tuple[int, int]]] = {}
    for line in lines[1:]:
        f = line.split("|")
        if f[col["Start"]] in ("None", "Unknown") or "gres/gpu=" not in f[col["AllocTRES"]]:
            continue
        start = _epoch(f[col["Start"]])
        end = 10**12 if f[col["End"]] == "Unknown" else _epoch(f[col["End"]])
        for node in expand_hostlist(f[col["NodeList"]]):
            runs.setdefault((f[col["JobIDRaw"]], node), []).append((start, end))
    count = 0
    lines = (out / "utilization.json").read_text().splitlines()
    result = [s for line in lines for s in json.loads(line)["data"]["result"]]
    for series in result:
        labels = series["metric"]
        spans = runs.get((labels["hpc_job"], labels["Hostname"]), [])
        if len(spans) < 2:
            continue
        for t, _ in series["values"]:
            overlapping = [1 for s, e in spans if s < t and e > t - STEP_S]
            count += len(overlapping) > 1
    return count


def _reference_points(job: _Job, idle_until_s: int, after_s: int) -> list[list[object]]:
    """One sample per step the job overlaps, after ``after_s``, computed one by one: the busy
    share of the interval ending at the sample x the busy activity."""
    first = (job.start_s // STEP_S + 1) * STEP_S
    points: list[list[object]] = []
    for t in range(first, job.end_s + STEP_S, STEP_S):
        busy = max(0, min(t, job.end_s) - max(t - STEP_S, idle_until_s, job.start_s))
        if t > after_s:
            points.append([t, f"{BUSY_PERCENT * busy / STEP_S:.4g}"])
    return points


@settings(max_examples=400)
@given(
    start=st.integers(1_796_000_000, 1_796_000_000 + 3 * STEP_S),
    duration=st.integers(1, 12 * STEP_S),
    idle=st.integers(0, 14 * STEP_S),
    after=st.integers(0, 1_796_000_000 + 14 * STEP_S),
)
def test_the_series_text_is_each_sample_computed_on_its_own(
    start: int, duration: int, idle: int, after: int
) -> None:
    """The writer joins precomputed idle and busy runs of the grid: it must give exactly the
    samples a sample-by-sample computation gives, at every edge (stall ends mid-step, jobs shorter
    than a step, a GPU's earlier sample inside the job)."""
    job = _Job(job_id="1", start_s=start, end_s=start + duration, nodes=("n1",), gpus_per_node=1)
    after_s = 0 if after < 1_796_000_000 else after // STEP_S * STEP_S
    idle_until = min(start + idle, job.end_s)
    grid = _Grid(STEP_S, 1_796_000_000)
    text, count, last = grid.values(job, idle_until, after_s)
    expected = _reference_points(job, idle_until, after_s)
    assert json.loads(f"[{text}]") == expected
    assert count == len(expected)
    if expected:
        assert last == expected[-1][0]
