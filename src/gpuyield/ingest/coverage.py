"""Which time an sacct ingest covers, recorded in the store's ``coverage`` table.

sacct ``-S START -E END`` lists every job that was pending, running or ended inside the window, so
the store then knows the whole cluster's accounting over ``[START, END)``: that is what ``--since``
and ``--until`` (or a collect's query window) declare. A file ingested without ``--since`` is taken to
cover from its earliest job start, the most it can prove, and the ingest says so: idle time before it
was not captured and must not be counted as idle.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import duckdb

from gpuyield import store
from gpuyield.ingest import sacct as sacct_mod
from gpuyield.times import iso_utc

#: The fields errors about the capture window name (the CLI maps them to --since and --until).
SINCE_FIELD = "ingest.since"
UNTIL_FIELD = "ingest.until"


class _Result(Protocol):
    @property
    def source(self) -> str: ...
    @property
    def ingest_id(self) -> int: ...


def coverage_notes(
    con: duckdb.DuckDBPyConnection,
    results: Sequence[_Result],
    *,
    since_s: int | None,
    until_s: int | None,
    as_of_s: int | None,
    cluster: str | None,
    path: str,
) -> list[str]:
    """Record the sacct file's coverage; the notes for the user about it and about its rows
    outside the window."""
    notes = [
        record_sacct_coverage(con, results, since_s=since_s, as_of_s=as_of_s, cluster=cluster),
        outside_window_note(con, results, since_s=since_s, until_s=until_s, path=path),
    ]
    return [note for note in notes if note]


def record_sacct_coverage(
    con: duckdb.DuckDBPyConnection,
    results: Sequence[_Result],
    *,
    since_s: int | None,
    as_of_s: int | None,
    cluster: str | None,
) -> str | None:
    """Record the coverage of the ingest's sacct file (if any); a note for the user, or None."""
    sacct = next((r for r in results if r.source == sacct_mod.SOURCE), None)
    if sacct is None or as_of_s is None:
        return None
    firsts = _first_starts(con, sacct.ingest_id, cluster)
    if since_s is not None:
        clusters = sorted(firsts) or [cluster or _only_cluster(con)]
        for name in clusters:
            store.record_coverage(
                con,
                cluster=name,
                start_s=since_s,
                end_s=as_of_s,
                source="window",
                ingest_id=sacct.ingest_id,
            )
        return None
    for name, first_s in sorted(firsts.items()):
        store.record_coverage(
            con,
            cluster=name,
            start_s=first_s,
            end_s=as_of_s,
            source="earliest-job",
            ingest_id=sacct.ingest_id,
        )
    if not firsts:
        return "no --since and no job started in the sacct file: no time is recorded as captured"
    starts = ", ".join(f"{n} from {iso_utc(s)}" for n, s in sorted(firsts.items()))
    return (
        f"no --since: the sacct capture is taken to cover {starts} (its earliest job start); "
        "pass --since with the -S you gave sacct to count idle time before it"
    )


def _first_starts(
    con: duckdb.DuckDBPyConnection, ingest_id: int, cluster: str | None
) -> dict[str, int]:
    """Earliest job start per cluster among the jobs of the sacct ingest (or of the store, when
    the file was unchanged and its rows kept their earlier ingest)."""
    rows = con.execute(
        "SELECT cluster, min(start_s) FROM jobs WHERE ingest_id = ? AND start_s IS NOT NULL "
        "GROUP BY cluster",
        [ingest_id],
    ).fetchall()
    found = {str(r[0]): int(r[1]) for r in rows}
    if cluster is not None:
        found = {k: v for k, v in found.items() if k == cluster} or found
    return found


def _only_cluster(con: duckdb.DuckDBPyConnection) -> str:
    """The store's one cluster (a window without jobs still covers it), else ``default``."""
    rows = con.execute(
        "SELECT cluster FROM jobs UNION SELECT cluster FROM cluster_events"
    ).fetchall()
    names = {str(r[0]) for r in rows} - {"default"}
    return names.pop() if len(names) == 1 else "default"


def outside_window_note(
    con: duckdb.DuckDBPyConnection,
    results: Sequence[_Result],
    *,
    since_s: int | None,
    until_s: int | None,
    path: str,
) -> str | None:
    """Say how many of the sacct file's job rows lie wholly outside ``[since_s, until_s)``.

    They are stored (a later, wider window counts them), but none of their GPU time is in this
    window: a row that started at or after ``--until`` or ended by ``--since`` says the flags
    and the capture disagree, and must not vanish without a word.
    """
    sacct = next((r for r in results if r.source == sacct_mod.SOURCE), None)
    if sacct is None or (since_s is None and until_s is None):
        return None
    after, first_after, before, first_before = con.execute(
        """SELECT count(*) FILTER (WHERE coalesce(start_s, nullif(submit_s, -1)) >= $until),
                  min(line) FILTER (WHERE coalesce(start_s, nullif(submit_s, -1)) >= $until),
                  count(*) FILTER (WHERE end_s <= $since),
                  min(line) FILTER (WHERE end_s <= $since)
           FROM jobs WHERE ingest_id = $ingest""",
        {"until": until_s, "since": since_s, "ingest": sacct.ingest_id},
    ).fetchall()[0]
    parts = []
    if after:
        parts.append(
            f"{after} start at or after --until {iso_utc(until_s or 0)} (first: line {first_after})"
        )
    if before:
        parts.append(
            f"{before} ended by --since {iso_utc(since_s or 0)} (first: line {first_before})"
        )
    if not parts:
        return None
    return (
        f"{path}: {after + before} job rows lie wholly outside the window ({'; '.join(parts)}): "
        "stored, but none of their GPU time is counted in it; give --since/--until the -S/-E "
        "you gave sacct"
    )
