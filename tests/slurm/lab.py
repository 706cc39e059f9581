"""Drive the real Slurm lab (``<repo>/../shared/slurm-lab``): start it, run the workload, capture.

Everything that talks to Slurm lives here, so the fixture in ``conftest.py`` reads as a recipe. The
lab is one per machine (its config is ``/etc/slurm``, its ports fixed), so sessions take a file lock
and refuse to start next to a lab they did not start.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from tests.slurm import oracle

REPO_ROOT = Path(__file__).resolve().parents[2]
# Beside the repository (the project's layout); GPUYIELD_SLURM_LAB names it for a checkout elsewhere.
LAB_SCRIPTS = Path(
    os.environ.get("GPUYIELD_SLURM_LAB") or REPO_ROOT / ".." / "shared" / "slurm-lab"
).resolve()
WORKLOAD = Path(__file__).with_name("workload.sh")
LOCK_PATH = Path(tempfile.gettempdir()) / "gpuyield-slurm-lab.lock"
LOCK_WAIT_S = 600
START_TIMEOUT_S = 900  # the first start installs Debian packages
WORKLOAD_TIMEOUT_S = 400
STOP_TIMEOUT_S = 240
ROLLUP_WAIT_S = 240
# Leave this much before an hour boundary so the "not rolled up yet" branch cannot race the rollup.
HOUR_MARGIN_S = 90
# What workload.sh pins jobs to; passed explicitly so a stray SLURMLAB_NODES cannot change the lab.
LAB_SHAPE = {"SLURMLAB_NODES": "4", "SLURMLAB_GPUS": "8", "SLURMLAB_CLUSTER": "lab"}


class LabError(Exception):
    """The lab or the workload did not do what the test needs (not a ledger failure)."""


def why_unavailable() -> str | None:
    """Why the lab cannot run here, or None if it can."""
    if os.geteuid() != 0:
        return "the Slurm lab needs root"
    missing = [
        s
        for s in ("start-slurm.sh", "stop-slurm.sh", "capture.sh")
        if not (LAB_SCRIPTS / s).is_file()
    ]
    if missing:
        return f"slurm-lab scripts missing under {LAB_SCRIPTS}: {', '.join(missing)}"
    return None


def lab_env(lab_dir: Path) -> dict[str, str]:
    """Environment for the lab scripts and Slurm clients: our lab dir, UTC clocks."""
    return {**os.environ, **LAB_SHAPE, "SLURMLAB": str(lab_dir), "TZ": "UTC"}


def run(
    args: list[str], env: Mapping[str, str], *, timeout_s: float, log: Path | None = None
) -> str:
    """Run a command; stdout as text. On failure raise LabError with the output's tail."""
    try:
        proc = subprocess.run(
            args, env=dict(env), capture_output=True, text=True, timeout=timeout_s, check=False
        )
    except subprocess.TimeoutExpired as error:
        raise LabError(f"{' '.join(args)} ran past {timeout_s} s") from error
    if log is not None:
        log.write_text(proc.stdout + proc.stderr)
    if proc.returncode != 0:
        tail = (proc.stdout + proc.stderr)[-3000:]
        raise LabError(f"{' '.join(args)} exited {proc.returncode}:\n{tail}")
    return proc.stdout


@contextmanager
def machine_lock() -> Iterator[None]:
    """One lab per machine: a second pytest session waits for the first to finish."""
    with open(LOCK_PATH, "w") as handle:
        deadline = time.monotonic() + LOCK_WAIT_S
        while True:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise LabError(
                        f"{LOCK_PATH} held by another test session for {LOCK_WAIT_S} s"
                    ) from None
                time.sleep(2)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def refuse_foreign_lab() -> None:
    """A slurmctld already on the lab's port was not started by this session: do not touch it."""
    port = int(os.environ.get("SLURMLAB_PORT_BASE", "16800")) + 17
    with socket.socket() as probe:
        probe.settimeout(1.0)
        if probe.connect_ex(("127.0.0.1", port)) == 0:
            raise LabError(
                f"a slurmctld already listens on 127.0.0.1:{port}; stop that lab first "
                f"(SLURMLAB=<its dir> {LAB_SCRIPTS / 'stop-slurm.sh'})"
            )


@contextmanager
def running_lab(keep: Path) -> Iterator[Path]:
    """Start a lab in a fresh dir under /tmp; stop and purge it on exit. Logs go to ``keep``."""
    refuse_foreign_lab()
    # Not under pytest's 0700 tmp dirs: munge and mysql (other users) need to reach their sockets.
    lab_dir = Path(tempfile.mkdtemp(prefix="gpuyield-slurmlab-", dir="/tmp"))
    env = lab_env(lab_dir)
    try:
        run(
            [str(LAB_SCRIPTS / "start-slurm.sh")],
            env,
            timeout_s=START_TIMEOUT_S,
            log=keep / "start.log",
        )
        yield lab_dir
    finally:
        logs = lab_dir / "log"
        if logs.is_dir():
            shutil.copytree(logs, keep / "lab-logs", dirs_exist_ok=True)
        run(
            [str(LAB_SCRIPTS / "stop-slurm.sh"), "--purge"],
            env,
            timeout_s=STOP_TIMEOUT_S,
            log=keep / "stop.log",
        )


@dataclass(frozen=True, kw_only=True, slots=True)
class Roles:
    """What workload.sh says it did: job ids by role, node actions with their times."""

    job_ids: dict[str, str]
    node_actions: list[tuple[str, str, int]]  # (action, node, epoch_s)


def parse_roles(text: str) -> Roles:
    """workload.sh's ROLES_TSV."""
    job_ids: dict[str, str] = {}
    actions: list[tuple[str, str, int]] = []
    for line in text.splitlines():
        kind, *rest = line.split("\t")
        if kind == "job":
            job_ids[rest[0]] = rest[1]
        else:
            actions.append((rest[0], rest[1], int(rest[2])))
    return Roles(job_ids=job_ids, node_actions=actions)


def run_workload(lab_dir: Path, keep: Path) -> Roles:
    """Run workload.sh against the lab; its stderr log is kept next to the capture."""
    roles_path = keep / "roles.tsv"
    run(
        ["bash", str(WORKLOAD), str(roles_path)],
        lab_env(lab_dir),
        timeout_s=WORKLOAD_TIMEOUT_S,
        log=keep / "workload.log",
    )
    return parse_roles(roles_path.read_text())


def wait_until_done(env: Mapping[str, str], job_ids: tuple[str, ...], timeout_s: int = 120) -> None:
    """Wait until the jobs have left the queue (ran and ended)."""
    deadline = time.monotonic() + timeout_s
    while run(["squeue", "-h", "-j", ",".join(job_ids), "-o", "%i"], env, timeout_s=30).strip():
        if time.monotonic() > deadline:
            raise LabError(f"jobs {', '.join(job_ids)} still queued after {timeout_s} s")
        time.sleep(1)


def choose_window_end() -> int:
    """Now, or just past the next hour boundary if that is too close to tell rolled-up hours apart.

    With the end at least HOUR_MARGIN_S before the boundary, the capture and the sreport query all
    finish inside the hour, so "this hour is not rolled up" is certain; otherwise the test waits for
    the boundary and the previous hour is compared with sreport.
    """
    now_s = int(time.time())
    to_boundary_s = 3600 - now_s % 3600
    if to_boundary_s >= HOUR_MARGIN_S:
        return now_s
    time.sleep(to_boundary_s + 5)
    return int(time.time())


def sreport_gpu_rows(env: Mapping[str, str], start_s: int, end_s: int) -> list[dict[str, str]]:
    """``sreport cluster utilization`` in GPU-seconds; no rows while the hours are not rolled up."""
    text = run(
        [
            "sreport", "-n", "-P", "cluster", "utilization",
            f"start={oracle.format_time(start_s)}", f"end={oracle.format_time(end_s)}",
            "-t", "seconds", "--tres=gres/gpu",
        ],
        env,
        timeout_s=60,
    )  # fmt: skip
    header = [
        "Cluster",
        "TRES Name",
        "Allocated",
        "Down",
        "PLND Down",
        "Idle",
        "Planned",
        "Reported",
    ]
    return [dict(zip(header, line.split("|"), strict=True)) for line in text.splitlines() if line]


def wait_for_rollup(env: Mapping[str, str], start_s: int, end_s: int) -> list[dict[str, str]]:
    """slurmdbd rolls up an hour at the top of the next one; poll until sreport shows it."""
    deadline = time.monotonic() + ROLLUP_WAIT_S
    while True:
        rows = sreport_gpu_rows(env, start_s, end_s)
        if rows or time.monotonic() > deadline:
            return rows
        time.sleep(3)
