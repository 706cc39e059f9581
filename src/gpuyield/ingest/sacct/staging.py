"""The sacct stage: the temporary tables a file's records pass through, and the only module that
names them.

Strict or lenient, a file is read into ``STAGE_TABLE`` (typed rows with their problem codes);
``STAGED_VIEW`` adds line numbers (the fast path's table has none, its view computes them). Records
that spread over lines are reassembled through ``LINES_TABLE`` into ``RECORDS_TABLE`` first.
``JOBS_VIEW`` is what ``load.load_staged`` stores: no steps, no rejected or repeated records.
``REPLACED_TABLE`` holds the keys of earlier rows a direct load replaces.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import duckdb
import pyarrow as pa

from gpuyield.errors import ParseError
from gpuyield.hostlist import HOSTLIST_MACRO_SQL, MAX_HOSTLIST_NAMES
from gpuyield.ingest._files import FileInfo
from gpuyield.ingest._sql import (
    LOCAL_TIME_HINT,
    TIME_HINT,
    Problem,
    statement_progress,
    store_rejects,
)
from gpuyield.ingest.sacct import checks
from gpuyield.ingest.sacct.header import FREE_TEXT, column_map, read_header
from gpuyield.ingest.sacct.records import csv_source_sql, file_order_kept, reassemble
from gpuyield.ingest.sacct.typed import (
    ENDS_BEFORE_START,
    LATEST_TIME_SQL,
    NOT_A_TIME,
    ROW_PROBLEMS,
    typed_select,
)
from gpuyield.progress import NoProgress, Progress
from gpuyield.sqltext import identifier, literal

#: Typed rows of the file being read, with their problem codes (``typed.typed_select``).
STAGE_TABLE = "sacct_stage"
#: ``STAGE_TABLE`` with each row's line in the file.
STAGED_VIEW = "sacct_staged"
#: The file's lines after the header, with their separator counts (the line-by-line path).
LINES_TABLE = "sacct_lines"
#: Raw records (``f0, f1, ...`` and the record's text) reassembled from ``LINES_TABLE``.
RECORDS_TABLE = "sacct_records"
#: The reassembled records built in Python, registered for one insert into ``RECORDS_TABLE``.
RECORDS_ARROW = "sacct_records_arrow"
#: The job runs to store: neither steps, nor rejected, nor repeated.
JOBS_VIEW = "stage_jobs"
#: Keys of the earlier rows a direct load replaces (``load.finish_direct``).
REPLACED_TABLE = "gy_replaced"

_HINT = (
    "check the file is `sacct -P` output with its header line (or pass ingest.fields for "
    "sacct --noheader output)"
)
_ROW_HINT = (
    "fix or remove that record, or pass ingest.lenient to skip records like it (they are counted "
    "and listed in the report)"
)


@dataclass(frozen=True, kw_only=True, slots=True)
class SacctStage:
    """What reading one sacct file produced (rows in the temp view ``JOBS_VIEW`` or in ``jobs``)."""

    rows_read: int
    """Records in the file (a multi-line record counts once; header excluded)."""
    rows_rejected: int
    """Records rejected in lenient mode (kept in ``rejects``)."""
    rows_skipped: int
    """Step rows and duplicate records: not allocations, so not loaded."""
    as_of_s: int | None
    """Latest time the file knows of: the default end for running jobs."""
    gpu_count_missing: bool
    """True when the file has no ``AllocTRES``/``AllocGRES`` column at all."""
    loaded: bool = False
    """True when the rows are in ``jobs`` already (the direct load), not in ``JOBS_VIEW``."""


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
    """Parse ``info.path`` into ``STAGED_VIEW`` (typed, checked, with line numbers), the runs to
    store into ``JOBS_VIEW``."""
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
        shape_problems = _stage_lines(con, info.path, names, columns, header_lines)
        if shape_problems and not lenient:
            line, message, _ = shape_problems[0]
            raise ParseError(message, path=info.path, line=line, field=None, hint=_HINT)
        con.execute(
            f"CREATE OR REPLACE TEMP TABLE {STAGE_TABLE} AS {typed_sql(RECORDS_TABLE, True)}"
        )
        con.execute(f"CREATE OR REPLACE TEMP VIEW {STAGED_VIEW} AS SELECT * FROM {STAGE_TABLE}")
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
    problems += duplicate_problems(con, info.path, lenient=lenient)
    return finish_stage(con, info, ingest_id, problems, shape_problems, columns)


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
    con.execute(f"CREATE OR REPLACE TEMP TABLE {STAGE_TABLE} AS {typed_sql(source_sql, False)}")
    records, first_row_id = con.execute(
        f"SELECT count(*), coalesce(min(rowid), 0) FROM {STAGE_TABLE}"
    ).fetchall()[0]
    if records != info.num_lines - header_lines:
        return False
    # Row ids are consecutive from a base that differs inside a transaction.
    con.execute(
        f"""CREATE OR REPLACE TEMP VIEW {STAGED_VIEW} AS
            SELECT rowid - {literal(first_row_id)} + {literal(header_lines + 1)} AS line, *
            FROM {STAGE_TABLE}"""
    )
    return file_order_kept(con, info, f"SELECT line, job_id_raw FROM {STAGED_VIEW}", id_index)


def _stage_lines(
    con: duckdb.DuckDBPyConnection,
    path: Path,
    names: Sequence[str],
    columns: dict[str, int],
    header_lines: int,
) -> list[tuple[int, str, str]]:
    """Reassemble records that span lines into ``RECORDS_TABLE``; returns (line, message, raw) for
    records that cannot be.

    DuckDB reads the lines and splits the whole ones (a line with every separator, not followed by
    a line without any); only the other lines, typically a few multi-line ``SubmitLine`` records,
    go through Python, streamed, so memory stays bounded on large files.
    """
    n_sep = len(names) - 1
    free = next((columns[k] for k in FREE_TEXT if k in columns), None)
    con.execute(
        f"""
        CREATE OR REPLACE TEMP TABLE {LINES_TABLE} AS
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
        f"""CREATE OR REPLACE TEMP TABLE {RECORDS_TABLE} AS
            SELECT line, {split_sql}, text AS raw
            FROM (SELECT line, text, string_split(text, '|') AS parts FROM {LINES_TABLE}
                  WHERE whole)"""
    )
    built = reassemble(
        con.execute(f"SELECT line, text, seps FROM {LINES_TABLE} WHERE NOT whole ORDER BY line"),
        n_sep,
        free,
    )
    if built.batches:
        con.register(RECORDS_ARROW, pa.Table.from_batches(built.batches))
        con.execute(f"INSERT INTO {RECORDS_TABLE} SELECT * FROM {RECORDS_ARROW}")
        con.unregister(RECORDS_ARROW)
    return built.problems


def row_problems(
    con: duckdb.DuckDBPyConnection,
    path: Path,
    names: Sequence[str],
    columns: dict[str, int],
    *,
    fast: bool,
    limit: int | None,
) -> list[Problem]:
    """The staged rows with problems, as messages naming the field and the raw value."""
    limit_sql = "" if limit is None else f" LIMIT {literal(limit)}"
    rows = con.execute(
        f"SELECT line, problems FROM {STAGED_VIEW} WHERE problems <> '' ORDER BY line{limit_sql}"
    ).fetchall()
    if not rows:
        return []
    lines = sorted({int(r[0]) for r in rows})
    if fast:
        raw = {n: (text, text.split("|")) for n, text in _read_lines(path, set(lines)).items()}
    else:
        fields_sql = ", ".join(identifier(f"f{i}") for i in range(len(names)))
        raw = {
            int(r[0]): (r[1], list(r[2:]))
            for r in con.execute(
                f"SELECT line, raw, {fields_sql} FROM {RECORDS_TABLE} "
                "WHERE line IN (SELECT unnest(?))",
                [lines],
            ).fetchall()
        }
    problems: list[Problem] = []
    for line, codes in rows:
        record, values = raw.get(int(line), ("", []))
        for code in codes.split(","):
            key, message = ROW_PROBLEMS[code]
            index = columns.get(key)
            value = (values[index] or "") if index is not None and index < len(values) else ""
            field = names[index] if index is not None else _FIELD_LABELS.get(key, key)
            problems.append(
                Problem(
                    line=int(line),
                    field=field,
                    message=message.format(value=value),
                    raw=record,
                )
            )
    return problems


# How a problem's field is named when the file lacks the column (the check is about its absence).
_FIELD_LABELS = {"alloctres": "AllocTRES"}


def _read_lines(path: Path, wanted: set[int]) -> dict[int, str]:
    """The text of some lines of a file (1-based), for error messages."""
    found: dict[int, str] = {}
    last = max(wanted)
    with path.open(encoding="utf-8", newline="") as handle:
        for number, text in enumerate(handle, start=1):
            if number in wanted:
                found[number] = text.rstrip("\r\n")
            if number >= last:
                break
    return found


def finish_stage(
    con: duckdb.DuckDBPyConnection,
    info: FileInfo,
    ingest_id: int,
    problems: list[Problem],
    shape_problems: list[tuple[int, str, str]],
    columns: dict[str, int],
) -> SacctStage:
    """Store the rejects, count what was read, and put the runs to store in ``JOBS_VIEW``."""
    all_problems = problems + [
        Problem(line=line, field="(record)", message=msg, raw=raw)
        for line, msg, raw in shape_problems
    ]
    store_rejects(con, ingest_id, info.path, all_problems)
    keep_sql = "NOT is_step AND problems = ''"
    table_sql = STAGE_TABLE
    conflicting = sorted({p.line for p in problems if p.field == "JobIDRaw" and p.raw is None})
    if conflicting:  # lenient: runs whose records disagree are rejected, every record of them
        keep_sql += f" AND line NOT IN ({', '.join(literal(n) for n in conflicting)})"
        table_sql = STAGED_VIEW  # the fast path's table has no line column, its view does
    summary = con.execute(
        f"""SELECT count(*), count(*) FILTER (WHERE is_step AND problems = ''),
                   count(*) FILTER (WHERE {keep_sql}),
                   count(DISTINCT hash({_RUN_KEY})) FILTER (WHERE {keep_sql}),
                   max({LATEST_TIME_SQL}) FILTER (WHERE {keep_sql})
            FROM {table_sql}"""
    ).fetchall()[0]
    records, steps, valid_runs, distinct_hashes, as_of = summary
    duplicates = 0
    if valid_runs != distinct_hashes:
        duplicates = valid_runs - _distinct_runs(con, table_sql, keep_sql)
    _create_jobs_view(con, keep_sql, repeated=duplicates > 0)
    return SacctStage(
        rows_read=records + len(shape_problems),
        rows_rejected=len({p.line for p in all_problems}),
        rows_skipped=steps + duplicates,
        as_of_s=None if as_of is None else int(as_of),
        gpu_count_missing="alloctres" not in columns and "allocgres" not in columns,
    )


# A job run's natural key as the stage has it (a run with no submit time is known by its start).
_RUN_KEY = "cluster, job_id_raw, coalesce(submit_s, start_s, -1)"


def _distinct_runs(con: duckdb.DuckDBPyConnection, table_sql: str, keep_sql: str) -> int:
    """The exact number of distinct runs kept. ``finish_stage`` counts distinct hashes first (an
    integer aggregate, 4x cheaper than on the key's strings); only when they say there are
    duplicates (or two keys share a hash) are the runs counted exactly."""
    return int(
        con.execute(
            f"SELECT count(DISTINCT ({_RUN_KEY})) FROM {table_sql} WHERE {keep_sql}"
        ).fetchall()[0][0]
    )


def _create_jobs_view(con: duckdb.DuckDBPyConnection, keep_sql: str, *, repeated: bool) -> None:
    """``JOBS_VIEW``: the kept rows, each run once (its latest line) when some run repeats."""
    if not repeated:
        con.execute(
            f"CREATE OR REPLACE TEMP VIEW {JOBS_VIEW} AS SELECT * FROM {STAGED_VIEW} WHERE {keep_sql}"
        )
        return
    # A run printed twice with the same values (a concatenated capture) is stored once;
    # records that disagree were refused or rejected before (duplicate_problems).
    con.execute(
        f"""CREATE OR REPLACE TEMP VIEW {JOBS_VIEW} AS
            SELECT * EXCLUDE (rn) FROM (
                SELECT *, row_number() OVER (PARTITION BY {_RUN_KEY} ORDER BY line DESC) AS rn
                FROM {STAGED_VIEW} WHERE {keep_sql})
            WHERE rn = 1"""
    )


def duplicate_problems(
    con: duckdb.DuckDBPyConnection, path: Path, *, lenient: bool
) -> list[Problem]:
    """Records of one run that disagree: an error (strict), or all of them rejected (lenient)."""
    rows = f"SELECT * FROM {STAGED_VIEW} WHERE NOT is_step AND problems = ''"
    pairs = checks.conflicting_duplicates(con, rows, limit=1)
    if not pairs:
        return []
    if not lenient:
        raise checks.duplicate_error(path, pairs)
    lines = checks.conflicting_lines(con, rows)
    return [
        Problem(
            line=line,
            field="JobIDRaw",
            message="same JobIDRaw and Submit as another line, with different values",
            raw=None,
        )
        for line in lines
    ]
