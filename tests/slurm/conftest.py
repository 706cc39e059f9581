"""Session fixtures: one real Slurm lab per test session, one workload, one capture, one ingest.

``lab_run`` starts the lab, runs ``workload.sh``, captures with the lab's ``capture.sh`` plus the
test's own ``sacct``/``sacctmgr``/``sinfo``/``sreport`` queries, writes the manifest, and stops and
purges the lab before any test runs, so a failing test never leaves daemons behind. ``report`` is
the ledger's answer (``gpuyield ingest slurm`` then ``gpuyield report --json``) for the same window.
Artifacts stay in pytest's tmp dir (``slurm-run*``): capture, workload log, manifest, DB and
``summary.json`` (the ledger's and the oracle's numbers); ``--basetemp DIR`` keeps them put.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

import pytest

from tests.slurm import collector, lab, oracle
from tests.slurm.ladder_lab import LadderCapture, run_ladder_phase
from tests.slurm.typed_lab import TypedCapture, run_typed_phase

# Runs of the release lineage and their roles in workload.sh, whose elapsed time sets the interval.
LINEAGE = ("pt-main", "ft-main")
INTERVAL_FROM_ROLE = {"pt-main": "pt-main-1", "ft-main": "ft-main-2"}
DIVERGED = ("div1",)
# The columns capture.sh and the contract use for events.
EVENT_FORMAT = (
    "Cluster,ClusterNodes,NodeName,Event,EventRaw,State,StateRaw,Start,End,"
    "Duration,Reason,User,TRES"
)


@dataclass(frozen=True, kw_only=True, slots=True)
class Resized:
    """A capture after the lab was restarted with 6 nodes, ran jobs on n5 and n6, and went back
    to 4: sacctmgr shows three registrations, the inventory lacks n5 and n6. Then n3 went into
    a MAINT reservation (reservations.psv), which Slurm writes no node event for."""

    capture: Path  # sacct.psv (-X -D), events.psv (long format), nodes.txt (scontrol -o)
    end_s: int  # capture time: the window's end
    job_ids: tuple[str, ...]  # the jobs on n5/n6


@dataclass(frozen=True, kw_only=True, slots=True)
class LabRun:
    """Everything the tests need from one lab session; the lab itself is already stopped."""

    keep: Path  # artifacts dir
    capture: Path  # capture.sh's output dir (what the ledger ingests)
    manifest: Path
    roles: lab.Roles
    window: oracle.Window  # registration .. chosen end
    jobs: list[oracle.JobRun]  # the test's own sacct -X -D query
    events: list[oracle.NodeEvent]
    gpus_per_node: dict[str, int]
    releases: oracle.Releases
    rolled_hours: tuple[int, int] | None  # [start_s, end_s) of hours sreport has rolled up, if any
    sreport_rows: list[dict[str, str]]  # for rolled_hours, or for the current hour (expected empty)
    resized: Resized | None = None  # the lab grown to 6 nodes and shrunk back, captured after
    ladder: LadderCapture | None = None  # two run families on the ladder
    typed: TypedCapture | None = None  # the lab made an H100 + A100 fleet, captured last
    collected: collector.Collected | None = None  # gpuyield collect during the same session

    def runs_of(self, role: str) -> list[oracle.JobRun]:
        """sacct rows of the job workload.sh submitted as ``role`` (array tasks included)."""
        job_id = self.roles.job_ids[role]
        return [j for j in self.jobs if j.job_id == job_id or j.job_id.startswith(f"{job_id}_")]


def _unavailable(reason: str) -> NoReturn:
    # CI must run this test: there a missing lab is a failure, elsewhere a skip.
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI=true but {reason}")
    pytest.skip(reason)


def _interval_with_loss(elapsed_s: int) -> int:
    """A checkpoint interval that leaves a loss strictly between 0 and the run time (elapsed >= 3),
    so the lineage split is visible whatever the scheduler's second-level timing was."""
    return elapsed_s // 2 + 1


def _write_manifest(path: Path, releases: oracle.Releases) -> None:
    lines = [
        "# written by tests/slurm/conftest.py for the lab workload (tests/slurm/workload.sh)",
        "[runs]",
        "match = 'comment:run=(?P<run>[^,\\s]+)'",
        "",
        "[[releases]]",
        'model = "lab-chat-v1"',
        f"runs = [{', '.join(json.dumps(r) for r in LINEAGE)}]",
    ]
    for run in sorted(releases.diverged_runs):
        lines += ["", "[[diverged]]", f"run = {json.dumps(run)}"]
    for run in LINEAGE:
        lines += [
            "",
            f"[run_settings.{run}]",
            f"checkpoint_interval_s = {releases.checkpoint_interval_s[run]}",
        ]
    path.write_text("\n".join(lines) + "\n")


def _capture(
    lab_dir: Path, keep: Path, roles: lab.Roles, collecting: collector.Collector
) -> LabRun:
    env = lab.lab_env(lab_dir)
    own = keep / "own"  # the test's own queries, kept next to capture.sh's files for debugging
    own.mkdir()

    def query(name: str, *args: str) -> str:
        text = lab.run(list(args), env, timeout_s=60)
        (own / name).write_text(text)
        return text

    end_s = lab.choose_window_end()
    collecting.at_window_end(end_s)
    registered_s, events = oracle.parse_events(
        query("events.psv", "sacctmgr", "-P", "show", "event", "All_Time", f"format={EVENT_FORMAT}")
    )
    assert registered_s is not None, "the lab registers its cluster on start"
    hour_s = registered_s - registered_s % 3600
    start, end = oracle.format_time(hour_s), oracle.format_time(end_s)
    capture = keep / "capture"
    lab.run([str(lab.LAB_SCRIPTS / "capture.sh"), str(capture), start, end], env, timeout_s=180)
    sacct = (
        "sacct",
        "-a",
        "-P",
        "-X",
        "-D",
        f"--format={oracle.SACCT_FORMAT}",
        "-S",
        start,
        "-E",
        end,
    )
    jobs = oracle.parse_sacct(query("sacct-X-D.psv", *sacct))
    _capture_variants(lab_dir, capture, own, start, end)
    gpus = oracle.parse_sinfo_gpus(query("sinfo-gpus.txt", "sinfo", "-h", "-N", "-o", "%N|%G"))
    last_hour_s = end_s - end_s % 3600
    if last_hour_s > hour_s:
        rolled: tuple[int, int] | None = (hour_s, last_hour_s)
        rows = lab.wait_for_rollup(env, hour_s, last_hour_s)
    else:
        rolled = None
        rows = lab.sreport_gpu_rows(env, hour_s, hour_s + 3600)
    by_role = {
        role: [j for j in jobs if j.job_id == roles.job_ids[role]]
        for role in INTERVAL_FROM_ROLE.values()
    }
    releases = oracle.Releases(
        lineage_runs=frozenset(LINEAGE),
        diverged_runs=frozenset(DIVERGED),
        checkpoint_interval_s={
            run: _interval_with_loss(by_role[role][0].elapsed_s)
            for run, role in INTERVAL_FROM_ROLE.items()
        },
    )
    manifest = keep / "manifest.toml"
    _write_manifest(manifest, releases)
    return LabRun(
        keep=keep,
        capture=capture,
        manifest=manifest,
        roles=roles,
        window=oracle.Window(start_s=registered_s, end_s=end_s),
        jobs=jobs,
        events=events,
        gpus_per_node=gpus,
        releases=releases,
        rolled_hours=rolled,
        sreport_rows=rows,
    )


BERLIN = "Europe/Berlin"
# The same capture printed other ways real sites print it: (file, environment, command).
# -p ends every line with a separator; SLURM_TIME_FORMAT=%s prints times as epoch seconds;
# --noheader needs the field list given to gpuyield.
VARIANTS = {
    "sacct-p.psv": ({}, ("sacct", "-a", "-p", "-X", "-D")),
    "sacct-epoch.psv": ({"SLURM_TIME_FORMAT": "%s"}, ("sacct", "-a", "-P", "-X", "-D")),
    "sacct-p-noheader.psv": ({}, ("sacct", "-a", "-p", "-n", "-X", "-D")),
    "events-p.psv": ({}, ("sacctmgr", "-p", "show", "event", "All_Time")),
    "events-epoch.psv": (
        {"SLURM_TIME_FORMAT": "%s"},
        ("sacctmgr", "-P", "show", "event", "All_Time"),
    ),
    # A site whose clients run in local time: every time is printed (and -S/-E read) in it.
    "sacct-berlin.psv": ({"TZ": BERLIN}, ("sacct", "-a", "-P", "-X", "-D")),
    "events-berlin.psv": ({"TZ": BERLIN}, ("sacctmgr", "-P", "show", "event", "All_Time")),
}


def _local(utc_text: str, zone: str) -> str:
    """A UTC time as the clock in ``zone`` shows it (what sacct -S/-E read there)."""
    from datetime import UTC, datetime
    from zoneinfo import ZoneInfo

    instant = datetime.fromisoformat(utc_text).replace(tzinfo=UTC)
    return instant.astimezone(ZoneInfo(zone)).strftime("%Y-%m-%dT%H:%M:%S")


def variant_format(capture: Path) -> str:
    """The sacct --format of the main capture (its header), which the variants print too."""
    with (capture / "sacct-X-D-wide.psv").open(encoding="utf-8") as handle:
        return handle.readline().rstrip("\n").replace("|", ",")


def _capture_variants(lab_dir: Path, capture: Path, own: Path, start: str, end: str) -> None:
    env = lab.lab_env(lab_dir)
    for name, (extra_env, command) in VARIANTS.items():
        if command[0] == "sacct":
            zone = extra_env.get("TZ")
            lo, hi = (start, end) if zone is None else (_local(start, zone), _local(end, zone))
            args = [*command, f"--format={variant_format(capture)}", "-S", lo, "-E", hi]
        else:
            args = [*command, f"format={EVENT_FORMAT}"]
        text = lab.run(args, {**env, **extra_env}, timeout_s=60)
        (own / name).write_text(text)


@pytest.fixture(scope="session")
def lab_run(tmp_path_factory: pytest.TempPathFactory) -> LabRun:
    """Start the lab, run the workload, capture, stop the lab (once per session)."""
    reason = lab.why_unavailable()
    if reason is not None:
        _unavailable(reason)
    keep = tmp_path_factory.mktemp("slurm-run")
    try:
        with lab.machine_lock(), lab.running_lab(keep) as lab_dir:
            # gpuyield collect every 30 s while the workload runs (tests/slurm/test_collect.py).
            with collector.Collector(lab_dir, keep) as collecting:
                roles = lab.run_workload(lab_dir, keep)
            collecting.quiet_pair()
            captured = _capture(lab_dir, keep, roles, collecting)
            resized = _resize_and_capture(lab_dir, keep, collecting)
            ladder = run_ladder_phase(lab_dir, keep)
            typed = run_typed_phase(lab_dir, keep)
            return dataclasses.replace(
                captured, resized=resized, collected=collecting.state, ladder=ladder, typed=typed
            )
    except lab.LabError as error:
        pytest.fail(f"Slurm lab: {error}\n(artifacts: {keep})")


def _resize_and_capture(lab_dir: Path, keep: Path, collecting: collector.Collector) -> Resized:
    """Grow the lab to 6 nodes, run jobs on the new ones, shrink it back to 4, capture. While
    the daemons are stopped for the first restart, collect must fail; after it, resume."""
    out = keep / "resized"
    out.mkdir()

    def restart(num_nodes: int, collect: bool = False) -> dict[str, str]:
        env = {**lab.lab_env(lab_dir), "SLURMLAB_NODES": str(num_nodes)}
        for script in ("stop-slurm.sh", "start-slurm.sh"):
            lab.run(
                [str(lab.LAB_SCRIPTS / script)],
                env,
                timeout_s=lab.START_TIMEOUT_S,
                log=out / f"{script[:-3]}-{num_nodes}.log",
            )
            if collect and script == "stop-slurm.sh":
                collecting.while_stopped()
        if collect:
            collecting.after_restart(env)
        return env

    env = restart(6, collect=True)
    submit = ("sbatch", "--parsable", f"--chdir={lab_dir / 'jobs'}", "-o", "/dev/null")
    job_ids = (
        lab.run([*submit, "-w", "n6", "--gres=gpu:8", "--comment=run=grown", "--wrap=sleep 5"],
                env, timeout_s=60).strip(),
        lab.run([*submit, "-N", "2", "-w", "n[5-6]", "--gres=gpu:4", "--comment=run=grown",
                 "--wrap=sleep 3"], env, timeout_s=60).strip(),
    )  # fmt: skip
    lab.wait_until_done(env, job_ids)
    env = restart(4)
    # Maintenance on n3 (which has no node event): Slurm writes no event for it either.
    lab.run(["scontrol", "create", "reservation", "ReservationName=maint-n3", "StartTime=now",
             "Duration=1", "Nodes=n3", "Flags=MAINT,IGNORE_JOBS", "Users=root"],
            env, timeout_s=60)  # fmt: skip
    time.sleep(6)
    end_s = int(time.time()) + 2
    time.sleep(3)
    start = oracle.format_time(end_s - 6 * 3600)
    end = oracle.format_time(end_s)
    for name, args in {
        "sacct.psv": ("sacct", "-a", "-P", "-X", "-D", f"--format={oracle.SACCT_FORMAT}",
                      "-S", start, "-E", end),
        "events.psv": ("sacctmgr", "-P", "show", "event", "All_Time", f"format={EVENT_FORMAT}"),
        "nodes.txt": ("scontrol", "-o", "show", "nodes"),
        "reservations.psv": ("sacctmgr", "-P", "show", "reservation", f"start={start}",
                             "format=Cluster,Name,TimeStart,TimeEnd,Flags,NodeNames"),
    }.items():  # fmt: skip
        (out / name).write_text(lab.run(list(args), env, timeout_s=60))
    return Resized(capture=out, end_s=end_s, job_ids=job_ids)


def gpuyield(*args: str | Path) -> str:
    """Run the real CLI; fail the test with its stderr if it exits non-zero."""
    cmd = [sys.executable, "-m", "gpuyield", *map(str, args)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, check=False)
    if proc.returncode != 0:
        pytest.fail(
            f"{' '.join(cmd[2:])} exited {proc.returncode}:\n"
            f"{proc.stdout[-2000:]}{proc.stderr[-4000:]}"
        )
    return proc.stdout


def ingest_capture(lab_run: LabRun, db: Path, since_s: int | None = None) -> None:
    """``gpuyield ingest slurm`` of the capture, window from the cluster's registration (or
    ``since_s``) to the chosen end."""
    gpuyield(
        "ingest", "slurm", "--db", db,
        "--sacct", lab_run.capture / "sacct-X-D-wide.psv",
        "--events", lab_run.capture / "sacctmgr-event-format.psv",
        "--nodes", lab_run.capture / "scontrol-show-nodes-oneliner.txt",
        "--manifest", lab_run.manifest,
        "--since", oracle.format_time(lab_run.window.start_s if since_s is None else since_s),
        "--until", oracle.format_time(lab_run.window.end_s),
    )  # fmt: skip


@pytest.fixture(scope="session")
def ledger_db(lab_run: LabRun) -> Path:
    """The session's ledger DB: the capture ingested once."""
    db = lab_run.keep / "ledger.duckdb"
    ingest_capture(lab_run, db)
    return db


def ledger_report(db: Path, *window: str) -> dict[str, Any]:
    """``gpuyield report --json`` (optionally ``--since/--until``), parsed."""
    report: dict[str, Any] = json.loads(gpuyield("report", "--db", db, "--json", *window))
    return report


@pytest.fixture(scope="session")
def report(ledger_db: Path, lab_run: LabRun) -> dict[str, Any]:
    """The ledger's report for the whole window; saved with the oracle's numbers for the record."""
    result = ledger_report(ledger_db)
    expected = oracle.expected_ledger(
        lab_run.jobs, lab_run.events, lab_run.gpus_per_node, lab_run.releases, lab_run.window
    )
    summary = {
        "window": [
            oracle.format_time(lab_run.window.start_s),
            oracle.format_time(lab_run.window.end_s),
        ],
        "ledger": result,
        "oracle": {
            "installed_gpu_seconds": expected.installed_gpu_seconds,
            "allocated_gpu_seconds": expected.allocated_gpu_seconds,
            "categories": {k: float(v) for k, v in expected.categories.items()},
            "subcategories": {k: float(v) for k, v in expected.subcategories.items()},
        },
        "rolled_hours": lab_run.rolled_hours,
        "sreport_rows": lab_run.sreport_rows,
        "checkpoint_interval_s": dict(lab_run.releases.checkpoint_interval_s),
    }
    (lab_run.keep / "summary.json").write_text(json.dumps(summary, indent=2))
    return result
