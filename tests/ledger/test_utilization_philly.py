"""A real trace: Microsoft Philly's per-GPU utilization and job placement, ingested and ledgered.

The slice (tests/ingest/fixtures/philly, cited in its README) holds three jobs on five machines
on 2017-11-16 around 07:51 PST, with the per-minute readings of the jobs' GPUs from ten minutes
before each start to three minutes after it. tests/ingest/philly.py converts it into sacct rows
and a DCGM ``query_range`` response; this test recomputes each job's allocated-idle GPU-seconds
from the raw files alone and compares them with what gpuyield's ledger says.
"""

from __future__ import annotations

import csv
import json
from datetime import datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from gpuyield.ingest.slurm import SlurmInputs, ingest_slurm
from gpuyield.ingest.utilization import ingest_utilization
from gpuyield.ledger import compute_ledger
from gpuyield.ledger.ledger import backend_for
from gpuyield.report.breakdown import breakdown
from gpuyield.store import connect
from tests.ingest.philly import PHILLY, STEP_S, TZ_NAME, PhillyInputs, write_inputs

IDLE_PCT = 1.0  # gpuyield's default idle threshold, 1% activity


def _epoch(text: str) -> int:
    return int(datetime.fromisoformat(text).replace(tzinfo=ZoneInfo(TZ_NAME)).timestamp())


def raw_readings() -> dict[tuple[str, str, int], float]:
    """(machine, GPU, epoch t) -> percent, from the per-job files; overlapping minutes once."""
    readings: dict[tuple[str, str, int], float] = {}
    for job in json.loads((PHILLY / "sampled_jobs.json").read_text()):
        minute0 = datetime.fromisoformat(job["start_time"]).replace(second=0)
        with (PHILLY / "gpu_util" / f"{job['jobid']}.csv").open() as f:
            rows = list(csv.reader(f))
        for row in rows[1:]:
            machine, gpu = row[0].split("_")
            for offset, value in zip(rows[0][3:], row[3:], strict=True):
                at = minute0 + timedelta(minutes=int(offset))
                if value:
                    readings[(machine, gpu, _epoch(at.isoformat(sep=" ")))] = float(value)
    return readings


def held_readings() -> dict[str, list[tuple[int, float, int, int]]]:
    """Per Slurm job id, ``(t, percent, start, end)`` of the readings taken while it held the GPU.

    A reading at ``t`` is the job's that held that machine's GPU at ``t`` (the exporter's label).
    """
    readings = raw_readings()
    held_by: dict[str, list[tuple[int, float, int, int]]] = {}
    for job in json.loads((PHILLY / "sampled_jobs.json").read_text()):
        start, end = _epoch(job["start_time"]), _epoch(job["end_time"])
        held = {(d["ip"], g) for d in job["detail"] for g in d["gpus"]}
        held_by[job["jobid"].rsplit("_", 1)[1]] = [
            (t, pct, start, end)
            for (machine, gpu, t), pct in readings.items()
            if (machine, gpu) in held and start <= t < end
        ]
    return held_by


def independent_idle_by_job(since_s: int, until_s: int) -> dict[str, float]:
    """Per job, seconds of its readings below 1%: a reading at ``t`` covers ``[t - 60, t)``, and
    its part inside the job's run and the window counts."""
    idle: dict[str, float] = {}
    for job, readings in held_readings().items():
        seconds = 0.0
        for t, pct, start, end in readings:
            if pct < IDLE_PCT:
                seconds += max(0.0, min(t, end, until_s) - max(t - STEP_S, start, since_s))
        idle[job] = seconds
    return idle


def philly_db(tmp_path: Path) -> tuple[Path, PhillyInputs]:
    inputs = write_inputs(tmp_path / "inputs")
    db = tmp_path / "db.duckdb"
    slurm = SlurmInputs(sacct=inputs.sacct, events=inputs.events, nodes=inputs.nodes)
    ingest_slurm(db, slurm, since_s=inputs.since_s, until_s=inputs.capture_until_s, tz=TZ_NAME)
    ingest_utilization(db, prom_json=[inputs.prom_json], step_s=STEP_S)
    return db, inputs


def test_philly_idle_per_job_matches_the_raw_samples(tmp_path: Path) -> None:
    db, inputs = philly_db(tmp_path)
    con = connect(db, read_only=True)
    try:
        backend = backend_for(con)
        ledger = compute_ledger(
            backend, since_s=inputs.since_s, until_s=inputs.until_s, keep_segments=True
        )
        by_job = breakdown(ledger, "job", top=0, backend=backend)
    finally:
        con.close()
    expected = independent_idle_by_job(inputs.since_s, inputs.until_s)
    assert set(expected) == {"44664", "44710", "44749"}
    # The real data has both: a job whose GPUs sat at 0% and jobs that kept theirs busy.
    assert max(expected.values()) > 0 and min(expected.values()) < max(expected.values())
    got = {r.key: r.categories.get("idle", 0.0) for r in by_job.rows}
    for job, seconds in expected.items():
        assert got[job] == pytest.approx(seconds, abs=1e-6), job
    assert ledger.subcategories["idle.allocated"] == pytest.approx(sum(expected.values()))
    assert sum(ledger.categories.values()) == pytest.approx(ledger.installed_gpu_seconds)
    total = sum(r.total_gpu_seconds for r in by_job.rows)
    assert total == pytest.approx(ledger.installed_gpu_seconds)
    # Five 8-GPU machines over the window the readings cover.
    assert ledger.installed_gpu_seconds == 5 * 8 * (inputs.until_s - inputs.since_s)


def test_philly_samples_are_all_counted(tmp_path: Path) -> None:
    db, inputs = philly_db(tmp_path)
    con = connect(db, read_only=True)
    try:
        ledger = compute_ledger(backend_for(con), since_s=inputs.since_s, until_s=inputs.until_s)
    finally:
        con.close()
    util = ledger.utilization
    assert util is not None
    s = util.samples
    # 14 readings of each of 8 + 4 + 2 GPUs; m238's two GPUs are in two files, minutes apart.
    assert s.total == len(raw_readings()) == 14 * (8 + 4 + 2)
    assert s.by_job_label == sum(len(r) for r in held_readings().values())
    assert s.total == s.by_job_label + s.by_whole_node + s.unallocated + s.unattributed
    # No job held a whole machine, so unlabelled readings are never guessed to be a job's.
    assert s.by_whole_node == 0
