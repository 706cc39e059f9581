"""Reader for an MLflow file store (``mlruns/``), read straight from disk.

The file store keeps one file per metric key under ``<run>/metrics/`` (keys with ``/`` become
sub-directories), each line ``<timestamp ms> <value> <step>``, and the run's ``meta.yaml`` beside
it. That layout is stable and simple, so this reader parses it without importing mlflow (which takes
seconds to import and warns about the file store on recent versions); tests write the store with the
real ``mlflow`` package. ``path`` may be a run directory, an experiment directory or the store root;
it must hold exactly one run.
"""

from __future__ import annotations

import math
from pathlib import Path

from gpuyield.errors import InputError, ParseError
from gpuyield.ingest.telemetry import _keys
from gpuyield.ingest.telemetry.records import StepRecord, TelemetryFormat, TelemetryLog
from gpuyield.tomlfile import read_small_text

#: A run's meta.yaml is a few hundred bytes.
MAX_META_BYTES = 1 << 20
#: A metric line is '<timestamp ms> <value> <step>': tens of bytes.
MAX_LINE_BYTES = 4096
#: Points one metric file may hold: a step logged ten million times (Llama 3 405B trained for
#: about 1.2M steps); they are held in memory.
MAX_POINTS = 10_000_000


def is_run_dir(path: Path) -> bool:
    """Whether ``path`` is an MLflow file-store run directory."""
    meta = path / "meta.yaml"
    if not (path / "metrics").is_dir() or not meta.is_file():
        return False
    text = read_small_text(meta, max_bytes=MAX_META_BYTES, what="an MLflow run's meta.yaml")
    return any(line.startswith("run_id:") for line in text.splitlines())


def find_run(path: Path) -> Path:
    """The one run directory at, or up to two levels under, ``path``."""
    if is_run_dir(path):
        return path
    candidates = [p for p in path.glob("*") if p.is_dir()] + [
        p for p in path.glob("*/*") if p.is_dir()
    ]
    runs = sorted(p for p in candidates if is_run_dir(p))
    if len(runs) == 1:
        return runs[0]
    if not runs:
        raise InputError(
            f"{path}: no MLflow run here (a run directory holds meta.yaml and metrics/)",
            hint="pass mlruns/<experiment id>/<run id>",
        )
    listed = ", ".join(str(r.relative_to(path)) for r in runs[:8])
    raise InputError(
        f"{path} holds {len(runs)} MLflow runs ({listed})",
        hint="pass one run's directory: mlruns/<experiment id>/<run id>",
    )


def _metric_keys(metrics_dir: Path) -> dict[str, Path]:
    return {p.relative_to(metrics_dir).as_posix(): p for p in metrics_dir.rglob("*") if p.is_file()}


def _read_metric(path: Path) -> list[tuple[int, float, float]]:
    """(step, epoch seconds, value) per line of one metric file, read a line at a time."""
    points: list[tuple[int, float, float]] = []
    with path.open("rb") as handle:
        lines = iter(lambda: handle.readline(MAX_LINE_BYTES + 1), b"")
        for number, raw in enumerate(lines, start=1):
            points += _point(path, raw, number)
            if len(points) > MAX_POINTS:
                raise ParseError(
                    f"more than {MAX_POINTS:,} points in one metric",
                    path=path,
                    line=number,
                    hint="an MLflow metric file holds a line per logged step; is this one?",
                )
    return points


def _point(path: Path, raw: bytes, number: int) -> list[tuple[int, float, float]]:
    """The line's point (none for a blank line)."""
    if len(raw.rstrip(b"\r\n")) > MAX_LINE_BYTES:
        raise ParseError(
            f"a line longer than {MAX_LINE_BYTES:,} bytes",
            path=path,
            line=number,
            hint="an MLflow metric line is '<timestamp ms> <value> <step>'",
        )
    try:
        line = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise ParseError("not UTF-8 text", path=path, line=number) from None
    parts = line.split()
    if not parts:
        return []
    if len(parts) not in (2, 3):
        raise ParseError("expected '<timestamp ms> <value> <step>'", path=path, line=number)
    try:
        timestamp_ms, value = int(parts[0]), float(parts[1])
        step = int(parts[2]) if len(parts) == 3 else 0
    except ValueError as error:
        raise ParseError(f"not a number: {error}", path=path, line=number) from error
    return [(step, timestamp_ms / 1000.0, value)]


def read(path: str | Path) -> TelemetryLog:
    """Read loss, grad norm, loss scale and tokens per step from one MLflow file-store run."""
    path = Path(path)
    run = find_run(path)
    files = _metric_keys(run / "metrics")
    columns = _keys.metric_columns(files)
    if not columns:
        shown = ", ".join(sorted(files)[:12]) or "none"
        raise InputError(
            f"{run}: no loss, grad norm, loss scale or tokens metric (metrics: {shown})",
            hint="log the loss under one of: " + ", ".join(_keys.CANDIDATES["loss"]),
        )
    by_step: dict[int, dict[str, float]] = {}
    times: dict[int, float] = {}
    for field_name, key in columns.items():
        for step, t, value in _read_metric(files[key]):
            by_step.setdefault(step, {})[field_name] = value
            times[step] = min(times.get(step, math.inf), t)
    records = []
    for step in sorted(by_step):
        values = by_step[step]
        tokens = values.get("tokens")
        records.append(
            StepRecord(
                step=step,
                t=times[step],
                loss=values.get("loss"),
                grad_norm=values.get("grad_norm"),
                loss_scale=values.get("loss_scale"),
                tokens=int(tokens) if tokens is not None and math.isfinite(tokens) else None,
            )
        )
    return TelemetryLog(path=str(run), format=TelemetryFormat.MLFLOW, records=tuple(records))
