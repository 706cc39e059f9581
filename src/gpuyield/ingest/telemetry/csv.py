"""Reader for a plain CSV (or TSV) of training steps: a step column and a loss column, with a
header.

Column names are matched loosely (``step``/``global_step``/``iteration``; ``loss``/``train_loss``/
``train/loss``; ``grad_norm``; ``loss_scale``; ``tokens``; a time column ``t``/``timestamp`` in
epoch seconds), see ``_keys``. Empty cells mean "not logged at this step".
"""

from __future__ import annotations

import csv
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from gpuyield.errors import ParseError
from gpuyield.ingest.telemetry import _table
from gpuyield.ingest.telemetry.records import TelemetryFormat, TelemetryLog


def _dialect(header: str) -> str:
    return "\t" if "\t" in header and "," not in header else ","


@dataclass(frozen=True, kw_only=True, slots=True)
class CsvRows:
    """A delimited file's header and rows, as read (every value a string)."""

    column_names: tuple[str, ...]
    """The header's names, in file order."""
    rows_by_line: Mapping[int, dict[str, str]]
    """Each row keyed by its 1-based line number (its last line, for a quoted multi-line value),
    in file order."""


def read_rows(path: Path) -> CsvRows:
    """Header and rows (with 1-based line numbers) of a delimited file."""
    with path.open(newline="", encoding="utf-8-sig") as handle:
        header_line = handle.readline()
        handle.seek(0)
        reader = csv.DictReader(handle, delimiter=_dialect(header_line))
        if not reader.fieldnames:
            raise ParseError("empty file: no header", path=path, line=1)
        names = tuple(str(n) for n in reader.fieldnames)
        rows: dict[int, dict[str, str]] = {}
        for row in reader:  # line_num is the line the reader stopped at: this row's last
            rows[reader.line_num] = dict(row)
    return CsvRows(column_names=names, rows_by_line=rows)


def read(path: str | Path) -> TelemetryLog:
    """Read step records from a CSV with a header row."""
    path = Path(path)
    table = read_rows(path)
    columns = _table.find_columns(list(table.column_names), path)
    records = _table.to_records(table.rows_by_line.items(), columns, path)
    return TelemetryLog(path=str(path), format=TelemetryFormat.CSV, records=tuple(records))


def looks_like(head: bytes) -> bool:
    """Whether the first line is a header naming a step column and a loss column."""
    from gpuyield.ingest.telemetry import _keys

    first = head.decode("utf-8-sig", errors="replace").split("\n", 1)[0].strip()
    names = next(csv.reader([first], delimiter=_dialect(first)), [])
    return _keys.pick(names, _keys.STEP_CANDIDATES) is not None and "loss" in _keys.metric_columns(
        names
    )
