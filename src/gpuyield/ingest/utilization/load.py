"""Loading staged samples into the store beside the ones already there.

The staged series are described and checked (``stage``), written as series (``series``: as they
came where they can be, else pivoted with the stored samples they overlap, a later capture
replacing the earlier), and what changed is attributed again (``gpuyield.attribution.sync``), as
regions of node and time.
"""

from __future__ import annotations

import duckdb

from gpuyield import attribution
from gpuyield.ingest.utilization import series, stage


def has_series(con: duckdb.DuckDBPyConnection) -> bool:
    """Whether the store holds samples already (then new ones must fit in beside them)."""
    rows = con.execute("SELECT count(*) FROM (SELECT 1 FROM gpu_series LIMIT 1)").fetchall()
    return bool(rows[0][0])


def load(
    con: duckdb.DuckDBPyConnection, declared: dict[int, int | None], *, cluster: str | None
) -> dict[int, int]:
    """Check and store the staged series (``gy_series``) of the ingests ``declared`` names
    (with the step each was declared at, or None), attribute what changed, and return the
    samples stored per ingest."""
    con.execute(
        """CREATE OR REPLACE TEMP TABLE gy_new_ids AS
           SELECT unnest($ids) AS ingest_id, unnest($steps)::BIGINT AS declared_step_s""",
        {"ids": list(declared), "steps": list(declared.values())},
    )
    stage.describe(con)
    stage.check(con, cluster=cluster)
    stored = has_series(con)
    series.plan(con, stored=stored)
    series.insert_straight(con, cluster=cluster)
    series.insert_pivoted(con, cluster=cluster)
    series.spans(con)
    if stored:
        series.relink_successors(con)
    margin_s = _longest_step_s(con) if stored else 0
    attribution.sync(con, regions_sql=series.regions_sql(margin_s))
    return _stored_samples(con)


def _stored_samples(con: duckdb.DuckDBPyConnection) -> dict[int, int]:
    """Samples stored per ingest: the measured points of the series that went in as they came,
    and the measured samples of the pivoted ones (counted once, for the first ingest)."""
    rows = con.execute(
        """SELECT ingest_id, sum(n) FROM (
               SELECT i.ingest_id, i.measured AS n FROM gy_info i
               JOIN gy_plan p ON p.node = i.node AND p.gpu = i.gpu WHERE p.straight
               UNION ALL
               SELECT ingest_id, 1 FROM gy_points
               WHERE ingest_id IN (SELECT ingest_id FROM gy_new_ids)
                 AND (active IS NOT NULL OR tensor IS NOT NULL OR sm IS NOT NULL))
           GROUP BY ingest_id"""
    ).fetchall()
    return {int(i): int(n) for i, n in rows}


def _longest_step_s(con: duckdb.DuckDBPyConnection) -> int:
    rows = con.execute(
        "SELECT coalesce(max(greatest(step_s, first_step_s)), 0) FROM gpu_series"
    ).fetchall()
    return int(rows[0][0])
