"""The attribution rule as one SQL query: samples in, ``sample_groups`` rows out.

Samples are grouped first, per node, label and interval (and GPU, on nodes where some run's GPU
indices are known): a run's GPUs on a node are read at the same instants, so the joins to the
allocations that follow see a GPU count fewer rows. Everything after the grouping weighs a
sample by its interval only, so the sums over a group are exact.
"""

from __future__ import annotations

from dataclasses import dataclass

import duckdb

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


def groups_sql(series_filter: str, sample_filter: str, *, shape: Shape) -> str:
    """A query giving ``sample_groups`` rows for the samples ``g`` that ``sample_filter``
    selects, of the series ``o`` (``gpu_series``) that ``series_filter`` selects (SQL over
    ``o`` and ``g``). Parameter ``$threshold``: the idle threshold. ``shape``: what the
    stored samples hold (``Shape.of``).
    """
    with_indices = shape.with_indices
    return f"""
        WITH {_grouped(series_filter, sample_filter, shape)},
        {_by_label()},
        {_by_index() if with_indices else _no_index()},
        {_by_node()}
        SELECT node, how, job_ref, start_s, t_s AS end_s, samples, idle_samples,
               active_sum, tensor_sum, tensor_samples,
               CASE WHEN how IN {_charged()} THEN gpu_mask ELSE 0::HUGEINT END AS gpu_mask
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


# The columns every branch carries through from the grouped samples.
_OUT = "node, start_s, t_s, samples, idle_samples, active_sum, tensor_sum, tensor_samples, gpu_mask"


def _charged() -> str:
    return "(" + ", ".join(f"'{how}'" for how in CHARGED) + ")"


def _grouped(series_filter: str, sample_filter: str, shape: Shape) -> str:
    """``p``: samples grouped; ``q``: with the node's inventory and the interval's midpoint.

    The grouping key is an integer per series label (``labels``: cluster, node, job label),
    cheaper to hash than the strings. A group holding a GPU index the inventory lacks is not
    ``known``: never attributed (the ingest refuses such samples when the inventory is there; it
    may arrive, or shrink, later). Indices are below ``MAX_GPU_INDEX`` (the ingest refuses
    others), so the mask holds every GPU of a group.
    """
    indexed = (
        "o.node IN (SELECT node FROM sample_jobs WHERE gpu_mask IS NOT NULL)"
        if shape.with_indices
        else "false"
    )
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
    carried = (("l.lk", "lk"), (indexed, "indexed"))
    source = """gpu_series o JOIN labels l ON l.node = o.node
                AND l.cluster IS NOT DISTINCT FROM o.cluster
                AND l.job_id IS NOT DISTINCT FROM o.job_id"""
    return f"""labels AS (
            SELECT *, row_number() OVER () AS lk FROM (
                SELECT DISTINCT cluster, node, job_id FROM gpu_series o WHERE {series_filter})
        ), keyed AS (
            SELECT g.lk, g.start_s, g.t_s, CASE WHEN g.indexed THEN g.gpu END AS gpu_key,
                   g.gpu, g.active, g.tensor_active
            FROM ({samples_sql(series_filter, source=source, carry=carried)}) g
            WHERE {sample_filter}
        ), p0 AS (
            SELECT lk, start_s, t_s, gpu_key,
                   count(*) AS samples,
                   count(*) FILTER (WHERE active < $threshold) AS idle_samples,
                   coalesce(sum(round(active * {ACTIVITY_UNITS})::BIGINT), 0) AS active_sum,
                   {tensor_sum} AS tensor_sum, {tensor_samples} AS tensor_samples,
                   {mask} AS gpu_mask
            FROM keyed GROUP BY lk, start_s, t_s, gpu_key
        ), p AS (
            SELECT l.cluster, l.node, l.job_id, p0.* EXCLUDE (lk) FROM p0 JOIN labels l USING (lk)
        ), inventory AS (
            SELECT node, least(min(num_gpus), {MAX_GPU_INDEX + 1}) AS num_gpus
            FROM sample_nodes GROUP BY node
        ), q AS (
            SELECT p.*, (p.start_s + p.t_s) / 2.0 AS mid, n.num_gpus AS node_gpus,
                   coalesce((p.gpu_mask >> n.num_gpus::HUGEINT) = 0, false) AS known
            FROM p LEFT JOIN inventory n ON n.node = p.node
        )"""


def _by_label() -> str:
    """``labelled``: the label names a run that held GPUs on the node during the interval.

    A job requeued on the same node has several runs there: a sample overlapping two of them
    (its GPU handed from one run to the next within the interval, or the labels of one run's
    GPUs reaching into the other's) cannot say which run's GPU it measured, so it is charged to
    neither (``unattributed``). Only jobs with several runs on a node are ranked for that.
    """
    return """requeued AS (
            SELECT job_id_raw, node FROM sample_jobs GROUP BY job_id_raw, node
            HAVING count(*) > 1
        ), matched AS (
            SELECT q.*, a.job_ref,
                   EXISTS (SELECT 1 FROM requeued r
                           WHERE r.job_id_raw = q.job_id AND r.node = q.node) AS requeued
            FROM q LEFT JOIN sample_jobs a
              ON a.job_id_raw = q.job_id AND a.node = q.node
             AND (q.cluster IS NULL OR a.cluster = q.cluster)
             AND a.start_s < q.t_s AND a.end_s > q.start_s
            WHERE q.job_id IS NOT NULL AND q.known
        ), runs AS (
            SELECT *, count(job_ref) OVER (
                       PARTITION BY cluster, node, job_id, start_s, t_s, gpu_key) AS runs
            FROM matched WHERE requeued
        ), labelled AS (
            SELECT * EXCLUDE (requeued),
                   CASE WHEN job_ref IS NULL THEN 'label_unmatched' ELSE 'label' END AS how
            FROM matched WHERE NOT requeued
            UNION ALL
            SELECT * EXCLUDE (requeued, runs),
                   CASE WHEN job_ref IS NULL THEN 'label_unmatched' ELSE 'label' END
            FROM runs WHERE runs <= 1
            UNION ALL
            SELECT * EXCLUDE (requeued, runs, job_ref), NULL::BIGINT, 'unattributed' FROM (
                SELECT DISTINCT ON (cluster, node, job_id, start_s, t_s, gpu_key) *
                FROM runs WHERE runs > 1)
        )"""


def _by_index() -> str:
    """``index_one``: the one run that held that GPU at the midpoint; ``index_many``: a GPU two
    runs claim at once (contradictory inputs: charged to neither); ``rest``: the others."""
    return """unlabelled AS (
            SELECT * FROM q WHERE job_id IS NULL AND known
        ), claims AS (
            SELECT u.*, a.job_ref,
                   count(a.job_ref) OVER (
                       PARTITION BY u.cluster, u.node, u.gpu_key, u.start_s, u.t_s) AS claims
            FROM unlabelled u LEFT JOIN sample_jobs a
              ON a.node = u.node AND (u.cluster IS NULL OR a.cluster = u.cluster)
             AND a.gpu_mask IS NOT NULL
             AND ((a.gpu_mask >> u.gpu_key::HUGEINT) & 1::HUGEINT) = 1
             AND a.start_s <= u.mid AND a.end_s > u.mid
            WHERE u.gpu_key IS NOT NULL
        ), index_one AS (
            SELECT * FROM claims WHERE claims = 1
        ), index_many AS (
            SELECT DISTINCT ON (cluster, node, gpu_key, start_s, t_s) * FROM claims
            WHERE claims > 1
        ), rest AS (
            SELECT * FROM unlabelled WHERE gpu_key IS NULL
            UNION ALL
            SELECT * EXCLUDE (job_ref, claims) FROM claims WHERE claims = 0
        )"""


def _no_index() -> str:
    """The same names when no run's GPU indices are known: every unlabelled sample is ``rest``."""
    return """index_one AS (
            SELECT *, NULL::BIGINT AS job_ref FROM q WHERE false
        ), index_many AS (
            SELECT * FROM q WHERE false
        ), rest AS (
            SELECT * FROM q WHERE job_id IS NULL AND known
        )"""


def _by_node() -> str:
    """``whole``: the run holding every GPU of the node at the midpoint (a run that holds the
    whole node is the only one there: the ledger refuses a node held beyond its GPUs). ``free``:
    no such run; ``shared`` when a run whose GPU indices are unknown held GPUs there then (the
    GPU may have been its), else the GPU was unallocated (a run of known indices held others)."""
    return """whole AS (
            SELECT r.*, a.job_ref FROM rest r LEFT JOIN sample_jobs a
              ON a.node = r.node AND (r.cluster IS NULL OR a.cluster = r.cluster)
             AND a.gpus >= r.node_gpus - 1e-9 AND a.start_s <= r.mid AND a.end_s > r.mid
        ), free AS (
            SELECT w.*, EXISTS (
                       SELECT 1 FROM sample_jobs a
                       WHERE a.node = w.node AND (w.cluster IS NULL OR a.cluster = w.cluster)
                         AND a.gpu_mask IS NULL AND a.start_s <= w.mid AND a.end_s > w.mid
                   ) AS shared
            FROM whole w WHERE w.job_ref IS NULL
        )"""
