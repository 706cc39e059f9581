"""The attribution rule as one SQL query: samples in, ``sample_groups`` rows out.

Samples are grouped first, per node, label and interval (and GPU, on nodes where some run's GPU
indices are known): a run's GPUs on a node are read at the same instants, so the joins to the
allocations that follow see a GPU count fewer rows. Everything after the grouping weighs a
sample by its interval only, so the sums over a group are exact.
"""

from __future__ import annotations

from dataclasses import dataclass

import duckdb

from gpuyield.sqltext import literal
from gpuyield.store import samples_sql

#: Below this graphics-engine activity a sample interval counts as idle (1%: DCGM reports a GPU
#: with a context open and no kernels at 0%, and a running job rarely averages under 1% a minute).
IDLE_THRESHOLD = 0.01
#: Attributions that charge a run (the others are counted and shown, never charged).
CHARGED = ("label", "gpu", "node")
#: The highest GPU index a node may have: a run's measured GPUs are kept as a 127-bit mask (no
#: Slurm node has that many GPUs; a sample of a higher index is unattributed).
MAX_GPU_INDEX = 126
#: Activity sums are integers in billionths: exact, whatever order threads add them in.
ACTIVITY_UNITS = 1_000_000_000


@dataclass(frozen=True, kw_only=True, slots=True)
class Shape:
    """What the stored samples hold, so the query leaves out work that would find nothing."""

    with_indices: bool = True
    """Some run's GPU indices are known (``sample_jobs.gpu_mask``): the index rule runs."""
    tensor: bool = True
    """Some series measures the tensor pipes: its sums are taken."""
    narrow: bool = False
    """Every GPU index is below 63: the GPU masks are summed as 64-bit integers (cheaper)."""

    @classmethod
    def of(cls, con: duckdb.DuckDBPyConnection) -> Shape:
        """The store's shape now (a look at series-level columns, not at the samples)."""
        indices, tensor, top = con.execute(
            """SELECT (SELECT count(*) FROM (SELECT 1 FROM sample_jobs
                                             WHERE gpu_mask IS NOT NULL LIMIT 1)),
                      (SELECT count(*) FROM (SELECT 1 FROM gpu_series
                                             WHERE tensor_active IS NOT NULL LIMIT 1)),
                      (SELECT max(gpu) FROM gpu_series)"""
        ).fetchall()[0]
        return cls(with_indices=bool(indices), tensor=bool(tensor), narrow=(top or 0) < 63)


def prepare(con: duckdb.DuckDBPyConnection, *, regions: bool, shape: Shape) -> None:
    """The small tables ``groups_sql`` joins, computed first so the planner knows them small:
    ``gy_labels`` (a key per cluster, node and job label of the series read, with their span),
    ``gy_candidates`` (per key, the runs its samples may belong to: the labelled job's runs on
    the node, or every run on the node of an unlabelled key, that overlap the span) and
    ``gy_keys`` (per key, its node, the node's GPUs, whether labelled and requeued)."""
    con.execute(
        f"""CREATE OR REPLACE TEMP TABLE gy_labels AS
            SELECT *, row_number() OVER () AS lk FROM (
                SELECT o.cluster, o.node, o.job_id, min(o.first_t - o.first_step_s) AS lo_t,
                       max(o.last_t) AS hi_t, {_indexed_sql(shape)} AS indexed
                FROM {_series_sql(regions)} GROUP BY o.cluster, o.node, o.job_id)"""
    )
    con.execute(
        """CREATE OR REPLACE TEMP TABLE gy_candidates AS
           SELECT l.lk, a.job_ref, a.start_s, a.end_s, a.gpus, a.gpu_mask
           FROM gy_labels l JOIN sample_jobs a
             ON a.node = l.node AND (l.cluster IS NULL OR a.cluster = l.cluster)
            AND (l.job_id IS NULL OR a.job_id_raw = l.job_id)
            AND a.start_s < l.hi_t AND a.end_s > l.lo_t"""
    )
    con.execute(
        f"""CREATE OR REPLACE TEMP TABLE gy_keys AS
            WITH inventory AS (
                SELECT node, least(min(num_gpus), {MAX_GPU_INDEX + 1}) AS num_gpus
                FROM sample_nodes GROUP BY node
            ), requeued AS (
                SELECT c.lk FROM gy_candidates c JOIN gy_labels l USING (lk)
                WHERE l.job_id IS NOT NULL GROUP BY c.lk HAVING count(*) > 1
            )
            SELECT l.lk, l.node, l.job_id IS NOT NULL AS labelled, n.num_gpus AS node_gpus,
                   l.lk IN (SELECT lk FROM requeued) AS requeued
            FROM gy_labels l LEFT JOIN inventory n ON n.node = l.node"""
    )


def groups_sql(*, regions: bool, shape: Shape) -> str:
    """A query giving ``sample_groups`` rows for every stored sample, or (``regions``) for the
    samples of the regions in ``gy_merged`` (``node, lo, hi``: sample end times, the regions of
    a node apart), after ``prepare`` with the same arguments. Parameter ``$threshold``: the idle
    threshold. ``shape``: what the stored samples hold (``Shape.of``).

    After the grouping every join is on the integer label key, against the few runs each key
    may belong to (``gy_candidates``), not against every run of the store.
    """
    return f"""
        WITH {_grouped_sql(regions, shape)},
        {_by_label_sql()},
        {_by_index_sql() if shape.with_indices else _no_index_sql()},
        {_by_node_sql()}
        SELECT node, how, job_ref, start_s, t_s AS end_s, samples, idle_samples,
               active_sum, tensor_sum, tensor_samples,
               CASE WHEN how IN {_charged_sql()} THEN gpu_mask ELSE 0::HUGEINT END AS gpu_mask
        FROM (
            SELECT {_OUT}, how, job_ref FROM labelled
            UNION ALL SELECT {_OUT}, 'gpu', job_ref FROM index_one
            UNION ALL SELECT {_OUT}, 'unattributed', NULL FROM index_many
            UNION ALL SELECT {_OUT}, 'node', job_ref FROM whole WHERE job_ref IS NOT NULL
            UNION ALL SELECT {_OUT}, CASE WHEN shared THEN 'unattributed' ELSE 'unallocated' END,
                   NULL FROM free
            UNION ALL SELECT {_OUT}, 'unattributed', NULL FROM q WHERE NOT known
        )
    """


def _series_sql(regions: bool) -> str:
    """The series read: all, or those meeting a region (once per region: a node's are apart)."""
    if not regions:
        return "gpu_series o"
    return """gpu_series o JOIN gy_merged r ON r.node = o.node
              AND o.first_t <= r.hi AND o.last_t >= r.lo"""


def _indexed_sql(shape: Shape) -> str:
    """Whether a series' node has a run of known GPU indices (its samples are keyed by GPU)."""
    if not shape.with_indices:
        return "false"
    return "bool_or(o.node IN (SELECT node FROM sample_jobs WHERE gpu_mask IS NOT NULL))"


# The columns every branch carries through from the grouped samples.
_OUT = "node, start_s, t_s, samples, idle_samples, active_sum, tensor_sum, tensor_samples, gpu_mask"


def _charged_sql() -> str:
    return "(" + ", ".join(literal(how) for how in CHARGED) + ")"


def _grouped_sql(regions: bool, shape: Shape) -> str:
    """``p0``: samples grouped per label key (``gy_labels``), interval and (on nodes where some
    run's GPU indices are known) GPU; ``q``: with the key's node, the node's GPUs and the
    interval's midpoint.

    The key is an integer, cheaper to hash than the strings. Indices are below
    ``MAX_GPU_INDEX`` (the ingest refuses others), so the mask holds every GPU of a group. A
    group holding a GPU index the inventory lacks is not ``known``: never attributed (the
    ingest refuses such samples when the inventory is there; it may arrive, or shrink, later).
    """
    tensor_sum = (
        f"coalesce(sum(round(tensor_active * {ACTIVITY_UNITS})::BIGINT), 0)"
        if shape.tensor
        else "0::BIGINT"
    )
    tensor_samples = "count(tensor_active)" if shape.tensor else "0::BIGINT"
    mask = (
        "bit_or(1::BIGINT << gpu)::HUGEINT"
        if shape.narrow
        else "bit_or(1::HUGEINT << gpu::HUGEINT)"
    )
    # A series' region bounds travel with it: its samples are kept inside, no join per sample.
    bounds_sql = "r.lo AS r_lo, r.hi AS r_hi" if regions else "NULL AS r_lo, NULL AS r_hi"
    inside_sql = "g.t_s BETWEEN g.r_lo AND g.r_hi" if regions else "true"
    source_sql = f"""{_series_sql(regions)} JOIN gy_labels l ON l.node = o.node
                AND l.cluster IS NOT DISTINCT FROM o.cluster
                AND l.job_id IS NOT DISTINCT FROM o.job_id"""
    samples = samples_sql(
        source_sql=source_sql,
        computed_sql=f", l.lk AS lk, l.indexed AS indexed, {bounds_sql}",
        kept_sql=", lk, indexed, r_lo, r_hi",
    )
    return f"""keyed AS (
            SELECT g.lk, g.start_s, g.t_s, CASE WHEN g.indexed THEN g.gpu END AS gpu_key,
                   g.gpu, g.active, g.tensor_active
            FROM ({samples}) g
            WHERE {inside_sql}
        ), p0 AS (
            SELECT lk, start_s, t_s, gpu_key,
                   count(*) AS samples,
                   count(*) FILTER (WHERE active < $threshold) AS idle_samples,
                   coalesce(sum(round(active * {ACTIVITY_UNITS})::BIGINT), 0) AS active_sum,
                   {tensor_sum} AS tensor_sum, {tensor_samples} AS tensor_samples,
                   {mask} AS gpu_mask
            FROM keyed GROUP BY lk, start_s, t_s, gpu_key
        ), q AS (
            SELECT p0.*, k.node, k.labelled, k.requeued, k.node_gpus,
                   (p0.start_s + p0.t_s) / 2.0 AS mid,
                   coalesce((p0.gpu_mask >> k.node_gpus::HUGEINT) = 0, false) AS known
            FROM p0 JOIN gy_keys k USING (lk)
        )"""


def _by_label_sql() -> str:
    """``labelled``: the label names a run that held GPUs on the node during the interval.

    A job requeued on the same node has several runs there: a sample overlapping two of them
    (its GPU handed from one run to the next within the interval, or the labels of one run's
    GPUs reaching into the other's) cannot say which run's GPU it measured, so it is charged to
    neither (``unattributed``). Only jobs with several runs on a node are ranked for that.
    """
    return """matched AS (
            SELECT q.*, c.job_ref FROM q LEFT JOIN gy_candidates c
              ON c.lk = q.lk AND c.start_s < q.t_s AND c.end_s > q.start_s
            WHERE q.labelled AND q.known
        ), runs AS (
            SELECT *, count(job_ref) OVER (PARTITION BY lk, start_s, t_s, gpu_key) AS runs
            FROM matched WHERE requeued
        ), labelled AS (
            SELECT *, CASE WHEN job_ref IS NULL THEN 'label_unmatched' ELSE 'label' END AS how
            FROM matched WHERE NOT requeued
            UNION ALL
            SELECT * EXCLUDE (runs),
                   CASE WHEN job_ref IS NULL THEN 'label_unmatched' ELSE 'label' END
            FROM runs WHERE runs <= 1
            UNION ALL
            SELECT * EXCLUDE (runs, job_ref), NULL::BIGINT, 'unattributed' FROM (
                SELECT DISTINCT ON (lk, start_s, t_s, gpu_key) * FROM runs WHERE runs > 1)
        )"""


def _by_index_sql() -> str:
    """``index_one``: the one run that held that GPU at the midpoint; ``index_many``: a GPU two
    runs claim at once (contradictory inputs: charged to neither); ``rest``: the others."""
    return """unlabelled AS (
            SELECT * FROM q WHERE NOT labelled AND known
        ), claims AS (
            SELECT u.*, c.job_ref,
                   count(c.job_ref) OVER (PARTITION BY u.lk, u.gpu_key, u.start_s, u.t_s)
                       AS claims
            FROM unlabelled u LEFT JOIN gy_candidates c
              ON c.lk = u.lk AND c.gpu_mask IS NOT NULL
             AND ((c.gpu_mask >> u.gpu_key::HUGEINT) & 1::HUGEINT) = 1
             AND c.start_s <= u.mid AND c.end_s > u.mid
            WHERE u.gpu_key IS NOT NULL
        ), index_one AS (
            SELECT * FROM claims WHERE claims = 1
        ), index_many AS (
            SELECT DISTINCT ON (lk, gpu_key, start_s, t_s) * FROM claims WHERE claims > 1
        ), rest AS (
            SELECT * FROM unlabelled WHERE gpu_key IS NULL
            UNION ALL
            SELECT * EXCLUDE (job_ref, claims) FROM claims WHERE claims = 0
        )"""


def _no_index_sql() -> str:
    """The same names when no run's GPU indices are known: every unlabelled sample is ``rest``."""
    return """index_one AS (
            SELECT *, NULL::BIGINT AS job_ref FROM q WHERE false
        ), index_many AS (
            SELECT * FROM q WHERE false
        ), rest AS (
            SELECT * FROM q WHERE NOT labelled AND known
        )"""


def _by_node_sql() -> str:
    """``whole``: the run holding every GPU of the node at the midpoint (a run that holds the
    whole node is the only one there: the ledger refuses a node held beyond its GPUs). ``free``:
    no such run; ``shared`` when a run whose GPU indices are unknown held GPUs there then (the
    GPU may have been its), else the GPU was unallocated (a run of known indices held others)."""
    return """whole AS (
            SELECT r.*, c.job_ref FROM rest r LEFT JOIN gy_candidates c
              ON c.lk = r.lk AND c.gpus >= r.node_gpus - 1e-9
             AND c.start_s <= r.mid AND c.end_s > r.mid
        ), free AS (
            SELECT w.*, EXISTS (
                       SELECT 1 FROM gy_candidates c
                       WHERE c.lk = w.lk AND c.gpu_mask IS NULL
                         AND c.start_s <= w.mid AND c.end_s > w.mid
                   ) AS shared
            FROM whole w WHERE w.job_ref IS NULL
        )"""
