"""``gpuyield collect`` against the running lab: every 30 s during the workload, twice in a row once
it is done (a job running and one waiting, nothing changing in between), once more at the window
end (twice: the second must add nothing), and across a stop and restart of the daemons.

Each collection during the workload is an ``Instant``: right before and right after it, the test
captures what one ``ingest slurm`` of the whole period would read at the collection's ``--until``
(sacct from the collections' start, node events), and between them the controller's view
(``scontrol -d -o show job``, ``squeue``, nodes, reservations), and keeps a copy of the store as
the collection left it. When the before and after captures are the same bytes, nothing changed
while the collection ran, and the store must equal one ingest of that capture
(tests/slurm/test_collect.py). The lab is gone by the time the tests run, so everything a test
needs is kept here, with the raw output under ``keep/raw`` and each instant under
``keep/instants/NN``.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpuyield.ingest.collect_commands import EVENT_FORMAT, RESERVATION_FORMAT, SACCT_FORMAT
from tests.slurm import lab, oracle

INTERVAL_S = 30
CLUSTER = "lab"
# What squeue says is allocated and waiting: the job's allocated TRES (requested, while pending).
SQUEUE = ("squeue", "-h", "-t", "PD,R", "-O",
          "JobID:20,State:14,Reason:40,SubmitTime:22,StartTime:22,tres-alloc:300")  # fmt: skip


@dataclass(frozen=True, kw_only=True, slots=True)
class CliRun:
    """One ``gpuyield`` call: exit code, stdout, stderr."""

    rc: int
    stdout: str
    stderr: str

    def json(self) -> dict[str, Any]:
        data: dict[str, Any] = json.loads(self.stdout)
        return data


@dataclass(frozen=True, kw_only=True, slots=True)
class Instant:
    """One collection and Slurm's state at its ``--until`` (files in ``folder``)."""

    end_s: int
    run: CliRun
    folder: Path  # sacct.psv, events.psv, nodes.txt, reservations.psv, jobs-detail.txt,
    # squeue.txt: the capture; store.duckdb: the store right after the collection
    stable: bool  # sacct and events printed the same right before and right after the collection,
    # no job changed in the instant's own second or later, and squeue shows the same instant

    @property
    def store(self) -> Path:
        return self.folder / "store.duckdb"


@dataclass(kw_only=True, slots=True)
class Collected:
    """What the collections did (filled in while the lab runs)."""

    db: Path
    raw: Path
    since_s: int
    lake: Path  # every collect also writes the store into this lake (tests/slurm/test_lake.py)
    runs: list[CliRun] = field(default_factory=list)  # every 30 s, then the final one
    instants: list[Instant] = field(default_factory=list)  # the collections during the workload
    quiet: tuple[Instant, Instant] | None = None  # two in a row after it: nothing changed
    end_s: int | None = None
    again: CliRun | None = None  # the final collect run a second time
    report_before_again: str = ""  # report --json bytes around the second run
    report_after_again: str = ""
    stopped: CliRun | None = None  # collect while the daemons were stopped
    stopped_hash_before: str = ""
    stopped_hash_after: str = ""
    resumed: CliRun | None = None  # collect after the restart
    doctor: CliRun | None = None  # gpuyield doctor --db at the window end
    doctor_stopped: CliRun | None = None  # the same while the daemons were stopped
    resume_db: Path | None = None


def gpuyield_cli(*args: str | Path, env: dict[str, str] | None = None) -> CliRun:
    """Run the real CLI (never fails the test by itself)."""
    proc = subprocess.run(
        [sys.executable, "-m", "gpuyield", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
        env=env,
    )
    return CliRun(rc=proc.returncode, stdout=proc.stdout, stderr=proc.stderr)


def _state(accounting: dict[str, str]) -> tuple[str, list[dict[str, str]]]:
    """What must not change while a collection runs: sacct's bytes, and the node events less
    their ``Duration`` (an open event's grows with the clock)."""
    events = [{k: v for k, v in r.items() if k != "Duration"}
              for r in oracle.psv_records(accounting["events.psv"])]  # fmt: skip
    return accounting["sacct.psv"], events


def _at_or_after(sacct: str, end_s: int) -> bool:
    """True when a job's submit, start or end time is ``end_s`` or later."""
    times = (oracle.parse_time(r[k]) for r in oracle.psv_records(sacct)
             for k in ("Submit", "Start", "End"))  # fmt: skip
    return any(t is not None and t >= end_s for t in times)


@dataclass(frozen=True, kw_only=True, slots=True)
class QueuedJob:
    """One row of ``SQUEUE`` (fixed-width columns: a reason may hold spaces)."""

    job: str
    state: str
    reason: str
    submit_s: int | None
    start_s: int | None
    gpus: int


def squeue_rows(text: str) -> list[QueuedJob]:
    """``SQUEUE``'s rows."""
    rows = []
    for line in text.splitlines():
        if not line.strip():
            continue
        cut = [line[a:b].strip() for a, b in ((0, 20), (20, 34), (34, 74), (74, 96), (96, 118))]
        match = re.search(r"gres/gpu=(\d+)", line[118:])
        rows.append(QueuedJob(job=cut[0], state=cut[1], reason=cut[2],
                              submit_s=_time(cut[3]), start_s=_time(cut[4]),
                              gpus=int(match.group(1)) if match else 0))  # fmt: skip
    return rows


def _time(text: str) -> int | None:
    """A squeue time; None for ``N/A``, ``Unknown`` and the like."""
    try:
        return oracle.parse_time(text)
    except ValueError:
        return None


def _settled(squeue: str, end_s: int) -> bool:
    """True when squeue, printed a little after ``end_s``, shows no job submitted or started at
    ``end_s`` or later: its view is then the one at ``end_s``."""
    for row in squeue_rows(squeue):
        if row.submit_s is None or row.submit_s >= end_s:
            return False
        if row.state == "RUNNING" and (row.start_s is None or row.start_s >= end_s):
            return False
    return True


def _reason_lagging(squeue: str, sacct: str) -> bool:
    """True when squeue still gives a job's begin time as why it waits while sacct already lists it
    as eligible: Slurm refreshes a pending job's reason on its next scheduling pass, so for a few
    seconds after the begin time the two disagree (seen in CI: pending 9 in the store, 8 by squeue).
    """
    pending = [r for r in oracle.psv_records(sacct) if r["State"] == "PENDING"]
    eligible = {r["JobIDRaw"] for r in pending} | {r["JobID"] for r in pending}  # arrays: 12_3
    return any(
        row.state == "PENDING" and row.reason == "BeginTime" and row.job in eligible
        for row in squeue_rows(squeue)
    )


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


class Collector:
    """Collects in a background thread while the workload runs."""

    def __init__(self, lab_dir: Path, keep: Path) -> None:
        self.env = {**lab.lab_env(lab_dir), "PYTHONPATH": os.environ.get("PYTHONPATH", "")}
        registered_s, _ = oracle.parse_events(
            lab.run(["sacctmgr", "-P", "show", "event", "All_Time",
                     "format=Cluster,ClusterNodes,NodeName,Event,EventRaw,State,StateRaw,Start,"
                     "End,Duration,Reason,User,TRES"], self.env, timeout_s=60)
        )  # fmt: skip
        assert registered_s is not None, "the lab registers its cluster on start"
        # From the top of the registration's hour, as the session's capture (conftest.py).
        self.state = Collected(
            db=keep / "collected.duckdb",
            raw=keep / "raw",
            since_s=registered_s - registered_s % 3600,
            lake=keep / "lake",
        )
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def __enter__(self) -> Collector:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=600)

    def collect(self, *extra: str | Path) -> CliRun:
        return gpuyield_cli(
            "collect", "--db", self.state.db, "--since", oracle.format_time(self.state.since_s),
            "--keep-raw", self.state.raw, "--lake", self.state.lake, "--json", *extra,
            env=self.env,
        )  # fmt: skip

    def _loop(self) -> None:
        while True:
            self.collect_instant()
            if self._stop.wait(INTERVAL_S):
                return

    def collect_instant(self) -> Instant:
        """A collection up to now, bracketed by captures of the whole period at that instant."""
        end_s = int(time.time())
        folder = self.state.db.parent / "instants" / f"{len(self.state.instants):02d}"
        folder.mkdir(parents=True)
        before = self._accounting(end_s)
        run = self.collect("--until", oracle.format_time(end_s))
        self.state.runs.append(run)
        since = oracle.format_time(self.state.since_s)
        for name, args in {
            "jobs-detail.txt": ("scontrol", "-d", "-o", "show", "job"),
            "squeue.txt": SQUEUE,
            "nodes.txt": ("scontrol", "-o", "show", "nodes"),
            "reservations.psv": ("sacctmgr", "-P", "show", "reservation", f"clusters={CLUSTER}",
                                 f"start={since}", f"format={RESERVATION_FORMAT}"),
        }.items():  # fmt: skip
            (folder / name).write_text(lab.run(list(args), self.env, timeout_s=60))
        after = self._accounting(end_s)
        for name, text in before.items():
            (folder / name).write_text(text)
            (folder / f"after-{name}").write_text(after[name])
        if run.rc == 0:
            shutil.copyfile(self.state.db, folder / "store.duckdb")
        # A job that started, ended or was submitted in the instant's own second is in Slurm's
        # view (squeue) but not in the window before the instant: compared elsewhere, not here.
        squeue = (folder / "squeue.txt").read_text()
        stable = (
            _state(before) == _state(after)
            and not _at_or_after(after["sacct.psv"], end_s)
            and _settled(squeue, end_s)
            and not _reason_lagging(squeue, after["sacct.psv"])
        )
        instant = Instant(end_s=end_s, run=run, folder=folder, stable=stable)
        self.state.instants.append(instant)
        return instant

    def _accounting(self, end_s: int) -> dict[str, str]:
        """sacct of the whole period up to ``end_s`` and the node events, as collect asks."""
        sacct = ("sacct", "-a", "-P", "-X", "-D", f"--clusters={CLUSTER}",
                 f"--format={SACCT_FORMAT}", "-S", oracle.format_time(self.state.since_s),
                 "-E", oracle.format_time(end_s))  # fmt: skip
        events = ("sacctmgr", "-P", "show", "event", "All_Time", f"clusters={CLUSTER}",
                  f"format={EVENT_FORMAT}")  # fmt: skip
        return {
            "sacct.psv": lab.run(list(sacct), self.env, timeout_s=60),
            "events.psv": lab.run(list(events), self.env, timeout_s=60),
        }

    def quiet_pair(self) -> None:
        """Two collections a few seconds apart once the workload is done: one job runs, one
        waits, nothing changes in between (sacct prints the same bytes twice)."""
        time.sleep(3)  # the workload ends as a job leaves: let that second pass
        first = self.collect_instant()
        time.sleep(3)
        self.state.quiet = (first, self.collect_instant())

    def at_window_end(self, end_s: int) -> None:
        """The last collection, up to the window's end; then the same again (adds nothing)."""
        until = oracle.format_time(end_s)
        self.state.end_s = end_s
        self.state.runs.append(self.collect("--until", until))
        self.state.report_before_again = self._report()
        self.state.again = self.collect("--until", until)
        self.state.report_after_again = self._report()
        self.state.doctor = gpuyield_cli("doctor", "--db", self.state.db, "--json", env=self.env)

    def _report(self) -> str:
        return gpuyield_cli("report", "--db", self.state.db, "--json", env=self.env).stdout

    def while_stopped(self) -> None:
        """Slurm's daemons are stopped: collect must fail, naming the command, and change nothing."""
        resume = self.state.db.with_name("resume.duckdb")
        shutil.copyfile(self.state.db, resume)
        self.state.resume_db = resume
        self.state.stopped_hash_before = _sha256(resume)
        self.state.stopped = gpuyield_cli(
            "collect", "--db", resume, "--cluster", CLUSTER, "--json", env=self.env
        )
        self.state.stopped_hash_after = _sha256(resume)
        self.state.doctor_stopped = gpuyield_cli("doctor", "--json", env=self.env)

    def after_restart(self, env: dict[str, str]) -> None:
        """The daemons are back: collect resumes from the store's watermark."""
        assert self.state.resume_db is not None
        self.state.resumed = gpuyield_cli(
            "collect", "--db", self.state.resume_db, "--cluster", CLUSTER, "--json",
            env={**env, "PYTHONPATH": self.env["PYTHONPATH"]},
        )  # fmt: skip
