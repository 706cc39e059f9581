"""Loading utilization samples: one row per GPU and sample time, metrics side by side.

A sample at ``t_s`` covers ``[t_s - step_s, t_s)``: exporters average their counters over the
interval that ends when they are scraped. Loading replaces rows of the same ``node, gpu, t_s``
(a second capture of the same hours), so re-reading overlapping files never counts a GPU twice.
"""

from __future__ import annotations

import duckdb

from gpuyield.errors import InputError
from gpuyield.ingest.utilization.promjson import Role
from gpuyield.sqltext import literal


def has_rows(con: duckdb.DuckDBPyConnection) -> bool:
    """Whether the store holds samples already (then a load must replace what it overlaps)."""
    rows = con.execute("SELECT count(*) FROM (SELECT 1 FROM gpu_samples LIMIT 1)").fetchall()
    return bool(rows[0][0])


def load(
    con: duckdb.DuckDBPyConnection,
    points_sql: str,
    *,
    step_s: int,
    cluster: str | None,
    step_column: bool = False,
    pivot: bool = True,
) -> None:
    """Put the points (``RAW_SCHEMA`` + ``ingest_id``) into ``gpu_samples``: one row per GPU and
    time, its metrics side by side.

    ``pivot``: group the points by GPU and time (several metrics, or several series of one GPU);
    a GPU sample whose metrics came from several sources keeps the first ingest's id. Without it
    every point is a sample (the caller knows the points hold one metric, one series per GPU):
    the pivot, a hash aggregate over every point, costs several times the read. Straight into the
    store, not through a staging table: at 144M samples a second copy costs more than the pivot.
    Callers load sources that share no node separately (the pivot's memory grows with what it
    groups), then call ``finish``. ``step_column``: the points carry their own ``step_s`` (a
    job's average covers its run).
    """
    # Row order means nothing here; keeping it makes DuckDB buffer more of the insert.
    con.execute("SET preserve_insertion_order = false")
    con.execute(
        _pivot_sql(points_sql, step_s, cluster, step_column)
        if pivot
        else _direct_sql(points_sql, step_s, cluster)
    )


def _pivot_sql(points_sql: str, step_s: int, cluster: str | None, step_column: bool) -> str:
    step_sql = "max(p.step_s)" if step_column else f"{literal(step_s)}::BIGINT"
    return f"""INSERT INTO gpu_samples
        SELECT {_cluster_sql(cluster)} AS cluster, node, gpu, max(job_id) AS job_id, t_s,
               {step_sql} AS step_s,
               max(value) FILTER (WHERE role = {literal(Role.ACTIVE.value)}) AS active,
               max(value) FILTER (WHERE role = {literal(Role.TENSOR.value)}) AS tensor_active,
               max(value) FILTER (WHERE role = {literal(Role.SM.value)}) AS sm_active,
               min(ingest_id) AS ingest_id
        FROM ({points_sql}) p
        GROUP BY node, gpu, t_s"""


def _direct_sql(points_sql: str, step_s: int, cluster: str | None) -> str:
    def of_sql(role: Role) -> str:
        return f"CASE WHEN role = {literal(role.value)} THEN value END"

    return f"""INSERT INTO gpu_samples
        SELECT {_cluster_sql(cluster)}, node, gpu, job_id, t_s, {literal(step_s)}::BIGINT,
               {of_sql(Role.ACTIVE)}, {of_sql(Role.TENSOR)}, {of_sql(Role.SM)}, ingest_id
        FROM ({points_sql}) p"""


def finish(
    con: duckdb.DuckDBPyConnection, ingest_ids: list[int], *, replace: bool
) -> dict[int, int]:
    """Check the new rows, drop older rows of the same GPU and time (``replace``), and return
    the samples stored per ingest."""
    new_sql = ", ".join(literal(i) for i in ingest_ids)
    _check_activity(con, new_sql)
    if replace:
        con.execute(
            f"""DELETE FROM gpu_samples o WHERE o.ingest_id NOT IN ({new_sql}) AND EXISTS (
                SELECT 1 FROM gpu_samples n WHERE n.ingest_id IN ({new_sql})
                AND n.node = o.node AND n.gpu = o.gpu AND n.t_s = o.t_s)"""
        )
    rows = con.execute(
        f"SELECT ingest_id, count(*) FROM gpu_samples WHERE ingest_id IN ({new_sql}) GROUP BY 1"
    ).fetchall()
    return {int(i): int(n) for i, n in rows}


def _check_activity(con: duckdb.DuckDBPyConnection, new_sql: str) -> None:
    """Fractions must be fractions: a percentage read as a ratio would make every GPU busy."""
    bad = con.execute(
        f"""SELECT node, gpu, t_s,
                   CASE WHEN active > 1.0 + 1e-9 THEN 'graphics-engine activity'
                        ELSE 'tensor-pipe activity' END,
                   CASE WHEN active > 1.0 + 1e-9 THEN active ELSE tensor_active END
            FROM gpu_samples WHERE ingest_id IN ({new_sql})
              AND (active > 1.0 + 1e-9 OR tensor_active > 1.0 + 1e-9) LIMIT 1"""
    ).fetchall()
    if bad:
        node, gpu, t_s, what, value = bad[0]
        raise InputError(
            f"node {node} GPU {gpu} at {t_s}: {what} {value:g} is above 1 (100%)",
            hint="a ratio metric given as a percentage? set its scale (0.01 for percentages)",
        )


def _cluster_sql(value: str | None) -> str:
    return "NULL::VARCHAR" if value is None else literal(value)
