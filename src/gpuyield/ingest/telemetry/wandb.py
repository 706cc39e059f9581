"""Reader for Weights & Biases history exports, without the wandb package.

Three shapes are read:

- ``run.history().to_csv(...)`` (or ``scan_history`` as a CSV): columns ``_step``, ``_timestamp``
  (epoch seconds), ``_runtime`` and one column per logged key (``train/loss``, ...);
- the UI's panel "Export CSV": ``Step`` and ``<run name> - <key>`` columns, with ``__MIN``/``__MAX``
  companions for smoothed panels (ignored); one run per file;
- ``scan_history()`` dumped as JSON (a list of objects) or JSON Lines (one object per line).

Rows that log none of loss, grad norm, loss scale or tokens (eval-only rows) are skipped.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from gpuyield.errors import ParseError
from gpuyield.ingest.telemetry import _table
from gpuyield.ingest.telemetry.csv import read_rows
from gpuyield.ingest.telemetry.records import TelemetryFormat, TelemetryLog

_PANEL_SEPARATOR = " - "


def _panel_names(names: list[str], path: Path) -> dict[str, str]:
    """Panel export column -> metric key, dropping the run-name prefix and min/max companions."""
    renamed: dict[str, str] = {}
    runs: set[str] = set()
    for name in names:
        if name.endswith(("__MIN", "__MAX")) or _PANEL_SEPARATOR not in name:
            renamed[name] = name
            continue
        run, key = name.split(_PANEL_SEPARATOR, 1)
        runs.add(run)
        renamed[name] = key
    if len(runs) > 1:
        raise ParseError(
            f"a panel export of {len(runs)} runs ({', '.join(sorted(runs))})",
            path=path,
            line=1,
            hint="export one run per file (hide the other runs in the panel first)",
        )
    return renamed


def _read_csv(path: Path) -> TelemetryLog:
    table = read_rows(path)
    renamed = _panel_names(list(table.column_names), path)
    keyed_rows = [
        (line, {renamed[k]: v for k, v in row.items()}) for line, row in table.rows_by_line.items()
    ]
    columns = _table.find_columns(list(renamed.values()), path)
    records = _table.to_records(keyed_rows, columns, path)
    return TelemetryLog(path=str(path), format=TelemetryFormat.WANDB, records=tuple(records))


def _loads(text: str, path: Path, line: int | None) -> Any:
    """``text`` parsed; JSON the parser cannot hold (nested past its depth, a number of more
    than 4300 digits) is a ParseError like any invalid JSON, naming the line."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as error:
        where = error.lineno if line is None else line
        raise ParseError(f"invalid JSON: {error.msg}", path=path, line=where) from None
    except (RecursionError, ValueError) as error:
        message = "nested too deeply" if isinstance(error, RecursionError) else str(error)
        raise ParseError(f"invalid JSON: {message}", path=path, line=line or 1) from None


def _json_rows(path: Path, text: str) -> list[tuple[int, Mapping[str, Any]]]:
    stripped = text.lstrip()
    if stripped.startswith("["):
        data = _loads(text, path, None)
        if not all(isinstance(row, dict) for row in data):
            raise ParseError("expected a list of objects", path=path, line=1)
        # A JSON array has no per-row line numbers; report the row's 1-based index instead.
        return [(index, row) for index, row in enumerate(data, start=1)]
    rows: list[tuple[int, Mapping[str, Any]]] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        row = _loads(line, path, number)
        if not isinstance(row, dict):
            raise ParseError("expected a JSON object", path=path, line=number)
        rows.append((number, row))
    return rows


def _read_json(path: Path, text: str) -> TelemetryLog:
    rows = _json_rows(path, text)
    names = list(dict.fromkeys(key for _, row in rows for key in row))
    columns = _table.find_columns(names, path)
    records = _table.to_records(rows, columns, path)
    return TelemetryLog(path=str(path), format=TelemetryFormat.WANDB, records=tuple(records))


def read(path: str | Path) -> TelemetryLog:
    """Read a W&B history export (CSV, JSON or JSON Lines)."""
    path = Path(path)
    text = path.read_text(encoding="utf-8-sig")
    if text.lstrip().startswith(("[", "{")):
        return _read_json(path, text)
    return _read_csv(path)


def looks_like(head: bytes) -> bool:
    """Whether a file's first bytes look like a W&B export (``_step`` key or a panel export)."""
    text = head.decode("utf-8-sig", errors="replace").lstrip()
    first = text.split("\n", 1)[0]
    if first.startswith(("[", "{")):
        return '"_step"' in text
    names = [n.strip().strip('"') for n in first.split(",")]
    if "_step" in names:
        return True
    return "Step" in names and any(_PANEL_SEPARATOR in n for n in names)
