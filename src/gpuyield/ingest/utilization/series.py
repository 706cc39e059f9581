"""Staged series into ``gpu_series``, keeping a GPU's series apart in time.

``plan`` decides per GPU (``gy_plan``): ``straight`` when its new series can go in as they came
(one metric, in time order, apart from each other and from every stored series of the GPU);
``stored_prev`` is the GPU's last stored sample time before the new ones (the predecessor of its
first new sample). The other GPUs are pivoted (``insert_pivoted``): their new points and the
stored series they overlap become one sample per GPU and time (a later capture replaces the
earlier), cut again into series. Finally the stored series that follows new ones learns its new
predecessor (``relink_successors``).
"""

from __future__ import annotations

import duckdb

from gpuyield.ingest.utilization.promjson import Role
from gpuyield.sqltext import literal

_NEW = "ingest_id IN (SELECT ingest_id FROM gy_new_ids)"
# The step a staged point covers at most: its series' first point the first step, others the step.
_BOUND = "CASE WHEN t = first_t THEN first_step ELSE step END"


def plan(con: duckdb.DuckDBPyConnection, *, stored: bool) -> None:
    """``gy_plan``: ``gy_gpu`` with ``straight`` and ``stored_prev`` (``stored``: the store
    held series before this ingest)."""
    if not stored:
        con.execute(
            """CREATE OR REPLACE TEMP TABLE gy_plan AS
               SELECT *, direct AS straight, NULL::BIGINT AS stored_prev FROM gy_gpu"""
        )
        return
    con.execute(
        f"""CREATE OR REPLACE TEMP TABLE gy_plan AS
            WITH near AS (
                SELECT g.node, g.gpu,
                       bool_or(o.first_t <= g.hi AND o.last_t >= g.lo) AS clash,
                       max(o.last_t) FILTER (WHERE o.last_t < g.lo) AS stored_prev
                FROM gy_gpu g JOIN gpu_series o ON o.node = g.node AND o.gpu = g.gpu
                WHERE NOT o.{_NEW}
                GROUP BY g.node, g.gpu
            )
            SELECT g.*, g.direct AND NOT coalesce(n.clash, false) AS straight, n.stored_prev
            FROM gy_gpu g LEFT JOIN near n ON n.node = g.node AND n.gpu = g.gpu"""
    )


def insert_straight(con: duckdb.DuckDBPyConnection, *, cluster: str | None) -> None:
    """The series of straight GPUs as they came: the one before a series' first point is the
    last of the GPU's series before it, in this ingest or stored."""

    def values_sql(role: Role) -> str:
        return f"CASE WHEN s.role = {literal(role.value)} THEN s.vs END"

    con.execute(
        f"""INSERT INTO gpu_series
            SELECT $cluster, s.node, s.gpu, s.job_label, i.first_t, i.last_t,
                   coalesce(i.prev_last, p.stored_prev), i.step, i.first_step, s.ts,
                   {values_sql(Role.ACTIVE)}, {values_sql(Role.TENSOR)}, {values_sql(Role.SM)}, s.ingest_id
            FROM gy_series s JOIN gy_info i ON i.sid = s.rowid
            JOIN gy_plan p ON p.node = s.node AND p.gpu = s.gpu
            WHERE p.straight""",
        {"cluster": cluster},
    )


def insert_pivoted(con: duckdb.DuckDBPyConnection, *, cluster: str | None) -> None:
    """The other GPUs: new points and the stored series they overlap, one sample per GPU and
    time, cut into series where the job, the step or the ingest changes."""
    con.execute(
        f"""CREATE OR REPLACE TEMP TABLE gy_clashing AS
            SELECT o.rowid AS rid FROM gpu_series o
            JOIN gy_plan p ON p.node = o.node AND p.gpu = o.gpu
            WHERE NOT p.straight AND NOT o.{_NEW} AND o.first_t <= p.hi AND o.last_t >= p.lo"""
    )
    con.execute(f"CREATE OR REPLACE TEMP TABLE gy_points AS {_points_sql()}", {"cluster": cluster})
    con.execute("DELETE FROM gpu_series WHERE rowid IN (SELECT rid FROM gy_clashing)")
    con.execute(f"INSERT INTO gpu_series {_chunks_sql()}")


def _points_sql() -> str:
    """One row per GPU and time: the new points pivoted (largest value of each metric, the job
    of the label or of the job-id gauge, the shortest step), over the points of the overlapped
    stored series: a metric the new capture has replaces the stored one, a metric it lacks
    (another file's metric of the same GPU and time) stays."""
    job_sql = literal(Role.JOB.value)

    def largest_sql(role: Role) -> str:
        return f"max(v) FILTER (WHERE role = {literal(role.value)} AND NOT isnan(v))"

    return f"""
        WITH new_points AS (
            SELECT s.node, s.gpu, s.role, s.job_label, s.ingest_id, i.first_t, i.step,
                   i.first_step, unnest(s.ts) AS t, unnest(s.vs) AS v
            FROM gy_series s JOIN gy_info i ON i.sid = s.rowid
            JOIN gy_plan p ON p.node = s.node AND p.gpu = s.gpu WHERE NOT p.straight
        ), new_rows AS (
            SELECT $cluster AS cluster, node, gpu, t,
                   max(CASE WHEN role <> {job_sql} THEN job_label
                            WHEN v > 0 THEN CAST(CAST(v AS BIGINT) AS VARCHAR) END) AS job_id,
                   {largest_sql(Role.ACTIVE)} AS active, {largest_sql(Role.TENSOR)} AS tensor,
                   {largest_sql(Role.SM)} AS sm, min({_BOUND}) AS bound,
                   min(ingest_id) AS ingest_id
            FROM new_points GROUP BY node, gpu, t
        ), old_rows AS (
            SELECT cluster, node, gpu, unnest(ts) AS t, job_id, unnest(active) AS active,
                   unnest(tensor_active) AS tensor, unnest(sm_active) AS sm,
                   unnest(list_transform(ts, lambda x: CASE WHEN x = first_t
                                                             THEN first_step_s
                                                             ELSE step_s END)) AS bound,
                   ingest_id
            FROM gpu_series WHERE rowid IN (SELECT rid FROM gy_clashing)
        )
        SELECT coalesce(n.cluster, o.cluster) AS cluster, coalesce(n.node, o.node) AS node,
               coalesce(n.gpu, o.gpu) AS gpu, coalesce(n.t, o.t) AS t,
               coalesce(n.job_id, o.job_id) AS job_id,
               coalesce(n.active, o.active) AS active, coalesce(n.tensor, o.tensor) AS tensor,
               coalesce(n.sm, o.sm) AS sm, coalesce(n.bound, o.bound) AS bound,
               coalesce(n.ingest_id, o.ingest_id) AS ingest_id
        FROM new_rows n FULL JOIN old_rows o ON n.node = o.node AND n.gpu = o.gpu AND n.t = o.t
    """


def _chunks_sql() -> str:
    """The points cut into series: a new one where the job label, the step, the cluster or the
    ingest changes. A chunk's first point follows the point before it of its GPU, or the
    GPU's last stored sample before it."""
    return """
        WITH ordered AS (
            SELECT *, lag(t) OVER w AS before_t,
                   lag(job_id) OVER w IS DISTINCT FROM job_id
                   OR lag(bound) OVER w IS DISTINCT FROM bound
                   OR lag(cluster) OVER w IS DISTINCT FROM cluster
                   OR lag(ingest_id) OVER w IS DISTINCT FROM ingest_id AS starts
            FROM gy_points WINDOW w AS (PARTITION BY node, gpu ORDER BY t)
        ), chunked AS (
            SELECT *, sum(starts::INTEGER) OVER (
                PARTITION BY node, gpu ORDER BY t ROWS UNBOUNDED PRECEDING) AS chunk
            FROM ordered
        ), chunks AS (
            SELECT cluster, node, gpu, job_id, min(t) AS first_t, max(t) AS last_t,
                   first(before_t ORDER BY t) AS before_t, any_value(bound) AS bound,
                   list(t ORDER BY t) AS ts, list(active ORDER BY t) AS active,
                   list(tensor ORDER BY t) AS tensor, list(sm ORDER BY t) AS sm,
                   any_value(ingest_id) AS ingest_id
            FROM chunked GROUP BY node, gpu, chunk, cluster, job_id, ingest_id
        )
        SELECT c.cluster, c.node, c.gpu, c.job_id, c.first_t, c.last_t,
               coalesce(c.before_t, (SELECT max(o.last_t) FROM gpu_series o
                                     WHERE o.node = c.node AND o.gpu = c.gpu
                                       AND o.last_t < c.first_t)),
               c.bound, c.bound, c.ts,
               CASE WHEN list_count(c.active) > 0 THEN c.active END,
               CASE WHEN list_count(c.tensor) > 0 THEN c.tensor END,
               CASE WHEN list_count(c.sm) > 0 THEN c.sm END,
               c.ingest_id
        FROM chunks c"""


def spans(con: duckdb.DuckDBPyConnection) -> None:
    """``gy_span``: per GPU, the times this ingest wrote (its new samples, and the stored ones
    it cut again)."""
    con.execute(
        """CREATE OR REPLACE TEMP TABLE gy_span AS
           SELECT node, gpu, min(lo) AS lo, max(hi) AS hi FROM (
               SELECT node, gpu, lo, hi FROM gy_plan
               UNION ALL
               SELECT node, gpu, min(t), max(t) FROM gy_points GROUP BY node, gpu
           ) GROUP BY node, gpu"""
    )


def relink_successors(con: duckdb.DuckDBPyConnection) -> None:
    """A stored series that now follows samples this ingest wrote takes the last of them as
    the sample before its first (only the first series after them had an older one)."""
    con.execute(
        """UPDATE gpu_series o SET prev_t = h.hi
           FROM gy_span h
           WHERE o.node = h.node AND o.gpu = h.gpu AND o.first_t > h.hi
             AND coalesce(o.prev_t < h.hi, true)"""
    )


def regions_sql(margin_s: int) -> str:
    """Where attribution must look again: per node, the times written, and the first sample
    after them (its interval may have changed): ``margin_s``, the longest step stored."""
    return f"SELECT node, min(lo), max(hi) + {literal(margin_s)} FROM gy_span GROUP BY node"
