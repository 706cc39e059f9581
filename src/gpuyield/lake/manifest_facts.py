"""What a writer's manifest says about the store besides its files: its ingests and coverage."""

from __future__ import annotations

import duckdb

from gpuyield.lake.layout import CoveredWindow, IngestEntry


def ingest_entries(con: duckdb.DuckDBPyConnection) -> tuple[IngestEntry, ...]:
    """Every ingest of the store: which file (by path and hash), captured up to when."""
    rows = con.execute(
        """SELECT ingest_id, source, path, sha256, as_of_s,
                  strftime(ingested_at, '%Y-%m-%dT%H:%M:%S.%fZ')
           FROM ingests ORDER BY ingest_id"""
    ).fetchall()
    return tuple(
        IngestEntry(
            ingest_id=int(i),
            source=s,
            path=p,
            sha256=h,
            as_of_s=None if a is None else int(a),
            ingested_at=str(t),
        )
        for i, s, p, h, a, t in rows
    )


def covered_windows(con: duckdb.DuckDBPyConnection) -> tuple[CoveredWindow, ...]:
    """Each cluster's covered time, overlapping and touching ranges merged."""
    rows = con.execute(
        "SELECT cluster, start_s, end_s FROM coverage ORDER BY cluster, start_s, end_s"
    ).fetchall()
    merged: list[CoveredWindow] = []
    for cluster, start_s, end_s in rows:
        last = merged[-1] if merged else None
        if last is not None and last.cluster == cluster and start_s <= last.end_s:
            merged[-1] = CoveredWindow(
                cluster=cluster, start_s=last.start_s, end_s=max(last.end_s, int(end_s))
            )
        else:
            merged.append(CoveredWindow(cluster=cluster, start_s=int(start_s), end_s=int(end_s)))
    return tuple(merged)
