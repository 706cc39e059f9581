"""The Slurm commands a collection runs: which client prints each ingest file (the registry's
``SlurmFile.client``), with which arguments and formats, and a failed run as an error that names
the command.
"""

from __future__ import annotations

import os
import shlex
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

from gpuyield.errors import InputError
from gpuyield.ingest.slurm_client import ClientRun, Outcome
from gpuyield.ingest.sources import SLURM_FILES

# The format docs/ledger.md documents for `ingest slurm` (one record per line: no SubmitLine),
# less ElapsedRaw: a running job's grows with the clock even for the same -S/-E, and collect gives
# the capture time itself, so ElapsedRaw would only make identical queries look changed.
# ReqTRES: what a pending job asks for (its AllocTRES is empty), the GPUs `gpuyield serve` reports
# as waiting. sacct -S/-E lists pending jobs that are eligible (not held, no unmet dependency).
SACCT_FORMAT = (
    "JobID,JobIDRaw,JobName,User,Account,Partition,QOS,State,ExitCode,Submit,Start,End,"
    "AllocTRES,ReqTRES,NodeList,NNodes,Comment,Cluster"
)
EVENT_FORMAT = "Cluster,ClusterNodes,NodeName,Event,EventRaw,State,StateRaw,Start,End,Duration,Reason,User,TRES"
RESERVATION_FORMAT = "Cluster,Name,TimeStart,TimeEnd,Flags,NodeNames"
COMMAND_TIMEOUT_S = 600
_SLURM_TIME = "%Y-%m-%dT%H:%M:%S"
_NO_CONFIG_HINT = (
    "the Slurm clients found no configuration: set SLURM_CONF=/path/to/slurm.conf (or configless: "
    "a _slurmctld._tcp DNS SRV record, or SLURM_CONF_SERVER) where collect runs; cron and systemd "
    "do not read your shell's profile (docs/collect.md)"
)


class CollectError(InputError):
    """A Slurm command could not run or failed; names the command."""

    def __init__(self, command: str, message: str, *, hint: str) -> None:
        self.command = command
        super().__init__(f"`{command}` {message}", hint=hint)


@dataclass(frozen=True, kw_only=True, slots=True)
class SlurmCommand:
    """One command a collection runs, and the file its output went to."""

    kind: str
    """Input kind: sacct, events, reservations, nodes, jobs-detail (the ``ingest slurm`` flag)."""
    argv: tuple[str, ...]
    """The exact command line."""
    file: str
    """The output's file name (in ``--keep-raw``, gzip-compressed)."""

    @property
    def shell(self) -> str:
        """The command as a shell line (for logs, errors and ``commands.tsv``)."""
        return shlex.join(self.argv)


def slurm_commands(
    binaries: dict[str, str], *, cluster: str, start_s: int, end_s: int
) -> tuple[SlurmCommand, ...]:
    """The queries of one collection (formats as docs/ledger.md reads them): one per ingest file
    a Slurm client prints, in the order they run."""
    start, end = _slurm_time(start_s), _slurm_time(end_s)
    by_name = {source.name: source for source in SLURM_FILES}
    commands = []
    for name, arguments in _arguments(cluster, start, end).items():
        source = by_name[name]
        assert source.client is not None
        commands.append(
            SlurmCommand(
                kind=name.replace("_", "-"),  # the `ingest slurm` flag
                file=source.dir_file,
                argv=(binaries[source.client], *arguments),
            )
        )
    return tuple(commands)


def _arguments(cluster: str, start: str, end: str) -> dict[str, tuple[str, ...]]:
    """Each collected file's client arguments, by ``SlurmFile.name``, in the order they run."""
    return {
        "sacct": (
            "-a",
            "-P",
            "-X",
            "-D",
            f"--clusters={cluster}",
            f"--format={SACCT_FORMAT}",
            "-S",
            start,
            "-E",
            end,
        ),
        # All of time: an event is small, and a node down since last month is down today.
        "events": (
            "-P",
            "show",
            "event",
            "All_Time",
            f"clusters={cluster}",
            f"format={EVENT_FORMAT}",
        ),
        "reservations": (
            "-P",
            "show",
            "reservation",
            f"clusters={cluster}",
            f"start={start}",
            f"format={RESERVATION_FORMAT}",
        ),
        "nodes": ("-o", "show", "nodes"),
        # Which GPUs each running job holds: Slurm forgets it once the job ends (jobs_detail.py).
        "jobs_detail": ("-d", "-o", "show", "job"),
    }


def find_client(name: str, slurm_bin: Path | None) -> str:
    if slurm_bin is not None:
        path = slurm_bin / name
        if not os.access(path, os.X_OK):
            raise CollectError(name, f"not found in {slurm_bin}", hint="check collect.slurm_bin")
        return str(path)
    found = shutil.which(name)
    if found is None:
        raise CollectError(
            name,
            "not found on PATH",
            hint="run on a Slurm login node, or give collect.slurm_bin DIR",
        )
    return found


def check_run(command: str, result: ClientRun, max_bytes: int) -> None:
    """A run that did not exit 0 as a ``CollectError`` naming the command and what it printed."""
    if result.ok:
        return
    if result.outcome is Outcome.NO_CONFIG:
        raise CollectError(
            command, f"found no Slurm configuration: {result.no_config_line}", hint=_NO_CONFIG_HINT
        )
    if result.outcome is Outcome.TIMED_OUT:
        raise CollectError(
            command,
            f"ran past {COMMAND_TIMEOUT_S} s",
            hint="is slurmdbd/slurmctld answering? `gpuyield doctor` checks them",
        )
    if result.outcome is Outcome.TOO_LARGE:
        raise CollectError(
            command,
            f"printed more than {max_bytes} bytes: stopped",
            hint="collect a shorter period (a later collect.since, or run collect more often), or "
            "raise collect.max_output_bytes",
        )
    if result.outcome is Outcome.NOT_RUN:
        raise CollectError(
            command, f"could not run: {result.stderr}", hint="check collect.slurm_bin"
        )
    raise CollectError(
        command,
        f"exited {result.returncode}: {result.stderr[-1500:] or '(no message)'}",
        hint="are slurmctld and slurmdbd running? `gpuyield doctor` checks them; the store "
        "is unchanged, run collect again when Slurm answers",
    )


def _slurm_time(epoch_s: int) -> str:
    return time.strftime(_SLURM_TIME, time.gmtime(epoch_s))
