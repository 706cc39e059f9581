"""sacct ``-P`` text as records: DuckDB's CSV reader over a file whose lines are records, the check
that it kept file order, and the reassembly of records a free-text field spread over lines.

Nothing here names a temporary table: ``staging`` puts the records where they go.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import duckdb
import pyarrow as pa

from gpuyield.ingest._files import FileInfo, sample_lines
from gpuyield.sqltext import identifier, literal


def csv_source_sql(path: Path, n_fields: int, header_lines: int) -> str:
    """DuckDB's CSV reader over an sacct file: one record per line, fields ``f0``...

    A misshapen line is left out, not an error (an error would abort the ingest's transaction):
    callers compare the records read with the file's lines. DuckDB ignores empty fields past the
    last column (``a|b|c|`` reads as three), which would hide a ``|`` inside a value whenever the
    record's last field is empty (always, in ``sacct -p`` output): so the reader declares one
    column more than the header, and a line that fills it has too many fields. No field reads as
    NULL (``nullstr`` is a newline, which no field can hold), so a NULL last field is a short line.
    """
    columns = ", ".join(f"{literal(f'f{i}')}: 'VARCHAR'" for i in range(n_fields + 1))
    fields = ", ".join(identifier(f"f{i}") for i in range(n_fields))
    extra = identifier(f"f{n_fields}")
    last = identifier(f"f{n_fields - 1}")
    return f"""(SELECT {fields} FROM read_csv({literal(str(path))}, columns={{{columns}}},
                        delim='|', quote='', escape='',
                        header={literal(bool(header_lines))}, auto_detect=false,
                        strict_mode=true, null_padding=true, ignore_errors=true, nullstr='\n')
                WHERE {extra} IS NULL AND {last} IS NOT NULL)"""


def file_order_kept(
    con: duckdb.DuckDBPyConnection, info: FileInfo, rows_sql: str, id_index: int
) -> bool:
    """Whether the line numbers taken from row ids are right, on a sample of the file's lines.

    ``rows_sql`` gives (line, value of field ``id_index``) for the records read.

    The reader keeps file order (DuckDB preserves insertion order); this checks it did, on lines
    spread through the file (one seek each), so a reader that did not fails safe: the caller falls
    back to the line-by-line path.
    """
    expected = {}
    for number, text in sample_lines(info).items():
        parts = text.split("|")
        if len(parts) > id_index:
            expected[number] = parts[id_index] or None
    if not expected:
        return True
    found = dict(
        con.execute(
            f"""SELECT line, value FROM ({rows_sql}) AS sample(line, value)
                WHERE line IN (SELECT unnest(?))""",
            [sorted(expected)],
        ).fetchall()
    )
    # The header line (and nothing else) may be sampled without a row.
    return (
        all(found.get(n, v) == v for n, v in expected.items()) and len(found) >= len(expected) - 1
    )


@dataclass(frozen=True, kw_only=True, slots=True)
class Reassembled:
    """The records built from lines that are not whole records."""

    batches: list[pa.RecordBatch]
    """The records (``line``, ``f0``..., ``raw``), in file order."""
    problems: list[tuple[int, str, str]]
    """(line, message, raw text) of each record that cannot be built."""


def reassemble(cursor: duckdb.DuckDBPyConnection, n_sep: int, free: int | None) -> Reassembled:
    """Records from the lines that are not whole records, in file order (streamed from ``cursor``).

    Runs of such lines are separated by whole records, which close any record being built.
    """
    batches: list[pa.RecordBatch] = []
    records: list[tuple[int, list[str], str]] = []
    problems: list[tuple[int, str, str]] = []
    buf: list[str] = []
    buf_line = buf_seps = 0
    previous = -1

    def close() -> None:
        text = "\n".join(buf)
        parts = text.split("|")
        if len(parts) == n_sep + 1:
            records.append((buf_line, parts, text))
        elif len(parts) > n_sep + 1 and free is not None:
            extra = len(parts) - n_sep - 1
            merged = [*parts[:free], "|".join(parts[free : free + extra + 1])]
            records.append((buf_line, merged + parts[free + extra + 1 :], text))
        else:
            problems.append(
                (buf_line, f"record has {len(parts)} fields, header has {n_sep + 1}", text)
            )
        buf.clear()
        if len(records) >= 50_000:
            batches.append(_record_batch(records, n_sep))
            records.clear()

    while rows := cursor.fetchmany(10_000):
        for number, text, seps in rows:
            if buf and number != previous + 1:
                close()  # a whole record stood between: what was being built is complete
            previous = number
            if buf and buf_seps >= n_sep and seps == 0:
                buf.append(text)  # more lines of a free-text field at the end of the record
                continue
            if buf and (buf_seps >= n_sep or seps == n_sep):
                close()  # a complete record, or a truncated one followed by a whole new record
            if not buf:
                if not text:
                    continue
                buf_line, buf_seps = number, 0
            buf.append(text)
            buf_seps += seps
    if buf:
        close()
    if records:
        batches.append(_record_batch(records, n_sep))
    return Reassembled(batches=batches, problems=problems)


def _record_batch(records: list[tuple[int, list[str], str]], n_sep: int) -> pa.RecordBatch:
    return pa.RecordBatch.from_pydict(
        {
            "line": pa.array([r[0] for r in records], pa.int64()),
            **{
                f"f{i}": pa.array([r[1][i] for r in records], pa.string()) for i in range(n_sep + 1)
            },
            "raw": pa.array([r[2] for r in records], pa.string()),
        }
    )
