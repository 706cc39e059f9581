"""Running jobs' run tags from ``scontrol -d -o show job`` (issue 25), on a real recording.

Slurm stores a job's comment in accounting only at its end (``fixtures/live-comments/``): without the
controller's copy a released run reads as an experiment for as long as it runs, then jumps. The
recording has a release run (job 1, ``run=pt-live,family=fam-a``), a comment with spaces and ``=``
(job 2), a comment changed while the job ran (job 3, ``old-name`` then ``new-name``), a pending and
a held job. The lab does the same end to end (tests/slurm/test_collect.py).
"""

from __future__ import annotations

import calendar
import time
from pathlib import Path

from gpuyield.ingest.jobs_detail import read_jobs_detail
from gpuyield.ingest.slurm import SlurmInputs, ingest_slurm
from gpuyield.report.summary import build_report
from gpuyield.store import connect

FIXTURE = Path(__file__).with_name("fixtures") / "live-comments"
RUNNING = FIXTURE / "sacct-running.psv"
SINCE_S = calendar.timegm(time.strptime("2026-12-02T05:01:33", "%Y-%m-%dT%H:%M:%S"))
START_S = SINCE_S + 3  # 05:01:36, every running job's start
T1_S, T3_S, ENDED_S = SINCE_S + 8, SINCE_S + 35, SINCE_S + 87  # 05:01:41, 05:02:08, 05:03:00
END_OF_RUNS_S = SINCE_S + 78  # 05:02:51
MANIFEST = """[runs]
match = "comment:run=(?P<run>[^,\\\\s]+)"

[[releases]]
model = "live-v1"
runs = ["pt-live"]
"""


def _comments(name: str) -> dict[str, str]:
    stage = read_jobs_detail(FIXTURE / name, tz="UTC", lenient=False, cluster="lab")
    return {r["job_id_raw"]: r["comment"] for r in stage.comments.to_pylist()}


def test_the_running_jobs_comments_are_read_as_printed() -> None:
    """Running jobs only (the pending and the held job have no start); spaces and ``=`` kept."""
    assert _comments("scontrol-d-o-show-job-t1.txt") == {
        "1": "run=pt-live,family=fam-a",
        "2": "run=sp1 note=two words StdErr=x",
        "3": "run=old-name",
        "6": "run=cpu1",
    }
    later = _comments("scontrol-d-o-show-job-t3.txt")
    assert later["3"] == "run=new-name"
    assert _comments("scontrol-d-show-job-t3.txt") == later  # the multi-line form
    assert _comments("scontrol-d-o-show-job-ended.txt") == {}  # ended: sacct has them now


def test_a_comment_with_keys_in_it_does_not_confuse_the_gpu_groups() -> None:
    stage = read_jobs_detail(FIXTURE / "scontrol-d-o-show-job-t1.txt", tz="UTC", lenient=False,
                             cluster="lab")  # fmt: skip
    held = {(r["job_id_raw"], r["node"], r["gpu"]) for r in stage.gpus.to_pylist()}
    assert {g for j, n, g in held if j == "2"} == {0} and ("2", "n2", 0) in held


def _ingest(db: Path, sacct: str, detail: str, until_s: int) -> None:
    manifest = db.with_name("manifest.toml")
    manifest.write_text(MANIFEST)
    inputs = SlurmInputs(sacct=FIXTURE / sacct, jobs_detail=FIXTURE / detail,
                         events=FIXTURE / "events.psv", nodes=FIXTURE / "nodes.txt",
                         manifest=manifest)  # fmt: skip
    ingest_slurm(db, inputs, since_s=SINCE_S, until_s=until_s, cluster="lab")


def _jobs(db: Path) -> dict[str, tuple[str, str | None]]:
    con = connect(db, read_only=True)
    try:
        rows = con.execute("SELECT job_id_raw, state, comment FROM jobs").fetchall()
    finally:
        con.close()
    return {str(j): (str(s), c) for j, s, c in rows}


def test_a_released_run_counts_as_released_while_it_runs(tmp_path: Path) -> None:
    """Released from its start, at every capture; corrected, never doubled, when sacct has the
    final comment."""
    db = tmp_path / "db.duckdb"
    _ingest(db, "sacct-running.psv", "scontrol-d-o-show-job-t1.txt", T1_S)
    assert build_report(db).categories["released"] == 4 * (T1_S - START_S)
    assert _jobs(db)["3"] == ("RUNNING", "run=old-name")
    # The same sacct bytes later, the comment of job 3 changed meanwhile.
    _ingest(db, "sacct-running.psv", "scontrol-d-o-show-job-t3.txt", T3_S)
    assert build_report(db).categories["released"] == 4 * (T3_S - START_S)
    assert _jobs(db)["3"] == ("RUNNING", "run=new-name")
    # Ended: sacct's comment is final; one row per job, as before.
    _ingest(db, "sacct-ended.psv", "scontrol-d-o-show-job-ended.txt", ENDED_S)
    final = build_report(db)
    assert final.categories["released"] == 4 * (END_OF_RUNS_S - START_S)
    jobs = _jobs(db)
    assert set(jobs) == {"1", "2", "3", "4", "6"}
    assert {j: c for j, (_, c) in jobs.items()} == {
        "1": "run=pt-live,family=fam-a", "2": "run=sp1 note=two words StdErr=x",
        "3": "run=new-name", "4": "run=waiter", "6": "run=cpu1",
    }  # fmt: skip


def test_without_the_controllers_copy_the_run_is_an_experiment(tmp_path: Path) -> None:
    """The counterfactual the issue reported: sacct alone says nothing is released yet."""
    db = tmp_path / "db.duckdb"
    ingest_slurm(db, SlurmInputs(sacct=RUNNING, events=FIXTURE / "events.psv"),
                 since_s=SINCE_S, until_s=T1_S, cluster="lab")  # fmt: skip
    assert build_report(db).categories.get("released", 0) == 0


def test_the_pending_job_asks_for_its_gpus(tmp_path: Path) -> None:
    """ReqTRES of the pending job (its AllocTRES is empty) is what it waits for."""
    from gpuyield.ledger.ledger import backend_for
    from gpuyield.ledger.now import waiting_at

    db = tmp_path / "db.duckdb"
    _ingest(db, "sacct-running.psv", "scontrol-d-o-show-job-t1.txt", T1_S)
    con = connect(db, read_only=True)
    try:
        waiting = waiting_at(backend_for(con), T1_S)
    finally:
        con.close()
    assert (waiting.jobs, waiting.gpus) == (1, 8)
