"""SQL building blocks shared by the ingest modules: parsing times, reporting problems, replacing rows."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import duckdb
import pyarrow as pa

from gpuyield.errors import InputError
from gpuyield.progress import NoProgress, Progress
from gpuyield.sqltext import identifier, literal

# Slurm prints ISO local time; SLURM_TIME_FORMAT=standard is the same, some tools use a space.
_TIME_FORMATS = "['%Y-%m-%dT%H:%M:%S', '%Y-%m-%d %H:%M:%S']"
# What a time that cannot be read is told: the formats read, and the likely cause.
TIME_HINT = (
    "times must be ISO (2026-01-31T12:00:00) or epoch seconds; was SLURM_TIME_FORMAT set to "
    "another format? unset it (or set it to standard or %s) and capture again"
)
# Local times without an offset repeat an hour when clocks go back: the end of a job that ran
# across it can read earlier than its start. Epoch seconds or UTC avoid that.
LOCAL_TIME_HINT = (
    "local times repeat an hour when clocks go back (daylight saving time ends); capture with "
    "SLURM_TIME_FORMAT=%s or TZ=UTC (then --tz UTC), or pass --lenient to count such rows"
)
# Values Slurm prints where a time does not exist (never started, still running, open event).
NO_TIME_VALUES = ("Unknown", "None", "")


def check_timezone(tz: str) -> str:
    """Validate an IANA zone name early, with a hint, instead of failing deep inside SQL."""
    try:
        ZoneInfo(tz)
    except (ZoneInfoNotFoundError, ValueError):
        raise InputError(
            f"unknown time zone {tz!r}", hint="use an IANA name such as UTC or Europe/Berlin"
        ) from None
    return tz


def epoch_sql(expr_sql: str, tz: str) -> str:
    """SQL turning a Slurm time string into epoch seconds (NULL for Unknown/None/unparseable).

    A local time that occurs twice (the hour repeated when daylight saving time ends) is read as
    the later one, as DuckDB's ``timezone()`` does; ``events.parse_time`` reads it the same way.
    """
    parsed_sql = f"try_strptime({expr_sql}, {_TIME_FORMATS})"
    if tz != "UTC":
        parsed_sql = f"timezone({literal(tz)}, {parsed_sql})"
    # SLURM_TIME_FORMAT=%s prints seconds since the epoch: absolute already, no zone applies.
    digits_sql = (
        f"CASE WHEN regexp_full_match({expr_sql}, '[0-9]{{1,12}}') "
        f"THEN CAST({expr_sql} AS BIGINT) END"
    )
    return f"coalesce(CAST(epoch({parsed_sql}) AS BIGINT), {digits_sql})"


def bad_time_sql(raw_sql: str, parsed_sql: str) -> str:
    """SQL condition: the raw value is neither a time nor one of Slurm's no-time words."""
    no_time = ", ".join(literal(v) for v in NO_TIME_VALUES)
    return f"({raw_sql} IS NOT NULL AND {raw_sql} NOT IN ({no_time}) AND {parsed_sql} IS NULL)"


@dataclass(frozen=True, kw_only=True, slots=True)
class Problem:
    """One malformed value found by a validation query."""

    line: int
    """1-based line in the input file."""
    field: str
    """The field (column name as the file spells it)."""
    message: str
    """What is wrong."""
    raw: str | None
    """The offending raw value or record."""


def store_rejects(
    con: duckdb.DuckDBPyConnection, ingest_id: int, path: Path, problems: list[Problem]
) -> None:
    """Lenient mode: keep every rejected row with why, so the report can count and show them."""
    if not problems:
        return
    # One Arrow insert: executemany goes row by row (500k rejected lines took minutes).
    rows = pa.table(
        {
            "ingest_id": pa.array([ingest_id] * len(problems), pa.int64()),
            "path": pa.array([str(path)] * len(problems), pa.string()),
            "line": pa.array([p.line for p in problems], pa.int64()),
            "field": pa.array([p.field for p in problems], pa.string()),
            "message": pa.array([p.message for p in problems], pa.string()),
            "raw": pa.array([p.raw for p in problems], pa.string()),
        }
    )
    con.register("new_rejects", rows)
    try:
        con.execute("INSERT INTO rejects SELECT * FROM new_rejects")
    finally:
        con.unregister("new_rejects")


def replace_rows(
    con: duckdb.DuckDBPyConnection,
    table: str,
    rows: pa.Table,
    *,
    key: tuple[str, ...],
    columns: tuple[str, ...],
    ingest_id: int,
) -> None:
    """Load ``rows`` into ``table``, replacing rows with the same natural ``key`` (idempotent).

    ``columns`` are the table's columns before ``ingest_id, line``, in table order.
    """
    name = f"new_{table}"
    con.register(name, rows)
    try:
        keys = ", ".join(identifier(k) for k in key)
        target, new = identifier(table), identifier(name)
        con.execute(f"DELETE FROM {target} WHERE ({keys}) IN (SELECT {keys} FROM {new})")
        selected = ", ".join(identifier(c) for c in columns)
        con.execute(
            f"INSERT INTO {target} SELECT {selected}, {literal(ingest_id)}, line FROM {new}"
        )
    finally:
        con.unregister(name)


@contextmanager
def statement_progress(
    con: duckdb.DuckDBPyConnection, progress: Progress, name: str, *, total_bytes: int
) -> Iterator[None]:
    """Show the progress of the long statement run inside, as bytes of its input file.

    DuckDB estimates how far a running query is (``query_progress``, callable from another
    thread while ``execute`` waits); a watcher thread turns that into ``progress.advance`` calls.
    """
    if isinstance(progress, NoProgress):
        yield
        return
    con.execute("SET enable_progress_bar = true")
    con.execute("SET enable_progress_bar_print = false")
    progress.phase(name, total=total_bytes)
    stop = threading.Event()
    done = [0]

    def watch() -> None:
        while not stop.wait(0.25):
            share = con.query_progress()
            now = int(total_bytes * min(max(share, 0.0), 100.0) / 100.0)
            if now > done[0]:
                progress.advance(now - done[0])
                done[0] = now

    watcher = threading.Thread(target=watch, name="gpuyield-progress", daemon=True)
    watcher.start()
    try:
        yield
    finally:
        stop.set()
        watcher.join()
    progress.advance(total_bytes - done[0])  # the statement finished: the whole file is read
