"""Reader for TensorBoard event files, with the ``tensorboard`` package (no TensorFlow needed).

``path`` is one ``events.out.tfevents.*`` file or a log directory; a directory's event files are
read in name order (their names start with the creation time, so a restarted run's files come in
order). Scalars are taken from ``simple_value`` (PyTorch's SummaryWriter, tensorboard's own writer)
or from scalar tensors (TF2 ``tf.summary.scalar``). Tags are matched loosely, see ``_keys``
(``train/loss``, ``lm loss``, ``grad-norm``, ``loss-scale``, ...). Within one event file the values
of one step are merged into one record (the earliest wall time is its ``t``); a step repeated in a
later file (a restart) gives a new record, so restarts show as repeated steps.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from gpuyield.errors import InputError, MissingExtraError, ParseError
from gpuyield.ingest.telemetry import _keys
from gpuyield.ingest.telemetry.records import StepRecord, TelemetryFormat, TelemetryLog

#: Substring every TensorBoard event file name holds.
EVENT_FILE_MARK = "tfevents"


def _loader() -> Any:
    try:
        from tensorboard.backend.event_processing import event_file_loader
    except ModuleNotFoundError as error:
        raise MissingExtraError("telemetry", "tensorboard") from error
    return event_file_loader


def _scalar(value: Any) -> float | None:
    """The float in one summary value, or None when it is not a scalar."""
    if value.HasField("simple_value"):
        return float(value.simple_value)
    if value.HasField("tensor"):
        from tensorboard.util import tensor_util

        array = tensor_util.make_ndarray(value.tensor)
        if array.size == 1 and array.dtype.kind in "fiu":
            return float(array.reshape(()))
    return None


def event_files(path: Path) -> list[Path]:
    """The event files at ``path`` (itself, or those in the directory tree), in name order."""
    if path.is_file():
        return [path]
    files = sorted(
        (p for p in path.rglob(f"*{EVENT_FILE_MARK}*") if p.is_file()), key=lambda p: p.name
    )
    if not files:
        raise InputError(
            f"{path}: no TensorBoard event files (events.out.tfevents.*) in this directory",
            hint="pass the log directory that holds the events.out.tfevents.* files",
        )
    return files


def _read_file(
    path: Path, fields: dict[str, str] | None, seen_tags: set[str]
) -> tuple[list[StepRecord], dict[str, str]]:
    """Step records of one event file; ``fields`` (tag -> field) is chosen from the first file."""
    by_step: dict[int, dict[str, float]] = {}
    times: dict[int, float] = {}
    loader = _loader()  # outside the try: a missing extra is not a parse error
    try:
        events = list(loader.EventFileLoader(str(path)).Load())
    except Exception as error:  # the loader raises protobuf/IO errors of many kinds
        raise ParseError(f"not a readable TensorBoard event file: {error}", path=path) from error
    scalars = [
        (event, value.tag, _scalar(value)) for event in events for value in event.summary.value
    ]
    tags = {tag for _, tag, v in scalars if v is not None}
    seen_tags.update(tags)
    if fields is None:
        fields = {tag: name for name, tag in _keys.metric_columns(tags).items()}
    for event, tag, number in scalars:
        if number is None or tag not in fields:
            continue
        by_step.setdefault(event.step, {})[fields[tag]] = number
        times[event.step] = min(times.get(event.step, math.inf), event.wall_time)
    records = [_record(step, values, times[step]) for step, values in by_step.items()]
    return records, fields


def _record(step: int, values: dict[str, float], t: float) -> StepRecord:
    tokens = values.get("tokens")
    return StepRecord(
        step=step,
        t=t,
        loss=values.get("loss"),
        grad_norm=values.get("grad_norm"),
        loss_scale=values.get("loss_scale"),
        tokens=int(tokens) if tokens is not None and math.isfinite(tokens) else None,
    )


def read(path: str | Path) -> TelemetryLog:
    """Read loss, grad norm, loss scale and tokens per step from TensorBoard event files."""
    path = Path(path)
    records: list[StepRecord] = []
    fields: dict[str, str] | None = None
    seen_tags: set[str] = set()
    for file in event_files(path):
        file_records, file_fields = _read_file(file, fields, seen_tags)
        # Keep the first file's tag choice, unless it had no scalars we know (an empty first file).
        fields = file_fields if file_fields else None
        records.extend(file_records)
    if not records:
        shown = ", ".join(sorted(seen_tags)[:12]) or "none"
        raise InputError(
            f"{path}: no loss, grad norm, loss scale or tokens scalars (scalar tags: {shown})",
            hint="log the loss under one of: " + ", ".join(_keys.CANDIDATES["loss"]),
        )
    return TelemetryLog(path=str(path), format=TelemetryFormat.TENSORBOARD, records=tuple(records))


def looks_like(head: bytes) -> bool:
    """Whether a file's first bytes are a TFRecord holding a TensorBoard event."""
    return b"brain.Event:" in head[:128]
