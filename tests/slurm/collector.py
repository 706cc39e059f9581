"""``gpuyield collect`` against the running lab: every 30 s during the workload, once more at the
window end (twice: the second must add nothing), and across a stop and restart of the daemons.

The outcomes are recorded in a ``Collected`` for the tests (tests/slurm/test_collect.py); the lab
is gone by then, so everything a test needs is kept here, with the raw output under ``keep/raw``.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.slurm import lab, oracle

INTERVAL_S = 30
CLUSTER = "lab"


@dataclass(frozen=True, kw_only=True, slots=True)
class CliRun:
    """One ``gpuyield`` call: exit code, stdout, stderr."""

    rc: int
    stdout: str
    stderr: str

    def json(self) -> dict[str, Any]:
        data: dict[str, Any] = json.loads(self.stdout)
        return data


@dataclass(kw_only=True, slots=True)
class Collected:
    """What the collections did (filled in while the lab runs)."""

    db: Path
    raw: Path
    since_s: int
    lake: Path  # every collect also writes the store into this lake (tests/slurm/test_lake.py)
    runs: list[CliRun] = field(default_factory=list)  # every 30 s, then the final one
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
            self.state.runs.append(self.collect())
            if self._stop.wait(INTERVAL_S):
                return

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
