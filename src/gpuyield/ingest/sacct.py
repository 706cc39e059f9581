"""Slurm job accounting: ``sacct -a -P [-X] [-D] --format=...`` text into the ``jobs`` table.

What real Slurm prints and this module handles (see ``shared/data/slurm-local/README.md``):
- ``-P`` does no quoting: a multi-line ``SubmitLine`` spreads one record over several lines, and a
  pipe inside ``SubmitLine`` adds a field. Records are reassembled by counting separators.
- Times are local without a zone (``--tz``); ``Unknown``/``None`` mean "no such time".
- States carry words (``CANCELLED by 0``); the first word is the state.
- Without ``-X`` each job has step rows (``.batch``, ``.extern``, ``.0``): they are not extra
  allocations and are skipped (counted). With ``-D`` the runs of a requeued job share ``JobIDRaw``.
- GPUs come from ``AllocTRES``: ``gres/gpu=N`` when present, else the sum of ``gres/gpu:TYPE=N``
  (Slurm prints both for typed GRES; adding them would double count).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import duckdb
import pyarrow as pa

from gpuyield.errors import ParseError, UnknownFormat
from gpuyield.hostlist import HOSTLIST_MACRO_SQL, MAX_HOSTLIST_NAMES
from gpuyield.ingest import sacct_checks
from gpuyield.ingest._files import FileInfo, sample_lines
from gpuyield.ingest._sql import (
    LOCAL_TIME_HINT,
    TIME_HINT,
    statement_progress,
)
from gpuyield.ingest.sacct_sql import (
    ENDS_BEFORE_START,
    KNOWN_STATES,
    LATEST_TIME_SQL,
    NOT_A_TIME,
    SacctStage,
    finish_stage,
    row_problems,
    typed_select,
)
from gpuyield.progress import NoProgress, Progress
from gpuyield.sqltext import identifier, literal

__all__ = [
    "KNOWN_STATES",
    "LATEST_TIME_SQL",
    "SOURCE",
    "SacctHeader",
    "SacctStage",
    "column_map",
    "csv_source_sql",
    "file_order_kept",
    "read_header",
    "stage_sacct",
    "typed_select",
]

SOURCE = "slurm.sacct"


# Fields the ledger cannot work without, by any of the names sacct may print them under.
_REQUIRED = {
    "jobidraw": ("jobidraw", "jobid"),
    "state": ("state",),
    "start": ("start",),
    "end": ("end",),
    "nodelist": ("nodelist",),
}
_OPTIONAL = (
    "jobid",
    "jobname",
    "user",
    "account",
    "partition",
    "qos",
    "exitcode",
    "submit",
    "elapsedraw",
    "elapsed",
    "alloctres",
    "allocgres",
    "reqtres",
    "nnodes",
    "comment",
    "reason",
    "cluster",
)
# A pipe found inside a record goes to the first of these present: free text most likely to hold one.
_FREE_TEXT = ("submitline", "comment", "jobname", "workdir")

_HINT = (
    "check the file is `sacct -P` output with its header line (or pass ingest.fields for "
    "sacct --noheader output)"
)
_ROW_HINT = (
    "fix or remove that record, or pass ingest.lenient to skip records like it (they are counted "
    "and listed in the report)"
)


@dataclass(frozen=True, kw_only=True, slots=True)
class SacctHeader:
    """What an sacct file's first line (or ``--fields``) says about its records."""

    field_names: tuple[str, ...]
    """The fields of every record, in file order (``TRAILING`` for ``sacct -p``'s last, empty one)."""
    header_lines: int
    """Lines before the first record: 1 for a header line, 0 with ``--fields``."""


def read_header(path: Path, fields: list[str] | None) -> SacctHeader:
    """The field names and how many lines they take (0 with ``--fields``).

    ``sacct -p`` (``--parsable``) ends every line, the header too, with a ``|``: its names end
    with ``TRAILING``, a field that is always empty and that nothing reads.
    """
    # utf-8-sig: a byte-order mark some editors put first is not part of the first name.
    with path.open(encoding="utf-8-sig") as handle:
        first = handle.readline().rstrip("\r\n")
    if fields:
        fields = _format_names(path, fields)
        if "|" not in first and len(fields) > 1:
            raise UnknownFormat(
                f"{path}: line 1 has no '|' between its fields: not sacct -P output, or written "
                "with an sacct --delimiter that line 1 does not show",
                hint="capture with sacct -P (or -p), or keep the header line (no sacct --noheader)",
            )
        # -p without a header: the first record has one (empty) field more than ingest.fields names.
        parts = first.split("|")
        trailing = len(parts) == len(fields) + 1 and parts[-1] == ""
        given = (*fields, TRAILING) if trailing else tuple(fields)
        return SacctHeader(field_names=given, header_lines=0)
    names = first.split("|")
    if len(names) > 2 and names[-1] == "":
        names[-1] = TRAILING
    if len(names) < 2 or any(not _is_field_name(n) for n in names):
        raise UnknownFormat(
            f"{path}: line 1 is not an sacct -P header: {first[:80]!r}",
            hint=_other_delimiter_hint(first)
            or "run sacct with -P (--parsable2) or -p; for sacct --noheader output pass ingest.fields",
        )
    return SacctHeader(field_names=tuple(names), header_lines=1)


def detect_delimiter(path: Path, fields: list[str] | None) -> str | None:
    """The character between the fields of an sacct file: ``|`` (``-P``/``-p``), or another one
    written with ``sacct --delimiter`` (found on the header line, or, with ``--fields``, as the
    one character every field boundary of line 1 has); None when line 1 shows none."""
    with path.open(encoding="utf-8-sig", errors="replace") as handle:
        first = handle.readline(_FIRST_LINE_BYTES).rstrip("\r\n")
    if "|" in first or not first:
        return "|" if first else None
    if not fields:
        return _header_delimiter(first)
    wanted = (len(fields) - 1, len(fields))  # -P, or -p with its trailing delimiter
    found = [
        c for c in sorted(set(first)) if not (c.isalnum() or c in _IN_VALUES or c == "\ufffd")
        and first.count(c) in wanted
    ]  # fmt: skip
    return found[0] if len(found) == 1 else None


def _header_delimiter(first: str) -> str | None:
    other = next((c for c in first if not (c.isalnum() or c in "_|")), None)
    if other is None or other == "\ufffd" or (other.isspace() and other != "\t"):
        return None
    names = first.rstrip(other).split(other)
    if len(names) < 2 or not all(_SACCT_NAME.fullmatch(n) for n in names):
        return None
    return other


# What every sacct field name looks like (a header of other text is no header).
_SACCT_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_]*")


def delimiter_copy(path: Path, directory: Path, fields: list[str] | None) -> Path | None:
    """A copy of ``path`` in ``directory`` with its ``sacct --delimiter`` character replaced by
    ``|``, or None when the file uses ``|`` already (or shows no delimiter: the reader then names
    what it found). Refused when a value holds a ``|``: which ones are delimiters is unknown."""
    delimiter = detect_delimiter(path, fields)
    if delimiter in (None, "|"):
        return None
    assert delimiter is not None
    target = directory / path.name
    # Bytes, not text: bytes that are not UTF-8 are named by the file scan, with their line.
    old, new = delimiter.encode("utf-8"), b"|"
    with path.open("rb") as source, target.open("wb") as out:
        for number, line in enumerate(source, start=1):
            if new in line:
                raise ParseError(
                    f"the fields are separated by {delimiter!r} (sacct --delimiter) and a value "
                    "holds '|'",
                    path=path,
                    line=number,
                    hint="capture again with sacct -P, whose delimiter is '|'",
                )
            out.write(line.replace(old, new))
    return target


def use_pipe_copy(
    copies: dict[str, Path],
    renamed: dict[str, str],
    given: Path,
    directory: Path,
    fields: list[str] | None,
) -> None:
    """Replace the sacct input (its plain copy, or ``given``) in ``copies`` by a ``delimiter_copy``
    when it was written with another delimiter, mapping the copy to the path the user gave."""
    current = copies.get("sacct", given)
    if not current.is_file():
        return  # the reader names what is wrong with it
    (directory / "sacct-delimited").mkdir()
    delimited = delimiter_copy(current, directory / "sacct-delimited", fields)
    if delimited is not None:
        copies["sacct"] = delimited
        renamed[str(delimited)] = renamed.pop(str(current), str(given))


# Characters that appear inside sacct values (times, TRES, node lists, names): never taken for a
# delimiter. The first line read for detection is bounded: a header is a few hundred bytes.
_IN_VALUES = "_-.:/,=[]()%+@ "
_FIRST_LINE_BYTES = 1 << 20


def _other_delimiter_hint(first: str) -> str | None:
    """A hint when line 1 is a header written with ``sacct --delimiter`` (names split by
    another character): gpuyield reads sacct's own ``|``."""
    other = next((c for c in first if not (c.isalnum() or c in "_|")), None)
    if other is None or "|" in first or other.isspace():
        return None
    names = first.rstrip(other).split(other)
    if len(names) < 2 or not all(_is_field_name(n) for n in names):
        return None
    return (
        f"this looks like sacct --delimiter={other!r} output; re-run sacct -P without --delimiter"
    )


# The name of the empty field after the last ``|`` of ``sacct -p`` lines (never a sacct field).
TRAILING = "(end of line)"
# sacct --format takes an output width after a name (JobName%30, State%-12): the name is the field.
_WIDTH = re.compile(r"%-?\d+$")


def _format_names(path: Path, fields: list[str]) -> list[str]:
    """The field names of a ``--format`` list as given to sacct, widths dropped."""
    names = [_WIDTH.sub("", f.strip()) for f in fields]
    for given, name in zip(fields, names, strict=True):
        if not _is_field_name(name) or name == TRAILING:
            raise UnknownFormat(
                f"{path}: ingest.fields names {given!r}, which is not an sacct field",
                hint="give ingest.fields the sacct --format list of the capture, e.g. JobID,"
                "JobIDRaw,State,Start,End,AllocTRES,NodeList (widths such as JobName%30 are fine)",
            )
    return names


def _is_field_name(name: str) -> bool:
    return name == TRAILING or (bool(name) and name.replace("_", "").isalnum())


def column_map(path: Path, names: Sequence[str]) -> dict[str, int]:
    lowered = [n.lower() for n in names]
    columns: dict[str, int] = {}
    for key, aliases in _REQUIRED.items():
        found = next((lowered.index(a) for a in aliases if a in lowered), None)
        if found is None:
            raise UnknownFormat(
                f"{path}: sacct output lacks the field {aliases[0]!r}",
                hint="include JobIDRaw,State,Start,End,NodeList,AllocTRES,Submit in sacct --format",
            )
        columns[key] = found
    for key in (*_OPTIONAL, *_FREE_TEXT):
        if key in lowered:
            columns[key] = lowered.index(key)
    return columns


def stage_sacct(
    con: duckdb.DuckDBPyConnection,
    info: FileInfo,
    *,
    ingest_id: int,
    fields: list[str] | None,
    tz: str,
    lenient: bool,
    default_cluster: str,
    progress: Progress | None = None,
    max_nodes: int = MAX_HOSTLIST_NAMES,
) -> SacctStage:
    """Parse ``info.path`` into the temp view ``sacct_staged`` (typed, checked, with line numbers)."""
    header = read_header(info.path, fields)
    names, header_lines = header.field_names, header.header_lines
    columns = column_map(info.path, names)
    con.execute(HOSTLIST_MACRO_SQL)

    def typed_sql(source_sql: str, with_line: bool) -> str:
        return typed_select(
            columns,
            tz,
            default_cluster,
            source_sql=source_sql,
            with_line=with_line,
            max_nodes=max_nodes,
        )

    shape_problems: list[tuple[int, str, str]] = []
    fast = False
    if not info.mixed_line_ends:
        with statement_progress(
            con, progress or NoProgress(), f"staging {info.path.name}", total_bytes=info.size_bytes
        ):
            fast = _stage_fast(con, info, typed_sql, len(names), header_lines, columns["jobidraw"])
    if not fast:
        shape_problems = _split_records(con, info.path, names, columns, header_lines)
        if shape_problems and not lenient:
            line, message, _ = shape_problems[0]
            raise ParseError(message, path=info.path, line=line, field=None, hint=_HINT)
        con.execute(
            f"CREATE OR REPLACE TEMP TABLE sacct_stage AS {typed_sql('sacct_records', True)}"
        )
        con.execute("CREATE OR REPLACE TEMP VIEW sacct_staged AS SELECT * FROM sacct_stage")
    problems = row_problems(con, info.path, names, columns, fast=fast, limit=None if lenient else 1)
    if problems and not lenient:
        first = problems[0]
        hint = _ROW_HINT  # the file reads; one of its values does not
        if first.message.startswith(NOT_A_TIME):
            hint = TIME_HINT
        elif first.message == ENDS_BEFORE_START and tz != "UTC":
            hint = LOCAL_TIME_HINT
        raise ParseError(
            first.message, path=info.path, line=first.line, field=first.field, hint=hint
        )
    problems += sacct_checks.duplicate_problems(con, info.path, lenient=lenient)
    return finish_stage(con, info, ingest_id, problems, shape_problems, columns)


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


def _stage_fast(
    con: duckdb.DuckDBPyConnection,
    info: FileInfo,
    typed_sql: Callable[[str, bool], str],
    n_fields: int,
    header_lines: int,
    id_index: int,
) -> bool:
    """Stage with DuckDB's CSV reader when every line is one record (parallel, streaming).

    False when some line has the wrong number of fields (a multi-line ``SubmitLine``, a pipe in a
    free-text field, a truncated line): the caller then reassembles records line by line. Line
    numbers come from the temp table's row ids, not ``row_number()``, which would serialise the
    read (twice the time): the reader keeps file order and, as it read one record per line (it
    skips blank lines, hence the count), record n is line n + header.
    """
    source_sql = csv_source_sql(info.path, n_fields, header_lines)
    con.execute(f"CREATE OR REPLACE TEMP TABLE sacct_stage AS {typed_sql(source_sql, False)}")
    records, first_row_id = con.execute(
        "SELECT count(*), coalesce(min(rowid), 0) FROM sacct_stage"
    ).fetchall()[0]
    if records != info.num_lines - header_lines:
        return False
    # Row ids are consecutive from a base that differs inside a transaction.
    con.execute(
        f"""CREATE OR REPLACE TEMP VIEW sacct_staged AS
            SELECT rowid - {literal(first_row_id)} + {literal(header_lines + 1)} AS line, *
            FROM sacct_stage"""
    )
    return file_order_kept(con, info, "SELECT line, job_id_raw FROM sacct_staged", id_index)


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


def _split_records(
    con: duckdb.DuckDBPyConnection,
    path: Path,
    names: Sequence[str],
    columns: dict[str, int],
    header_lines: int,
) -> list[tuple[int, str, str]]:
    """Reassemble records that span lines into ``sacct_records``; returns (line, message, raw) for
    records that cannot be.

    DuckDB reads the lines and splits the whole ones (a line with every separator, not followed by
    a line without any); only the other lines, typically a few multi-line ``SubmitLine`` records,
    go through Python, streamed, so memory stays bounded on large files.
    """
    n_sep = len(names) - 1
    free = next((columns[k] for k in _FREE_TEXT if k in columns), None)
    con.execute(
        f"""
        CREATE OR REPLACE TEMP TABLE sacct_lines AS
        SELECT line, text, seps,
            -- A line with every separator is one record, unless free text runs on below it.
            seps = {literal(n_sep)} AND coalesce(lead(seps) OVER (ORDER BY line), -1) <> 0 AS whole
        FROM (
            SELECT line, text, length(text) - length(replace(text, '|', '')) AS seps
            FROM (
                SELECT row_number() OVER () AS line,
                    coalesce(regexp_replace(column0, '\r$', ''), '') AS text
                FROM read_csv({literal(str(path))}, columns={{'column0': 'VARCHAR'}},
                              delim='\0', quote='', escape='', header=false,
                              auto_detect=false, strict_mode=false)
            )
            WHERE line > {literal(header_lines)}
        )
        """
    )
    split_sql = ", ".join(
        f"parts[{literal(i + 1)}] AS {identifier(f'f{i}')}" for i in range(n_sep + 1)
    )
    con.execute(
        f"""CREATE OR REPLACE TEMP TABLE sacct_records AS
            SELECT line, {split_sql}, text AS raw
            FROM (SELECT line, text, string_split(text, '|') AS parts FROM sacct_lines WHERE whole)"""
    )
    batches, problems = _reassemble(
        con.execute("SELECT line, text, seps FROM sacct_lines WHERE NOT whole ORDER BY line"),
        n_sep,
        free,
    )
    if batches:
        con.register("sacct_records_arrow", pa.Table.from_batches(batches))
        con.execute("INSERT INTO sacct_records SELECT * FROM sacct_records_arrow")
        con.unregister("sacct_records_arrow")
    return problems


def _reassemble(
    cursor: duckdb.DuckDBPyConnection, n_sep: int, free: int | None
) -> tuple[list[pa.RecordBatch], list[tuple[int, str, str]]]:
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
    return batches, problems


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
