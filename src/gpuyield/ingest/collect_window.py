"""The period a collection asks Slurm for, from the cluster's coverage in the store.

The watermark is the end of the cluster's coverage; a collection queries ``[watermark - overlap,
until)``, never before the first collection's start (that time was never asked for), unless an
earlier ``--since`` backfills. A store that already covers ``until`` needs no query at all.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import duckdb

from gpuyield import store
from gpuyield.errors import InputError
from gpuyield.times import iso_utc


@dataclass(frozen=True, kw_only=True, slots=True)
class Watermark:
    """The outer bounds of a cluster's coverage in the store (epoch seconds, UTC)."""

    first_start_s: int
    """First covered second of the earliest collection."""
    last_end_s: int
    """First second after the latest collection: the next one continues from here."""


def watermark(con: duckdb.DuckDBPyConnection, cluster: str) -> Watermark | None:
    """The cluster's coverage bounds, or None when it has none."""
    try:
        row = con.execute(
            "SELECT min(start_s), max(end_s) FROM coverage WHERE cluster = ?", [cluster]
        ).fetchall()[0]
    except duckdb.CatalogException:
        return None
    if row[0] is None:
        return None
    return Watermark(first_start_s=int(row[0]), last_end_s=int(row[1]))


@dataclass(frozen=True, kw_only=True, slots=True)
class Span:
    """A contiguous stretch of coverage (epoch seconds, UTC)."""

    start_s: int
    """Its first covered second."""
    end_s: int
    """The first second after it."""


def covered_span(con: duckdb.DuckDBPyConnection, cluster: str, end_s: int) -> Span:
    """The contiguous coverage that holds ``end_s`` (``end_s`` alone when none does)."""
    spans = con.execute(
        "SELECT start_s, end_s FROM coverage WHERE cluster = ? ORDER BY start_s", [cluster]
    ).fetchall()
    merged: list[list[int]] = []
    for span_start, span_end in spans:
        if merged and span_start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], int(span_end))
        else:
            merged.append([int(span_start), int(span_end)])
    found = next(((a, b) for a, b in merged if a <= end_s <= b), (end_s, end_s))
    return Span(start_s=found[0], end_s=found[1])


def query_start(
    db: str | Path, cluster: str, *, since_s: int | None, overlap_s: int, end_s: int
) -> int | None:
    """Start of the query window; None when the store already covers up to ``end_s``."""
    known = None
    if Path(db).exists():
        con = store.connect(db, read_only=True)
        try:
            known = watermark(con, cluster)
        finally:
            con.close()
    if known is None:
        if since_s is None:
            raise InputError(
                f"the store has no accounting of cluster {cluster!r} yet: where should the "
                "first collection start?",
                hint="give collect.since (e.g. collect.since 2026-12-01); later runs continue from where "
                "the last one ended",
            )
        start_s = since_s
    else:
        # Not before the first collection's start: that time was never asked for.
        start_s = max(known.first_start_s, known.last_end_s - overlap_s)
        if since_s is not None and since_s < known.first_start_s:
            start_s = since_s  # a backfill: everything from --since again
        elif end_s <= known.last_end_s:
            return None  # already covered up to --until: nothing to add
    if start_s >= end_s:
        raise InputError(
            f"nothing to collect: the window starts at {iso_utc(start_s)}, not before "
            f"collect.until {iso_utc(end_s)}",
            hint="give a later collect.until (default: now)",
        )
    return start_s
