"""Reader for Megatron-LM (and Megatron-DeepSpeed) training stdout.

Training lines look like (BigScience tr1-13B, Megatron-DeepSpeed)::

     iteration    29050/  311541 | consumed samples:     10728784 | elapsed time per iteration (ms):
     22148.5 | learning rate: 9.849E-05 | global batch size:  1024 | lm loss: 7.343709E+00 | loss
     scale: 8192.0 | grad norm: 0.000 | num zeros: 0.0 | number of skipped iterations:   0 | ...

(one line in the log), possibly behind a launcher prefix (``[default7]:``) and, in newer
Megatron-LM, a ``[YYYY-MM-DD HH:MM:SS]`` timestamp, which is read as UTC. Checkpoint saves and loads
come from ``saved checkpoint ... at iteration N`` and ``loaded checkpoint ... at iteration N`` lines
(the "successfully ..." ones); validation from ``validation loss at iteration N | lm loss value:
X``. Lines that are none of these (the launcher's chatter, tracebacks) are ignored: a log is not
ours to validate line by line.
"""

from __future__ import annotations

import math
import re
from datetime import UTC, datetime
from pathlib import Path

from gpuyield.errors import ParseError
from gpuyield.ingest.telemetry.records import (
    CheckpointLoaded,
    CheckpointSaved,
    EvalRecord,
    Record,
    StepRecord,
    TelemetryFormat,
    TelemetryLog,
)

_ITERATION = re.compile(r"\biteration\s+(\d+)\s*/\s*(\d+)\s*\|")
_TIMESTAMP = re.compile(r"\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)\]\s*iteration\b")
_FIELD = re.compile(r"([A-Za-z][A-Za-z ()/_-]*?)\s*:\s*([-+0-9.eEnaNifINF]+)\s*(?=\||$)")
_SAVED = re.compile(r"saved checkpoint\b.*?\bat iteration\s+(\d+)", re.IGNORECASE)
_LOADED = re.compile(r"loaded checkpoint\b.*?\bat iteration\s+(\d+)", re.IGNORECASE)
_VALIDATION = re.compile(
    r"validation loss at iteration\s+(\d+)\s*\|\s*lm loss value:\s*([-+0-9.eEnaNifINF]+)"
)


def _number(text: str, path: Path, line: int, field: str) -> float:
    try:
        return float(text)
    except ValueError as error:
        raise ParseError(f"not a number: {text!r}", path=path, line=line, field=field) from error


def _step_record(text: str, match: re.Match[str], path: Path, line: int) -> StepRecord:
    fields: dict[str, str] = {}
    for field_match in _FIELD.finditer(text, match.end()):
        fields[field_match.group(1).strip().lower()] = field_match.group(2)

    def value(name: str) -> float | None:
        raw = fields.get(name)
        return None if raw is None else _number(raw, path, line, name)

    tokens = value("consumed tokens")
    stamp = _TIMESTAMP.search(text)
    t = (
        datetime.strptime(stamp.group(1), "%Y-%m-%d %H:%M:%S").replace(tzinfo=UTC).timestamp()
        if stamp
        else None
    )
    return StepRecord(
        step=int(match.group(1)),
        t=t,
        loss=value("lm loss"),
        grad_norm=value("grad norm"),
        loss_scale=value("loss scale"),
        tokens=int(tokens) if tokens is not None and math.isfinite(tokens) else None,
    )


def _parse_line(text: str, path: Path, line: int) -> Record | None:
    match = _ITERATION.search(text)
    if match and "validation loss" not in text:
        return _step_record(text, match, path, line)
    if found := _VALIDATION.search(text):
        loss = _number(found.group(2), path, line, "lm loss value")
        return EvalRecord(step=int(found.group(1)), metrics={"val_loss": loss})
    if found := _SAVED.search(text):
        return CheckpointSaved(step=int(found.group(1)))
    if found := _LOADED.search(text):
        return CheckpointLoaded(step=int(found.group(1)))
    return None


def read(path: str | Path) -> TelemetryLog:
    """Read a Megatron-LM stdout log into step, checkpoint and validation records."""
    path = Path(path)
    records: list[Record] = []
    with path.open(encoding="utf-8", errors="replace") as handle:
        for number, text in enumerate(handle, start=1):
            record = _parse_line(text.rstrip("\n"), path, number)
            if record is not None:
                records.append(record)
    return TelemetryLog(path=str(path), format=TelemetryFormat.MEGATRON, records=tuple(records))


def looks_like(head: bytes) -> bool:
    """Whether a file's first bytes hold a Megatron training line."""
    text = head.decode("utf-8", errors="replace")
    return any(_ITERATION.search(line) and "loss" in line for line in text.splitlines())
