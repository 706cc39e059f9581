"""One lineage job's timeline: where its checkpoints fall, why it stopped, what it reports.

Inside a job that starts at ``s`` the timeline is fixed (the ledger's contract assumes it): start-up
``[s, s+U)``, then compute; checkpoint ``k`` is written during ``[s+k*tau-delta, s+k*tau)`` and
saved at ``s + k*tau``. The telemetry lines a job writes follow from that timeline and its stop.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from gpuyield.simulate.records import (
    CANCELLED_BY_ADMIN,
    CANCELLED_BY_USER,
    COMPLETED,
    RUNNING,
)
from gpuyield.simulate.scenario_tables import LineageConfig


@dataclass(frozen=True, kw_only=True, slots=True)
class Stop:
    """Why and when a running job stopped."""

    #: When progress stopped (the fault, or the checkpoint a planned stop waits for).
    at_s: int
    #: When Slurm ended the job.
    end_s: int
    state: str
    cause: str | None
    failed_node: int | None = None


class Timeline:
    """Progress arithmetic of one job (start s, interval tau, write delta, start-up U)."""

    def __init__(self, run: LineageConfig, start_s: int) -> None:
        self.s = start_s
        self.tau = run.checkpoint_interval_s
        self.delta = run.checkpoint_write_s
        self.startup = run.startup_s

    def checkpoints_by(self, t: int) -> int:
        """Checkpoints saved at or before ``t``."""
        return (t - self.s) // self.tau

    def kept_at(self, k: int) -> int:
        """Progress saved by checkpoint ``k`` (0 before the first)."""
        return k * (self.tau - self.delta) - self.startup if k > 0 else 0

    def finish_time(self, work_s: int) -> int:
        """When ``work_s`` of progress is reached (ends inside a compute phase)."""
        period = self.tau - self.delta
        k = -(-(work_s + self.startup) // period) - 1
        return self.s + k * self.tau + (work_s + self.startup - k * period)

    def overhead_until(self, t: int, k: int) -> int:
        """Start-up plus the write stalls of ``k`` saved checkpoints, seconds up to ``t``."""
        return min(self.startup, t - self.s) + k * self.delta


def telemetry_lines(
    *, run: str, job_id: int, host: str, line: Timeline, stop: Stop, checkpoints: int
) -> list[str]:
    """The telemetry JSON lines of one job: start, first step, saved checkpoints, end."""
    lines: list[str] = []

    def emit(**fields: object) -> None:
        lines.append(json.dumps({"v": 1, **fields}, separators=(",", ":")))

    emit(event="job_start", t=float(line.s), run=run, job_id=str(job_id), host=host, pid=4242)
    first_step = line.s + line.startup
    if first_step <= stop.at_s:
        emit(event="step", t=float(first_step), step=0)
    for i in range(1, checkpoints + 1):
        t = line.s + i * line.tau
        emit(event="checkpoint_saved", t=float(t), step=i, duration_s=float(line.delta))
    if stop.state != RUNNING:
        status = {
            COMPLETED: "completed",
            CANCELLED_BY_ADMIN: "cancelled",
            CANCELLED_BY_USER: "cancelled",
        }.get(stop.state, "failed")
        emit(event="job_end", t=float(stop.end_s), status=status)
    return lines


__all__ = ["Stop", "Timeline", "telemetry_lines"]
