"""The scaling ladder on the real Slurm lab: `ladder`, `preflight` and the report's
`waste_in_skipped_rungs`, with every expected number taken from Slurm's own sacct output."""

from __future__ import annotations

import json
import subprocess
import sys
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest

from tests.slurm import oracle
from tests.slurm.conftest import LabRun, gpuyield, ledger_report

pytestmark = pytest.mark.slurm


@pytest.fixture(scope="module")
def ladder_db(lab_run: LabRun) -> Path:
    phase = lab_run.ladder
    assert phase is not None
    db = lab_run.keep / "ladder.duckdb"
    gpuyield(
        "ingest", "slurm", "--db", db,
        "--sacct", phase.capture / "sacct.psv",
        "--events", phase.capture / "events.psv",
        "--nodes", phase.capture / "nodes.txt",
        "--manifest", phase.capture / "manifest.toml",
        "--until", oracle.format_time(phase.end_s),
    )  # fmt: skip
    return db


def _jobs(lab_run: LabRun) -> dict[str, oracle.JobRun]:
    phase = lab_run.ladder
    assert phase is not None
    rows = oracle.parse_sacct((phase.capture / "sacct.psv").read_text())
    by_id = {j.job_id: j for j in rows}
    return {role: by_id[job_id] for role, job_id in phase.job_ids.items()}


def preflight(db: Path, family: str, gpus: int, at: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gpuyield", "preflight", "--db", str(db),
         "--family", family, "--gpus", str(gpus), "--at", at],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip


def test_the_ladder_workload_ran_as_planned(lab_run: LabRun) -> None:
    jobs = _jobs(lab_run)
    assert {r: (j.state, j.num_gpus) for r, j in jobs.items()} == {
        "yolo-16": ("FAILED", 16),
        "ladder-climb-1": ("COMPLETED", 1),
        "ladder-climb-8": ("COMPLETED", 8),
        "ladder-climb-16": ("COMPLETED", 16),
    }
    climb = [jobs[f"ladder-climb-{g}"] for g in (1, 8, 16)]
    assert all(a.end_s is not None and b.start_s is not None and a.end_s <= b.start_s
               for a, b in pairwise(climb))  # fmt: skip


def test_ladder_shows_the_climb_and_the_jump(ladder_db: Path, lab_run: LabRun) -> None:
    data = json.loads(gpuyield("report", "ladder", "--db", ladder_db, "--json"))
    families = {f["name"]: f for f in data["families"]}
    assert sorted(families) == ["climb", "yolo"]
    jobs = _jobs(lab_run)
    climb = families["climb"]
    assert [(c["rung"], c["run"]) for c in climb["climbed"]] == [
        ("1", "ladder-climb-1"), ("8", "ladder-climb-8"), ("16", "ladder-climb-16"),
    ]  # fmt: skip
    assert [r["skipped"] for r in climb["runs"]] == [False, False, False]
    (jump,) = families["yolo"]["runs"]
    assert (jump["run"], jump["skip"], jump["missing_rungs"]) == ("yolo-16", "none -> 16", [1, 8])
    assert jump["outcome"] == "FAILED"
    assert jump["categories"] == {"failed": 16 * jobs["yolo-16"].elapsed_s}
    text = gpuyield("report", "ladder", "--db", ladder_db)
    assert "skipped none -> 16" in text


def test_preflight_exit_codes(ladder_db: Path, lab_run: LabRun) -> None:
    phase = lab_run.ladder
    assert phase is not None
    at = oracle.format_time(phase.end_s)
    assert preflight(ladder_db, "climb", 16, at).returncode == 0
    assert preflight(ladder_db, "climb", 8, at).returncode == 0
    assert preflight(ladder_db, "yolo", 1, at).returncode == 0
    refused = preflight(ladder_db, "yolo", 16, at)
    assert refused.returncode == 3, refused.stderr
    assert "needs a completed run on 8 GPUs" in refused.stderr
    assert "missing rung(s) 1, 8" in refused.stderr
    assert preflight(ladder_db, "yolo", 8, at).returncode == 3
    # Before the climb finished, its top rung was not open yet.
    climb8 = _jobs(lab_run)["ladder-climb-8"]
    assert climb8.start_s is not None
    early = preflight(ladder_db, "climb", 16, oracle.format_time(climb8.start_s))
    assert early.returncode == 3 and "largest completed is 1 GPUs" in early.stderr


def test_waste_in_skipped_rungs_is_the_jumping_familys_failure(
    ladder_db: Path, lab_run: LabRun
) -> None:
    report: dict[str, Any] = ledger_report(ladder_db)
    waste = report["waste_in_skipped_rungs"]
    jump = _jobs(lab_run)["yolo-16"]
    failed_gpu_s = jump.num_gpus * jump.elapsed_s
    assert failed_gpu_s > 0
    assert waste["skipped"]["runs"] == 1
    assert waste["skipped"]["wasted"] == {"failed": failed_gpu_s, "cancelled": 0, "diverged": 0}
    assert waste["skipped"]["wasted_gpu_seconds"] == failed_gpu_s
    assert waste["climbed"]["runs"] == 3
    assert waste["climbed"]["wasted_gpu_seconds"] == 0
    climbed = sum(j.num_gpus * j.elapsed_s for r, j in _jobs(lab_run).items() if r != "yolo-16")
    assert waste["climbed"]["gpu_seconds"] == climbed


def test_the_example_prolog_judges_held_jobs_through_scontrol(lab_run: LabRun) -> None:
    """examples/ladder/preflight-prolog.sh as slurmctld runs it: SLURM_JOB_ID only."""
    phase = lab_run.ladder
    assert phase is not None
    status, output = phase.hook["yolo-again"]
    assert status == 3, output
    assert "family yolo on 32 GPUs needs a completed run on 16 GPUs" in output
    status, output = phase.hook["climb-next"]
    assert status == 0, output
    assert "family climb may launch on 32 GPUs" in output
