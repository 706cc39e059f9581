"""Keeping ``sample_groups`` true after every ingest: what changed, as regions, attributed again.

A region is a node and a range of sample end times (``gy_regions``: ``node, lo_s, hi_s``): the
groups of the node whose end lies in the range are deleted, and the samples of the node whose
time lies in it are attributed again, so a region is replaced exactly. The regions come from

- the samples a utilization ingest stored or whose interval it changed (its caller says);
- the inventory: a node whose GPU count changed, appeared or left (the whole node);
- the runs an ingest stored (sacct, or GPU indices from ``scontrol -d show job``), against the
  allocations the attribution last used (``sample_jobs``): a run whose end moved changes only
  the time between the two ends; one whose start, GPUs, nodes or indices changed, both spans.

A sample overlapping ``[a, b)`` ends after ``a`` and before ``b`` plus its step, so an allocation
change over ``[a, b)`` is the region ``[a, b + the node's longest step]``. Jobs are never deleted from the
store except to be stored again under the same key (ingest/sacct/load.py), so every change to the runs
arrives as runs stored by an ingest newer than the last ``sync`` (its id is kept in ``meta``).
"""

from __future__ import annotations

import duckdb

from gpuyield.attribution.rules import (
    CHARGED,
    IDLE_THRESHOLD,
    MAX_GPU_INDEX,
    Shape,
    groups_sql,
    prepare,
)
from gpuyield.sqltext import identifier, literal

_WATERMARK = "samples_attributed_through_ingest"
_MIN_S = -(1 << 62)
_MAX_S = 1 << 62


def sync(con: duckdb.DuckDBPyConnection, *, regions_sql: str | None = None) -> None:
    """Bring the attribution up to date with the store, inside the caller's transaction.

    ``regions_sql``: a query of ``node, lo_s, hi_s`` the caller's own samples changed (a
    utilization ingest). Without samples in the store nothing is attributed, and the first
    ``sync`` with samples attributes every one.
    """
    if not _has_rows(con, "gpu_series"):
        return
    watermark = _watermark(con)
    con.execute("CREATE OR REPLACE TEMP TABLE gy_regions (node VARCHAR, lo BIGINT, hi BIGINT)")
    if regions_sql is not None:
        con.execute(f"INSERT INTO gy_regions SELECT * FROM ({regions_sql})")
    _sync_nodes(con)
    _sync_runs(con, watermark)
    shape = Shape.of(con)
    if watermark is None:
        _attribute_everything(con, shape=shape)
    else:
        _attribute_regions(con, shape=shape)
    _set_watermark(con)


def _has_rows(con: duckdb.DuckDBPyConnection, table: str) -> bool:
    rows = con.execute(
        f"SELECT count(*) FROM (SELECT 1 FROM {identifier(table)} LIMIT 1)"
    ).fetchall()
    return bool(rows[0][0])


def _watermark(con: duckdb.DuckDBPyConnection) -> int | None:
    rows = con.execute("SELECT value FROM meta WHERE key = ?", [_WATERMARK]).fetchall()
    return int(rows[0][0]) if rows else None


def _set_watermark(con: duckdb.DuckDBPyConnection) -> None:
    """Every run stored so far is in ``sample_jobs`` (an ingest registers its files in
    ``ingests`` after loading them: the jobs' own ids count)."""
    latest = con.execute(
        """SELECT greatest((SELECT max(ingest_id) FROM ingests),
                           (SELECT max(ingest_id) FROM jobs),
                           (SELECT max(ingest_id) FROM job_gpus), 0)"""
    ).fetchall()[0][0]
    con.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", [_WATERMARK, str(int(latest))])


def _sync_nodes(con: duckdb.DuckDBPyConnection) -> None:
    """A node whose GPU count the inventory changed (or that came or went) is a region whole."""
    changed = con.execute(
        f"""INSERT INTO gy_regions
            SELECT coalesce(n.node, o.node), {_MIN_S}, {_MAX_S}
            FROM (SELECT node, min(num_gpus) AS num_gpus FROM nodes GROUP BY node) n
            FULL JOIN (SELECT node, min(num_gpus) AS num_gpus FROM sample_nodes
                       GROUP BY node) o ON n.node = o.node
            WHERE n.num_gpus IS DISTINCT FROM o.num_gpus"""
    ).fetchall()
    if changed and changed[0][0]:
        con.execute("DELETE FROM sample_nodes")
        con.execute("INSERT INTO sample_nodes SELECT cluster, node, num_gpus FROM nodes")


def _sync_runs(con: duckdb.DuckDBPyConnection, watermark: int | None) -> None:
    """Allocations of the runs stored since the last sync, against the ones last used."""
    _touched_runs(con, watermark)
    con.execute(
        f"""CREATE OR REPLACE TEMP TABLE gy_runs AS
            WITH indices AS (
                SELECT cluster, job_id_raw, start_s, node,
                       bit_or(CASE WHEN gpu BETWEEN 0 AND {MAX_GPU_INDEX}
                                   THEN 1::HUGEINT << gpu::HUGEINT ELSE 0::HUGEINT END)
                           AS gpu_mask
                FROM job_gpus SEMI JOIN gy_touched USING (cluster, job_id_raw)
                GROUP BY ALL
            ), runs AS (
                SELECT j.cluster, j.job_id_raw, j.submit_s, jn.node, j.start_s,
                       coalesce(j.end_s, i.as_of_s) AS end_s,
                       j.num_gpus::DOUBLE / j.num_nodes AS gpus
                FROM jobs j SEMI JOIN gy_touched USING (cluster, job_id_raw, submit_s)
                JOIN job_nodes jn USING (job_key)
                LEFT JOIN ingests i ON i.ingest_id = j.ingest_id
                WHERE j.start_s IS NOT NULL AND j.num_gpus > 0 AND j.num_nodes > 0
            )
            SELECT r.*, x.gpu_mask FROM runs r
            LEFT JOIN indices x USING (cluster, job_id_raw, start_s, node)
            WHERE r.end_s > r.start_s"""
    )
    con.execute(
        """CREATE OR REPLACE TEMP TABLE gy_old AS
           SELECT * FROM sample_jobs SEMI JOIN gy_touched USING (cluster, job_id_raw, submit_s)"""
    )
    if watermark is not None:
        _run_regions(con)
    indexed = "SELECT DISTINCT node FROM sample_jobs WHERE gpu_mask IS NOT NULL"
    con.execute(f"CREATE OR REPLACE TEMP TABLE gy_indexed AS {indexed}")
    _store_runs(con)
    # A node where some run's GPU indices are now known (or no longer are) groups its samples
    # per GPU (or per node): all of its samples are grouped again, so the groups are the ones a
    # fresh attribution would make.
    con.execute(
        f"""INSERT INTO gy_regions
            SELECT node, {_MIN_S}, {_MAX_S} FROM (
                (SELECT node FROM gy_indexed EXCEPT {indexed})
                UNION ({indexed} EXCEPT SELECT node FROM gy_indexed))"""
    )


def _touched_runs(con: duckdb.DuckDBPyConnection, watermark: int | None) -> None:
    """``gy_touched``: the runs (cluster, JobIDRaw, submit) stored since ``watermark`` (every
    run when None), or whose GPU indices were."""
    if watermark is None:
        con.execute(
            """CREATE OR REPLACE TEMP TABLE gy_touched AS
               SELECT DISTINCT cluster, job_id_raw, submit_s FROM jobs"""
        )
        return
    con.execute(
        """CREATE OR REPLACE TEMP TABLE gy_touched AS
           SELECT DISTINCT cluster, job_id_raw, submit_s FROM jobs WHERE ingest_id > $w
           UNION
           SELECT j.cluster, j.job_id_raw, j.submit_s FROM jobs j
           SEMI JOIN (SELECT DISTINCT cluster, job_id_raw, start_s FROM job_gpus
                      WHERE ingest_id > $w) g USING (cluster, job_id_raw, start_s)""",
        {"w": watermark},
    )


def _run_regions(con: duckdb.DuckDBPyConnection) -> None:
    """Where a run's allocation on a node changed: between its two ends when only the end moved
    (a running job captured again), over both spans otherwise; each to the longest step of the
    node's series past its end (the samples that overlap it end that much later)."""
    con.execute(
        """INSERT INTO gy_regions
           SELECT coalesce(c.node, o.node),
                  CASE WHEN c.start_s = o.start_s AND c.gpus = o.gpus
                            AND c.gpu_mask IS NOT DISTINCT FROM o.gpu_mask
                       THEN least(c.end_s, o.end_s) ELSE least(c.start_s, o.start_s) END,
                  greatest(c.end_s, o.end_s) + coalesce(s.step_s, 0)
           FROM gy_runs c FULL JOIN gy_old o
             ON c.cluster = o.cluster AND c.job_id_raw = o.job_id_raw
            AND c.submit_s = o.submit_s AND c.node = o.node
           LEFT JOIN (SELECT node, max(greatest(step_s, first_step_s)) AS step_s
                      FROM gpu_series GROUP BY node) s ON s.node = coalesce(c.node, o.node)
           WHERE c.node IS NULL OR o.node IS NULL OR c.start_s <> o.start_s
              OR c.end_s <> o.end_s OR c.gpus <> o.gpus
              OR c.gpu_mask IS DISTINCT FROM o.gpu_mask"""
    )


def _store_runs(con: duckdb.DuckDBPyConnection) -> None:
    """The touched runs' allocations replace theirs in ``sample_jobs``; a run keeps its
    ``job_ref`` (the groups refer to it), a new one gets the next."""
    con.execute(
        """CREATE OR REPLACE TEMP TABLE gy_refs AS
           SELECT k.cluster, k.job_id_raw, k.submit_s,
                  coalesce(o.job_ref, nextval('job_refs')) AS job_ref
           FROM (SELECT DISTINCT cluster, job_id_raw, submit_s FROM gy_runs) k
           LEFT JOIN (SELECT DISTINCT cluster, job_id_raw, submit_s, job_ref FROM gy_old) o
             USING (cluster, job_id_raw, submit_s)"""
    )
    con.execute(
        """DELETE FROM sample_jobs s WHERE EXISTS (
               SELECT 1 FROM gy_touched t WHERE t.cluster = s.cluster
               AND t.job_id_raw = s.job_id_raw AND t.submit_s = s.submit_s)"""
    )
    con.execute(
        """INSERT INTO sample_jobs
           SELECT f.job_ref, r.cluster, r.job_id_raw, r.submit_s, r.node, r.start_s, r.end_s,
                  r.gpus, r.gpu_mask
           FROM gy_runs r JOIN gy_refs f USING (cluster, job_id_raw, submit_s)"""
    )


def _attribute_everything(con: duckdb.DuckDBPyConnection, *, shape: Shape) -> None:
    """The first attribution (or after the store lost it): every sample, every run."""
    con.execute("DELETE FROM sample_groups")
    prepare(con, regions=False, shape=shape)
    con.execute(
        f"INSERT INTO sample_groups {groups_sql(regions=False, shape=shape)}",
        {"threshold": IDLE_THRESHOLD},
    )
    con.execute("DELETE FROM sample_job_gpus")
    con.execute(f"INSERT INTO sample_job_gpus {_measured_gpus_sql('true')}")


def _attribute_regions(con: duckdb.DuckDBPyConnection, *, shape: Shape) -> None:
    """The samples of the regions attributed again; the measured GPUs of every run whose
    groups changed counted again."""
    if not _merge_regions(con):
        return
    in_region = "JOIN gy_merged r ON r.node = g.node AND g.end_s BETWEEN r.lo AND r.hi"
    changed = (
        f"SELECT DISTINCT g.job_ref FROM sample_groups g {in_region} WHERE g.job_ref IS NOT NULL"
    )
    con.execute(f"CREATE OR REPLACE TEMP TABLE gy_changed_refs AS {changed}")
    con.execute(
        """DELETE FROM sample_groups g USING gy_merged r
           WHERE r.node = g.node AND g.end_s BETWEEN r.lo AND r.hi"""
    )
    prepare(con, regions=True, shape=shape)
    con.execute(
        f"INSERT INTO sample_groups {groups_sql(regions=True, shape=shape)}",
        {"threshold": IDLE_THRESHOLD},
    )
    con.execute(f"INSERT INTO gy_changed_refs {changed}")
    refs = "job_ref IN (SELECT job_ref FROM gy_changed_refs)"
    con.execute(f"DELETE FROM sample_job_gpus WHERE {refs}")
    con.execute(f"INSERT INTO sample_job_gpus {_measured_gpus_sql(refs)}")


def _merge_regions(con: duckdb.DuckDBPyConnection) -> bool:
    """``gy_merged``: the regions of each node merged where they overlap; False when none."""
    con.execute(
        """CREATE OR REPLACE TEMP TABLE gy_merged AS
           WITH ordered AS (
               SELECT node, lo, hi, max(hi) OVER (
                   PARTITION BY node ORDER BY lo, hi
                   ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS before
               FROM gy_regions WHERE node IS NOT NULL AND hi >= lo
           ), numbered AS (
               SELECT *, sum(CASE WHEN before IS NULL OR lo > before THEN 1 ELSE 0 END) OVER (
                   PARTITION BY node ORDER BY lo, hi ROWS UNBOUNDED PRECEDING) AS island
               FROM ordered
           )
           SELECT node, min(lo) AS lo, max(hi) AS hi FROM numbered GROUP BY node, island"""
    )
    return _has_rows(con, "gy_merged")


def _measured_gpus_sql(where_sql: str) -> str:
    """Per run and node, how many distinct GPUs the charged samples measured."""
    charged_sql = ", ".join(literal(how) for how in CHARGED)
    return f"""SELECT job_ref, node, bit_count(bit_or(gpu_mask)) FROM sample_groups
               WHERE how IN ({charged_sql}) AND {where_sql} GROUP BY job_ref, node"""
