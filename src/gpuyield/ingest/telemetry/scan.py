"""Offline divergence scan: read a telemetry file, replay it through the guard's watch, list the events.

It lives in ingest, not guard: guard runs inside training jobs and imports only the core, while a scan
needs the telemetry readers (``.importlinter`` holds the rule).

Each event carries the step of the last checkpoint saved before it (when the source logs checkpoint
saves: gpuyield JSONL and Megatron logs do), which is where to roll back to.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from pathlib import Path

from gpuyield.guard.watch import DivergenceEvent, DivergenceWatch, WatchConfig
from gpuyield.ingest.telemetry.records import CheckpointSaved, StepRecord, TelemetryLog


@dataclass(frozen=True, kw_only=True, slots=True)
class ScanResult:
    """What ``scan`` found in one telemetry source."""

    #: The file or directory scanned.
    path: str
    #: The format it was read as.
    format: str
    #: Step records replayed through the watch.
    num_steps: int
    #: Torn lines the reader skipped (crash tails in gpuyield JSONL).
    torn_lines: int
    #: Events, in the order found.
    events: tuple[DivergenceEvent, ...]

    def to_dict(self) -> dict[str, object]:
        """The ``--json`` shape: ``{"events": [{"step": N, "kind": "...", ...}], ...}``."""
        return {
            "path": self.path,
            "format": self.format,
            "num_steps": self.num_steps,
            "torn_lines": self.torn_lines,
            "events": [_event_json(e) for e in self.events],
        }


def _json_number(value: float | None) -> float | str | None:
    """Strict JSON has no NaN/Infinity: write them as the strings Python's float() reads back."""
    if value is None or math.isfinite(value):
        return value
    return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")


def _event_json(event: DivergenceEvent) -> dict[str, object]:
    data = dataclasses.asdict(event)
    data["kind"] = event.kind.value
    for key in ("value", "threshold", "baseline"):
        data[key] = _json_number(data[key])
    return data


def scan(
    path: str | Path, format: str | None = None, config: WatchConfig | None = None
) -> ScanResult:
    """Read ``path`` (format detected unless given) and return the watch's events in it."""
    # Imported here: the package's __init__ imports this module to re-export ``scan``.
    from gpuyield.ingest.telemetry import read

    return scan_log(read(path, format), config)


def _rollback(checkpoints: list[int], step: int) -> int | None:
    """The last checkpoint saved at or before ``step`` (None without one)."""
    earlier = [c for c in checkpoints if c <= step]
    return max(earlier) if earlier else None


def scan_log(log: TelemetryLog, config: WatchConfig | None = None) -> ScanResult:
    """Replay an already-read telemetry log through the watch (no second read of the file)."""
    watch = DivergenceWatch(config, action="warn", act_on=())
    checkpoints: list[int] = []
    events: list[DivergenceEvent] = []
    for record in log.records:
        if isinstance(record, CheckpointSaved):
            checkpoints.append(record.step)
        elif isinstance(record, StepRecord):
            found = watch.update(
                record.step,
                loss=record.loss,
                grad_norm=record.grad_norm,
                loss_scale=record.loss_scale,
                t=record.t,
            )
            # A checkpoint saved after the event's step holds diverged weights: not a rollback
            # (a jump is reported a few points after its first step, which the event names).
            events += [
                dataclasses.replace(e, rollback_step=_rollback(checkpoints, e.step)) for e in found
            ]
    return ScanResult(
        path=log.path,
        format=log.format.value,
        num_steps=len(log.steps),
        torn_lines=log.torn_lines,
        events=tuple(events),
    )
