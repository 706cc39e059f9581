"""Between captures: a store fed by collect equals one capture at every collection (issue 25).

The recorded sacct (``examples/slurm-lab/``) is replayed as it printed at each collection's ``-E``
(``sacct_replay.py``). Between 10:46:30 and 10:49:00 no job starts or ends (jobs 32-36 run); the
requeued runs of 28 and 30 become eligible at 10:46:52 and wait from then on, so from 10:47:00 to
10:49:00 sacct prints the same bytes. The running jobs must still hold their GPUs up to 10:49:00,
as one collection to 10:49:00 says, and serve's gauges must say what was true then. The real lab
does the same every 30 s (tests/slurm/test_collect.py).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuyield.ingest.collect import collect
from gpuyield.report.summary import build_report
from gpuyield.store import connect
from tests.ingest.recorded_slurm import RecordedSlurm

SINCE_S = 1_796_032_800  # 2026-11-30T10:00:00Z
EARLY_S = SINCE_S + 46 * 60 + 30  # 10:46:30
FIRST_S = SINCE_S + 47 * 60  # 10:47:00
SECOND_S = SINCE_S + 49 * 60  # 10:49:00
RUNNING_AT_BOTH = {"32", "33", "34", "35", "36"}


@pytest.fixture
def slurm(tmp_path: Path) -> RecordedSlurm:
    recorded = RecordedSlurm(tmp_path / "slurm")
    recorded.replay_sacct()
    return recorded


def _numbers(db: Path) -> dict[str, object]:
    report = build_report(db).to_dict()
    keys = ("window", "installed_gpu_seconds", "categories", "subcategories",
            "allocated_gpu_seconds", "coverage")  # fmt: skip
    return {k: report[k] for k in keys}


def _gauges(db: Path) -> dict[str, float]:
    """``/metrics``' allocated and pending GPUs (what serve renders from the store)."""
    from prometheus_client.parser import text_string_to_metric_families

    from gpuyield.serve.metrics import CollectionStats, render
    from gpuyield.serve.snapshot import build_snapshot

    text = render(build_snapshot(db, top_accounts=50, with_page=False), CollectionStats()).decode()
    values = {s.name: s.value for f in text_string_to_metric_families(text) for s in f.samples}
    return {
        "allocated": values["gpuyield_allocated_gpus"],
        "pending": values["gpuyield_pending_gpus"],
    }


def _running(db: Path) -> dict[str, int]:
    """Running jobs and the capture time their GPUs are held to."""
    con = connect(db, read_only=True)
    try:
        rows = con.execute(
            "SELECT j.job_id_raw, i.as_of_s FROM jobs j JOIN ingests i USING (ingest_id) "
            "WHERE j.end_s IS NULL AND j.start_s IS NOT NULL"
        ).fetchall()
    finally:
        con.close()
    return {str(job): int(as_of) for job, as_of in rows}


def test_the_replay_prints_the_same_output_at_both_instants(slurm: RecordedSlurm) -> None:
    """The premise: nothing in the sacct output changes between the two collections."""
    import subprocess

    def printed(end: str) -> str:
        argv = [str(slurm.bin / "sacct"), "--format=JobIDRaw,State,Start,End,Comment",
                "-S", "2026-11-30T10:00:00", "-E", end]  # fmt: skip
        return subprocess.run(argv, capture_output=True, text=True, check=True).stdout

    early = printed("2026-11-30T10:46:30")
    first, second = printed("2026-11-30T10:47:00"), printed("2026-11-30T10:49:00")
    assert first == second != early
    assert {line.split("|")[0] for line in first.splitlines() if "|PENDING|" in line} == {
        "28",
        "30",
    }
    assert {line.split("|")[0] for line in first.splitlines() if "|RUNNING|" in line} == (
        RUNNING_AT_BOTH
    )


def test_a_collection_with_nothing_new_extends_the_running_jobs(
    tmp_path: Path, slurm: RecordedSlurm
) -> None:
    """Collect to 10:46:30, 10:47:00, then to 10:49:00 (nothing changed since 10:47:00): the same
    report as one collect to 10:49:00, category by category, the running jobs held to 10:49:00,
    and serve's allocated and pending GPUs those of 10:49:00."""
    two = tmp_path / "two.duckdb"
    collect(two, since_s=SINCE_S, until_s=EARLY_S, slurm_bin=slurm.bin)
    collect(two, until_s=FIRST_S, slurm_bin=slurm.bin)
    assert set(_running(two)) == RUNNING_AT_BOTH
    later = collect(two, until_s=SECOND_S, slurm_bin=slurm.bin)
    one = tmp_path / "one.duckdb"
    collect(one, since_s=SINCE_S, until_s=SECOND_S, slurm_bin=slurm.bin)
    assert _running(two) == dict.fromkeys(RUNNING_AT_BOTH, SECOND_S) == _running(one)
    assert _numbers(two) == _numbers(one)
    # Jobs 32-36 hold 8 + 6 + 4 + 2 + 2 GPUs; the requeued 28 and 30 ask for 2 each.
    assert _gauges(two) == _gauges(one) == {"allocated": 22.0, "pending": 4.0}
    # Every job the second query printed is counted, as unchanged (not silently 0, 0, 0).
    assert (later.jobs_new, later.jobs_updated, later.jobs_unchanged) == (0, 0, 39)
    sacct = next(f for f in later.ingest.files if f.source == "slurm.sacct")
    assert not sacct.skipped and sacct.rows_read == 39


def test_collecting_to_the_same_instant_again_is_still_a_no_op(
    tmp_path: Path, slurm: RecordedSlurm
) -> None:
    """The same instant twice: nothing runs, nothing moves, the report is the same."""
    db = tmp_path / "db.duckdb"
    collect(db, since_s=SINCE_S, until_s=FIRST_S, slurm_bin=slurm.bin)
    before = build_report(db).to_dict()
    again = collect(db, until_s=FIRST_S, slurm_bin=slurm.bin)
    assert again.commands == ()
    assert build_report(db).to_dict() == before
