"""Run telemetry readers: one ``read()`` for every place loss curves live.

>>> from gpuyield.ingest.telemetry import read
>>> log = read("runs/pt-main.jsonl")            # format detected from the content
>>> [(s.step, s.loss) for s in log.steps][:2]

Formats (``TelemetryFormat``): gpuyield's own JSONL, TensorBoard event files, W&B history exports,
MLflow file-store runs, Megatron-LM stdout logs and plain CSV. Every reader returns a
``TelemetryLog`` with the same typed records; ``detect()`` tells the format from the content, not
the file name (except TensorBoard directories, recognised by their ``events.out.tfevents.*`` files).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from gpuyield.errors import InputError, UnknownFormat
from gpuyield.ingest.telemetry import csv, jsonl, megatron, mlflow, tensorboard, wandb
from gpuyield.ingest.telemetry.records import (
    CheckpointLoaded,
    CheckpointSaved,
    EvalRecord,
    FtEvent,
    FtKind,
    JobEnd,
    JobStart,
    Record,
    StepRecord,
    TelemetryFormat,
    TelemetryLog,
)
from gpuyield.ingest.telemetry.scan import ScanResult, scan, scan_log

__all__ = [
    "CheckpointLoaded",
    "CheckpointSaved",
    "EvalRecord",
    "FtEvent",
    "FtKind",
    "JobEnd",
    "JobStart",
    "Record",
    "ScanResult",
    "StepRecord",
    "TelemetryFormat",
    "TelemetryLog",
    "detect",
    "read",
    "scan",
    "scan_log",
]

#: How many bytes of a file detection looks at: enough for a Megatron log's argument dump to end.
_HEAD_BYTES = 256 * 1024

_READERS: dict[TelemetryFormat, Callable[[Path], TelemetryLog]] = {
    TelemetryFormat.JSONL: jsonl.read,
    TelemetryFormat.TENSORBOARD: tensorboard.read,
    TelemetryFormat.WANDB: wandb.read,
    TelemetryFormat.MLFLOW: mlflow.read,
    TelemetryFormat.MEGATRON: megatron.read,
    TelemetryFormat.CSV: csv.read,
}

# Order matters: W&B CSVs are CSVs too, so the more specific test comes first.
_FILE_TESTS: tuple[tuple[TelemetryFormat, Callable[[bytes], bool]], ...] = (
    (TelemetryFormat.TENSORBOARD, tensorboard.looks_like),
    (TelemetryFormat.JSONL, jsonl.looks_like),
    (TelemetryFormat.WANDB, wandb.looks_like),
    (TelemetryFormat.CSV, csv.looks_like),
    (TelemetryFormat.MEGATRON, megatron.looks_like),
)


def _detect_dir(path: Path) -> TelemetryFormat:
    if mlflow.is_run_dir(path) or any(
        mlflow.is_run_dir(p) for p in (*path.glob("*"), *path.glob("*/*")) if p.is_dir()
    ):
        return TelemetryFormat.MLFLOW
    if any(path.rglob(f"*{tensorboard.EVENT_FILE_MARK}*")):
        return TelemetryFormat.TENSORBOARD
    raise UnknownFormat(
        f"{path}: a directory that is neither an MLflow store nor a TensorBoard log directory",
        hint="pass a telemetry file, or telemetry.format",
    )


def detect(path: str | Path) -> TelemetryFormat:
    """The telemetry format of ``path``, from its content."""
    path = Path(path)
    if not path.exists():
        raise InputError(f"{path}: no such file or directory")
    if path.is_dir():
        return _detect_dir(path)
    with path.open("rb") as handle:
        head = handle.read(_HEAD_BYTES)
    for fmt, looks_like in _FILE_TESTS:
        if looks_like(head):
            return fmt
    raise UnknownFormat(
        f"{path}: not a telemetry format gpuyield knows",
        hint="formats: " + ", ".join(f.value for f in TelemetryFormat) + " (pass telemetry.format)",
    )


def read(path: str | Path, format: TelemetryFormat | str | None = None) -> TelemetryLog:
    """Read one telemetry source; ``format`` is detected from the content when not given."""
    path = Path(path)
    if not path.exists():
        raise InputError(f"{path}: no such file or directory")
    if format is None:
        fmt = detect(path)
    else:
        try:
            fmt = TelemetryFormat(format)
        except ValueError as error:
            raise UnknownFormat(
                f"unknown telemetry format {format!r}",
                hint="choose one of: " + ", ".join(f.value for f in TelemetryFormat),
            ) from error
    return _READERS[fmt](path)
