"""Running one of Slurm's client commands (``sacct``, ``sacctmgr``, ``scontrol``) safely.

- **Output to a file, never memory.** The command writes its standard output straight into a file
  (a 10-million-job ``sacct`` is gigabytes); a byte budget stops a command that prints more, and
  standard error is kept as a bounded tail.
- **Done when the command is.** The output is a file, not a pipe, so the command's end is its
  exit: a child that keeps the output open (a wrapper script's background process) cannot hold
  the caller for the whole timeout; whatever the command left running in its process group is
  killed when it exits.
- **"No configuration" is not "daemon down".** A client without a configuration (no
  ``SLURM_CONF`` where cron or systemd starts it, no ``/etc/slurm/slurm.conf``, no configless DNS
  record) retries for 60 s and then exits 1 (recorded with Slurm 22.05.8, ``tests/ingest/fixtures/
  live-comments/``)::

      scontrol: error: s_p_parse_file: cannot stat file /etc/slurm/slurm.conf: No such file or
      directory, retrying in 1sec up to 60sec
      ...
      scontrol: fatal: Unable to process configuration file

  The first line is printed at once: the run stops there and says which it is.
- Times are UTC and ``SLURM_TIME_FORMAT`` is unset (``slurm_env``), so output is read the same way
  whatever the caller's shell sets.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import BinaryIO

#: Standard error kept for messages (its last bytes).
STDERR_TAIL_BYTES = 4096
# What a client prints when it has no configuration to read (file missing, configless lookup
# failing), as opposed to a daemon that does not answer. Slurm's own messages (src/common/
# read_config.c, fetch_config.c); the first two recorded.
_NO_CONFIG = re.compile(
    rb"cannot stat file \S*|Unable to process configuration file|"
    rb"fetch_config: DNS SRV lookup failed|Could not establish a configuration source|"
    rb"_establish_config_source: failed"
)
#: The environment that decides where the clients find their configuration and daemons.
CLIENT_ENV = ("SLURM_CONF", "SLURM_CONF_SERVER", "SLURM_CLUSTERS", "TZ")


class Outcome(StrEnum):
    """How a client run ended."""

    EXITED = "exited"
    """The command exited on its own (``returncode`` says how)."""
    TIMED_OUT = "timed out"
    """Still running at the deadline: killed."""
    TOO_LARGE = "too large"
    """Printed more than the byte budget: killed."""
    NO_CONFIG = "no configuration"
    """The client found no Slurm configuration (killed if it was still retrying)."""
    NOT_RUN = "not run"
    """The command could not be started (``stderr`` says why)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class ClientRun:
    """One client command's run; its standard output is in ``output``."""

    outcome: Outcome
    """How it ended."""
    returncode: int | None
    """Exit status (None when killed or not run)."""
    output: Path
    """The file holding its standard output."""
    output_bytes: int
    """Bytes it printed (at most the budget plus what it wrote in the last poll)."""
    stderr: str
    """The last ``STDERR_TAIL_BYTES`` of its standard error (undecodable bytes replaced)."""
    no_config_line: str = ""
    """With NO_CONFIG: the client's line that says so."""

    @property
    def ok(self) -> bool:
        """Exited 0."""
        return self.outcome is Outcome.EXITED and self.returncode == 0


def slurm_env(base: Mapping[str, str] | None = None) -> dict[str, str]:
    """The caller's environment with UTC times and Slurm's default time format."""
    env = {
        k: v for k, v in (os.environ if base is None else base).items() if k != "SLURM_TIME_FORMAT"
    }
    env["TZ"] = "UTC"
    return env


def client_environment(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """The variables of ``CLIENT_ENV`` that are set (what ``--keep-raw`` records)."""
    source = slurm_env() if env is None else env
    return {k: source[k] for k in CLIENT_ENV if k in source}


def run_client(
    argv: tuple[str, ...],
    output: Path,
    *,
    timeout_s: float,
    max_bytes: int,
    env: Mapping[str, str] | None = None,
) -> ClientRun:
    """Run ``argv`` with its standard output written to ``output`` (created or truncated)."""
    with output.open("wb") as out, tempfile.TemporaryFile() as err:
        try:
            proc = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=err,
                env=dict(slurm_env() if env is None else env),
                start_new_session=True,
            )
        except OSError as error:
            return ClientRun(
                outcome=Outcome.NOT_RUN,
                returncode=None,
                output=output,
                output_bytes=0,
                stderr=str(error),
            )
        try:
            outcome = _watch(proc, output, err, timeout_s=timeout_s, max_bytes=max_bytes)
        finally:
            _end_group(proc)
        size = output.stat().st_size
        if outcome is Outcome.EXITED and size > max_bytes:
            outcome = Outcome.TOO_LARGE
        no_config = _no_config_line(err)
        if no_config and not (outcome is Outcome.EXITED and proc.returncode == 0):
            outcome = Outcome.NO_CONFIG
        return ClientRun(
            outcome=outcome,
            returncode=proc.returncode if outcome is Outcome.EXITED else None,
            output=output,
            output_bytes=size,
            stderr=_tail(err),
            no_config_line=no_config,
        )


def _watch(
    proc: subprocess.Popen[bytes], output: Path, err: BinaryIO, *, timeout_s: float, max_bytes: int
) -> Outcome:
    """Wait for the command's exit, stopping it past the deadline, the budget, or at a client
    that says it has no configuration (it would retry for a minute)."""
    deadline = time.monotonic() + timeout_s
    pause_s = 0.005
    while True:
        try:
            proc.wait(timeout=pause_s)
            return Outcome.EXITED
        except subprocess.TimeoutExpired:
            pass
        if output.stat().st_size > max_bytes:
            return Outcome.TOO_LARGE
        if _no_config_line(err):
            return Outcome.NO_CONFIG
        if time.monotonic() >= deadline:
            return Outcome.TIMED_OUT
        pause_s = min(pause_s * 2, 0.25)


def _end_group(proc: subprocess.Popen[bytes]) -> None:
    """Kill the command if it still runs, and anything it left in its process group (a child
    still writing the output file)."""
    # ProcessLookupError: the command and all of its group are gone already.
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def _no_config_line(err: BinaryIO) -> str:
    err.seek(0)
    head = err.read(STDERR_TAIL_BYTES)
    found = _NO_CONFIG.search(head)
    if found is None:
        return ""
    start = head.rfind(b"\n", 0, found.start()) + 1
    end = head.find(b"\n", found.end())
    return head[start : end if end >= 0 else None].decode("utf-8", "replace").strip()


def _tail(err: BinaryIO) -> str:
    size = err.seek(0, os.SEEK_END)
    err.seek(max(size - STDERR_TAIL_BYTES, 0))
    return err.read().decode("utf-8", "replace").strip()
