"""Rows of named values (CSV, W&B history) -> StepRecords, shared by the csv and wandb readers."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from gpuyield.errors import ParseError
from gpuyield.ingest.telemetry import _keys
from gpuyield.ingest.telemetry.records import StepRecord


@dataclass(frozen=True, kw_only=True, slots=True)
class Columns:
    """Which source column feeds which StepRecord field."""

    #: The step column.
    step: str
    #: The time column (epoch seconds), if any.
    t: str | None
    #: StepRecord field ("loss", "grad_norm", "loss_scale", "tokens") -> source column.
    metrics: Mapping[str, str]


def find_columns(names: list[str], path: Path) -> Columns:
    """Pick the step, time and metric columns, or explain which one is missing."""
    step = _keys.pick(names, _keys.STEP_CANDIDATES)
    if step is None:
        raise ParseError(
            f"no step column among {names[:12]}",
            path=path,
            line=1,
            hint="name the step column one of: " + ", ".join(_keys.STEP_CANDIDATES),
        )
    metrics = _keys.metric_columns(names)
    if "loss" not in metrics:
        raise ParseError(
            f"no loss column among {names[:12]}",
            path=path,
            line=1,
            hint="name the loss column one of: " + ", ".join(_keys.CANDIDATES["loss"]),
        )
    return Columns(step=step, t=_keys.pick(names, _keys.TIME_CANDIDATES), metrics=metrics)


def _value(raw: object, path: Path, line: int, field: str) -> float | None:
    """A cell as a float; empty cells (a metric not logged at this step) are None."""
    if raw is None or raw == "":
        return None
    if isinstance(raw, bool):
        raise ParseError(f"expected a number, got {raw!r}", path=path, line=line, field=field)
    if isinstance(raw, int | float):
        return float(raw)
    if isinstance(raw, str):
        try:
            return float(raw.strip())
        except ValueError:
            pass
    raise ParseError(f"expected a number, got {raw!r}", path=path, line=line, field=field)


def to_records(
    rows: Iterable[tuple[int, Mapping[str, object]]], columns: Columns, path: Path
) -> list[StepRecord]:
    """One StepRecord per row with a step and at least one metric; rows carry line numbers."""
    records: list[StepRecord] = []
    for line, row in rows:
        step = _value(row.get(columns.step), path, line, columns.step)
        values = {
            name: _value(row.get(column), path, line, column)
            for name, column in columns.metrics.items()
        }
        if all(v is None for v in values.values()):
            continue  # a row of other metrics (W&B logs eval and train at different steps)
        if step is None or not step.is_integer() or step < 0:
            raise ParseError(
                f"step must be a whole number >= 0, got {row.get(columns.step)!r}",
                path=path,
                line=line,
                field=columns.step,
            )
        t = _value(row.get(columns.t), path, line, columns.t) if columns.t else None
        tokens = values.get("tokens")
        if t is not None and not math.isfinite(t):
            raise ParseError(
                f"time must be finite, got {t!r}", path=path, line=line, field=columns.t
            )
        records.append(
            StepRecord(
                step=int(step),
                t=t,
                loss=values.get("loss"),
                grad_norm=values.get("grad_norm"),
                loss_scale=values.get("loss_scale"),
                tokens=int(tokens) if tokens is not None and math.isfinite(tokens) else None,
            )
        )
    return records
