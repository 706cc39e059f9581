"""SQL building blocks shared by the ingest modules: reading lines, parsing times, reporting problems."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import duckdb

from gpuyield.errors import InputError, ParseError

# Slurm prints ISO local time; SLURM_TIME_FORMAT=standard is the same, some tools use a space.
_TIME_FORMATS = "['%Y-%m-%dT%H:%M:%S', '%Y-%m-%d %H:%M:%S']"
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


def sql_quote(value: str) -> str:
    """A SQL string literal."""
    return "'" + value.replace("'", "''") + "'"


def epoch_sql(expr: str, tz: str) -> str:
    """SQL turning a Slurm time string into epoch seconds (NULL for Unknown/None/unparseable)."""
    parsed = f"try_strptime({expr}, {_TIME_FORMATS})"
    if tz != "UTC":
        parsed = f"timezone({sql_quote(tz)}, {parsed})"
    return f"CAST(epoch({parsed}) AS BIGINT)"


def bad_time_sql(raw: str, parsed: str) -> str:
    """SQL condition: the raw value is neither a time nor one of Slurm's no-time words."""
    no_time = ", ".join(sql_quote(v) for v in NO_TIME_VALUES)
    return f"({raw} IS NOT NULL AND {raw} NOT IN ({no_time}) AND {parsed} IS NULL)"


def load_lines(con: duckdb.DuckDBPyConnection, path: Path, table: str) -> None:
    """A view ``table(line, text)`` over ``path``: one row per physical line, 1-based line numbers.

    DuckDB reads the file (fast, parallel); the delimiter is NUL, which ``scan_file`` has already
    proven absent, so every line arrives whole. Blank lines arrive as NULL. A view, not a table:
    each use streams the file again instead of holding all of it in memory.
    """
    con.execute(
        f"""
        CREATE OR REPLACE TEMP VIEW {table} AS
        SELECT row_number() OVER () AS line, regexp_replace(column0, '\\r$', '') AS text
        FROM read_csv({sql_quote(str(path))}, columns={{'column0': 'VARCHAR'}}, delim='\\0',
                      quote='', escape='', header=false, auto_detect=false, strict_mode=false)
        """
    )


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


def collect_problems(
    con: duckdb.DuckDBPyConnection,
    checks: list[str],
    *,
    limit: int | None,
    raw_from: str | None = None,
) -> list[Problem]:
    """Run validation SELECTs (each yields line, field, message, raw) and return the first problems.

    ``raw_from`` names a table with ``line, raw``: the raw records of problem lines are looked up there
    afterwards, so the checks need not carry every record's text.
    """
    if not checks:
        return []
    union = " UNION ALL ".join(
        f"SELECT * FROM ({c}) AS c{i}(line, field, message, raw)" for i, c in enumerate(checks)
    )
    limit_sql = "" if limit is None else f" LIMIT {int(limit)}"
    rows = con.execute(
        f"SELECT line, field, message, raw FROM ({union}) ORDER BY line, field{limit_sql}"
    ).fetchall()
    raw: dict[int, str] = {}
    if raw_from is not None and rows:
        lines = sorted({int(r[0]) for r in rows})
        raw = dict(
            con.execute(
                f"SELECT line, raw FROM {raw_from} WHERE line IN (SELECT unnest(?))", [lines]
            ).fetchall()
        )
    return [
        Problem(line=int(r[0]), field=r[1], message=r[2], raw=r[3] or raw.get(int(r[0])))
        for r in rows
    ]


def raise_first(problem: Problem, path: Path, hint: str) -> None:
    """Strict mode: fail on the first problem with file, line, field and a hint."""
    raise ParseError(problem.message, path=path, line=problem.line, field=problem.field, hint=hint)


def store_rejects(
    con: duckdb.DuckDBPyConnection, ingest_id: int, path: Path, problems: list[Problem]
) -> None:
    """Lenient mode: keep every rejected row with why, so the report can count and show them."""
    con.executemany(
        "INSERT INTO rejects VALUES (?, ?, ?, ?, ?, ?)",
        [(ingest_id, str(path), p.line, p.field, p.message, p.raw) for p in problems],
    )
