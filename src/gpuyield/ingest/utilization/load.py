"""Loading staged samples into the store beside the ones already there.

A later capture of the same GPU and time replaces the earlier (re-reading overlapping files
never counts a GPU twice). Where the new samples of a GPU come within a step of older ones (the
next hour's capture, or the same hours at another step), the intervals of both are computed
again in time order, so a GPU's samples still never overlap. What changed is then attributed
again (``gpuyield.attribution.sync``), as regions of node and time.
"""

from __future__ import annotations

import duckdb

from gpuyield import attribution
from gpuyield.ingest.utilization import stage


def has_rows(con: duckdb.DuckDBPyConnection) -> bool:
    """Whether the store holds samples already (then a load must replace what it overlaps)."""
    rows = con.execute("SELECT count(*) FROM (SELECT 1 FROM gpu_samples LIMIT 1)").fetchall()
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
    replace = has_rows(con)
    stage.insert_rows(con, cluster=cluster)
    margin_s = 0
    if replace:
        margin_s = _longest_step_s(con)
        _replace_older(con)
        _respan_neighbours(con, margin_s)
    attribution.sync(
        con,
        regions_sql=f"""SELECT node, min(lo) - {int(margin_s)}, max(hi) + {int(margin_s)}
                        FROM gy_gpu GROUP BY node""",
    )
    rows = con.execute(
        """SELECT ingest_id, count(*) FROM gpu_samples
           WHERE ingest_id IN (SELECT ingest_id FROM gy_new_ids) GROUP BY 1"""
    ).fetchall()
    return {int(i): int(n) for i, n in rows}


def _longest_step_s(con: duckdb.DuckDBPyConnection) -> int:
    rows = con.execute("SELECT coalesce(max(step_s), 0) FROM gpu_samples").fetchall()
    return int(rows[0][0])


_OLD = "o.ingest_id NOT IN (SELECT ingest_id FROM gy_new_ids)"
_NEW = "n.ingest_id IN (SELECT ingest_id FROM gy_new_ids)"


def _replace_older(con: duckdb.DuckDBPyConnection) -> None:
    """Older rows of a GPU and time the new samples hold go (bounded to the new times first:
    the store may hold months)."""
    con.execute(
        f"""DELETE FROM gpu_samples o
            WHERE {_OLD}
              AND o.t_s BETWEEN (SELECT min(lo) FROM gy_gpu) AND (SELECT max(hi) FROM gy_gpu)
              AND EXISTS (SELECT 1 FROM gpu_samples n WHERE {_NEW}
                          AND n.node = o.node AND n.gpu = o.gpu AND n.t_s = o.t_s)"""
    )


def _respan_neighbours(con: duckdb.DuckDBPyConnection, margin_s: int) -> None:
    """Where older samples of a GPU lie within a step of the new ones, every sample of that GPU
    there gets its interval again: from the sample before it, at most its step."""
    con.execute(
        f"""CREATE OR REPLACE TEMP TABLE gy_near AS
            SELECT g.node, g.gpu, g.lo, g.hi FROM gy_gpu g
            WHERE EXISTS (SELECT 1 FROM gpu_samples o WHERE {_OLD}
                          AND o.node = g.node AND o.gpu = g.gpu
                          AND o.t_s BETWEEN g.lo - $m AND g.hi + $m)""",
        {"m": margin_s},
    )
    con.execute(
        """UPDATE gpu_samples SET start_s = f.start_s
           FROM (SELECT s.rowid AS rid, s.t_s, n.lo,
                        greatest(s.t_s - s.step_s, lag(s.t_s) OVER (
                            PARTITION BY s.node, s.gpu ORDER BY s.t_s)) AS start_s
                 FROM gpu_samples s JOIN gy_near n ON n.node = s.node AND n.gpu = s.gpu
                 WHERE s.t_s BETWEEN n.lo - 2 * $m AND n.hi + $m) f
           WHERE gpu_samples.rowid = f.rid AND f.t_s >= f.lo - $m
             AND gpu_samples.start_s <> f.start_s""",
        {"m": margin_s},
    )
