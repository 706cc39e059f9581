"""Rows of ``ft_events``: what ``gpuyield.ledger.ft`` needs of a fault-tolerant run's telemetry.

Only logs with fault-tolerance events (``replica_lost``, ``quorum``, ``heal_*``, ``restart``) give
rows; they keep, besides those events, every step with the replica group that committed it and the
checkpoint saves and loads, because the lost GPU-seconds of a failure are measured between them.
"""

from __future__ import annotations

import pyarrow as pa

from gpuyield.ingest.telemetry import (
    CheckpointLoaded,
    CheckpointSaved,
    FtEvent,
    JobStart,
    StepRecord,
    TelemetryLog,
)

COLUMNS: dict[str, pa.DataType] = {
    "run": pa.string(),
    "replica": pa.int64(),
    "event": pa.string(),
    "t_s": pa.float64(),
    "step": pa.int64(),
    "replicas": pa.int64(),
    "gpus": pa.int64(),
    "quorum_id": pa.int64(),
    "participants": pa.int64(),
    "attempt": pa.int64(),
}


def _row(run: str, record: object) -> dict[str, object] | None:
    row: dict[str, object] = dict.fromkeys(COLUMNS)
    row["run"] = run
    if isinstance(record, FtEvent):
        row.update(
            event=record.kind.value,
            t_s=record.t,
            replica=record.replica,
            step=record.step,
            replicas=record.replicas,
            gpus=record.gpus,
            quorum_id=record.quorum_id,
            participants=record.participants,
            attempt=record.attempt,
        )
    elif isinstance(record, StepRecord):
        row.update(event="step", t_s=record.t, step=record.step, replica=record.replica)
    elif isinstance(record, CheckpointSaved):
        row.update(event="checkpoint_saved", t_s=record.t, step=record.step)
    elif isinstance(record, CheckpointLoaded):
        row.update(event="checkpoint_loaded", t_s=record.t, step=record.step)
        row["replica"] = record.replica
    elif isinstance(record, JobStart):
        row.update(event="job_start", t_s=record.t)
    else:
        return None  # evals and job ends carry no failure accounting
    # A record without a clock cannot be placed between a failure and its recovery.
    return row if row["t_s"] is not None else None


def ft_table(run: str, log: TelemetryLog) -> pa.Table | None:
    """The ``ft_events`` rows of ``log``; None when it has no fault-tolerance events."""
    if not log.ft_events:
        return None
    rows = [r for r in (_row(run, record) for record in log.records) if r is not None]
    return pa.table({c: pa.array([r[c] for r in rows], t) for c, t in COLUMNS.items()})
