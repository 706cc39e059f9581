"""Reader for gpuyield.Recorder's JSON Lines (docs/contracts.md, "Run telemetry").

A crash can leave one torn line: the last line of the file, or (when the run restarted and the
recorder appended to the same file) a line right before a ``job_start``. Those are skipped and
counted in ``TelemetryLog.torn_lines``. Any other line that is not valid JSON, or an event with a
wrong field, is a ``ParseError`` naming the line and the field: the recorder never writes one, so it
means the file was edited or is not ours.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterator
from pathlib import Path

from gpuyield.errors import ParseError
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

SUPPORTED_VERSION = 1
#: A recorder line is a few hundred bytes; a longer one is not ours (and is not held whole).
MAX_LINE_BYTES = 1 << 20
#: Records one file may hold: a line a step for ten million steps (Llama 3 405B trained for
#: about 1.2M); the records are held in memory, so past this the file is split by run.
MAX_RECORDS = 10_000_000
#: A JSON value as ``json.loads`` returns it; a line's object is read field by field by ``_Line``,
#: which checks each field's type and builds the typed records.
JsonValue = None | bool | int | float | str | list["JsonValue"] | dict[str, "JsonValue"]
_NOT_OURS = "gpuyield.Recorder writes one short JSON object a line; is this file its log?"


class _Line:
    """Field access on one parsed line that raises ParseError naming the file, line and field."""

    __slots__ = ("data", "line", "path")

    def __init__(self, data: dict[str, JsonValue], path: Path, line: int) -> None:
        self.data = data
        self.path = path
        self.line = line

    def error(self, message: str, field: str | None = None) -> ParseError:
        return ParseError(message, path=self.path, line=self.line, field=field)

    def number(self, key: str, *, required: bool = False) -> float | None:
        value = self.data.get(key)
        if value is None:
            if required:
                raise self.error("missing number", key)
            return None
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise self.error(f"expected a number, got {value!r}", key)
        return float(value)

    def integer(self, key: str, *, required: bool = False) -> int | None:
        value = self.data.get(key)
        if value is None:
            if required:
                raise self.error("missing integer", key)
            return None
        # Recorders may hand us 100.0 for a step; accept integral floats, refuse 100.5.
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.error(f"expected an integer, got {value!r}", key)
        return value

    def text(self, key: str, *, required: bool = False) -> str | None:
        value = self.data.get(key)
        if value is None:
            if required:
                raise self.error("missing string", key)
            return None
        if isinstance(value, int) and not isinstance(value, bool):
            return str(value)  # a job id written as a number
        if not isinstance(value, str):
            raise self.error(f"expected a string, got {value!r}", key)
        return value

    def time(self) -> float:
        t = self.number("t", required=True)
        assert t is not None
        if not math.isfinite(t):
            raise self.error(f"time must be finite, got {t!r}", "t")
        return t


def _step(line: _Line) -> StepRecord:
    tokens = line.integer("tokens")
    step = line.integer("step", required=True)
    assert step is not None
    return StepRecord(
        step=step,
        t=line.time(),
        loss=line.number("loss"),
        grad_norm=line.number("grad_norm"),
        loss_scale=line.number("loss_scale"),
        tokens=tokens,
        replica=line.integer("replica"),
    )


def _checkpoint_saved(line: _Line) -> CheckpointSaved:
    step = line.integer("step", required=True)
    assert step is not None
    return CheckpointSaved(step=step, t=line.time(), duration_s=line.number("duration_s"))


def _checkpoint_loaded(line: _Line) -> CheckpointLoaded:
    step = line.integer("step", required=True)
    assert step is not None
    return CheckpointLoaded(step=step, t=line.time(), replica=line.integer("replica"))


def _eval(line: _Line) -> EvalRecord:
    step = line.integer("step", required=True)
    assert step is not None
    metrics = line.data.get("metrics", {})
    if not isinstance(metrics, dict):
        raise line.error(f"expected an object, got {metrics!r}", "metrics")
    values: dict[str, float] = {}
    for name, value in metrics.items():
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise line.error(f"expected a number, got {value!r}", f"metrics.{name}")
        values[str(name)] = float(value)
    return EvalRecord(step=step, t=line.time(), metrics=values)


def _job_start(line: _Line) -> JobStart:
    return JobStart(
        t=line.time(),
        job_id=line.text("job_id"),
        host=line.text("host"),
        run=line.text("run"),
        pid=line.integer("pid"),
    )


def _ft_event(kind: FtKind) -> Callable[[_Line], FtEvent]:
    def build(line: _Line) -> FtEvent:
        return FtEvent(
            kind=kind,
            t=line.time(),
            replica=line.integer("replica"),
            step=line.integer("step", required=kind is not FtKind.RESTART),
            replicas=line.integer("replicas", required=kind is FtKind.REPLICA_LOST),
            gpus=line.integer("gpus", required=kind is FtKind.REPLICA_LOST),
            quorum_id=line.integer("quorum_id", required=kind is FtKind.QUORUM),
            participants=line.integer("participants", required=kind is FtKind.QUORUM),
            attempt=line.integer("attempt", required=kind is FtKind.RESTART),
        )

    return build


_BUILDERS: dict[str, Callable[[_Line], Record]] = {
    **{kind.value: _ft_event(kind) for kind in FtKind},
    "step": _step,
    "checkpoint_saved": _checkpoint_saved,
    "checkpoint_loaded": _checkpoint_loaded,
    "eval": _eval,
    "job_start": _job_start,
}


def _record(line: _Line, last_start: JobStart | None) -> Record:
    version = line.data.get("v")
    if version != SUPPORTED_VERSION:
        raise line.error(
            f"unsupported telemetry version {version!r} (this gpuyield reads v=1)", "v"
        )
    event = line.data.get("event")
    if event == "job_end":
        status = line.text("status", required=True)
        assert status is not None
        return JobEnd(
            t=line.time(),
            status=status,
            job_id=last_start.job_id if last_start else None,
            host=last_start.host if last_start else None,
        )
    builder = _BUILDERS.get(event) if isinstance(event, str) else None
    if builder is None:
        raise line.error(f"unknown event {event!r}", "event")
    try:
        return builder(line)
    except ValueError as error:
        if isinstance(error, ParseError):
            raise
        raise line.error(str(error)) from error


def _parse(path: Path, raw: bytes, number: int) -> dict[str, JsonValue] | None:
    """One line parsed; None where it is not JSON (a candidate torn line)."""
    try:
        value = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError):
        return None
    except (RecursionError, ValueError) as error:  # nested past the parser's depth; 4300+ digits
        message = "nested too deeply" if isinstance(error, RecursionError) else str(error)
        raise ParseError(
            f"not a recorder line: {message}", path=path, line=number, hint=_NOT_OURS
        ) from None
    if not isinstance(value, dict):
        raise ParseError(
            f"expected a JSON object, got {type(value).__name__}", path=path, line=number
        )
    return value


def _lines(path: Path) -> Iterator[tuple[int, bytes]]:
    """The file's lines and their numbers, read one at a time, none past ``MAX_LINE_BYTES``."""
    with path.open("rb") as handle:
        for number, line in enumerate(iter(lambda: handle.readline(MAX_LINE_BYTES + 1), b""), 1):
            if len(line.rstrip(b"\n")) > MAX_LINE_BYTES:
                raise ParseError(
                    f"a line longer than {MAX_LINE_BYTES:,} bytes",
                    path=path,
                    line=number,
                    hint=_NOT_OURS,
                )
            yield number, line


def read(path: str | Path) -> TelemetryLog:
    """Read a Recorder JSONL file a line at a time; torn lines left by crashes are skipped and
    counted. A line that is not JSON is torn when only blank lines, or a restart's
    ``job_start``, follow it."""
    path = Path(path)
    records: list[Record] = []
    torn = 0
    pending: int | None = None  # the line number of a line that is not JSON, not yet judged
    last_start: JobStart | None = None
    for number, raw in _lines(path):
        if not raw.strip():
            continue  # a blank line carries nothing
        data = _parse(path, raw, number)
        if pending is not None:
            if data is None or data.get("event") != "job_start":
                raise ParseError(
                    "not valid JSON, and not a line torn by a crash (it is neither the last "
                    "line nor followed by a job_start)",
                    path=path,
                    line=pending,
                )
            torn, pending = torn + 1, None
        if data is None:
            pending = number
            continue
        record = _record(_Line(data, path, number), last_start)
        if isinstance(record, JobStart):
            last_start = record
        records.append(record)
        if len(records) > MAX_RECORDS:
            raise ParseError(
                f"more than {MAX_RECORDS:,} records in one file",
                path=path,
                line=number,
                hint="split the log by run (one file per job_start) and ingest the files",
            )
    torn += pending is not None  # the last line, torn by the crash that ended the run
    return TelemetryLog(
        path=str(path), format=TelemetryFormat.JSONL, records=tuple(records), torn_lines=torn
    )


def looks_like(head: bytes) -> bool:
    """Whether the first bytes of a file look like Recorder JSONL."""
    first = head.lstrip().split(b"\n", 1)[0]
    if not first.startswith(b"{"):
        return False
    try:
        data = json.loads(first)
    except (json.JSONDecodeError, UnicodeDecodeError):
        return False
    return isinstance(data, dict) and data.get("v") == SUPPORTED_VERSION and "event" in data
