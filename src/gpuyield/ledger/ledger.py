"""The ledger: every installed GPU-second in the window, in exactly one category.

The logic is written in Ibis over the store's tables, so the same expressions run on DuckDB (the
default) and on other Ibis backends such as Spark. Allocation is computed per job and, separately, per
node; the two must agree, and no node may hold more GPUs than it has: that is the conservation check.
"""

from __future__ import annotations

import dataclasses
import uuid
from dataclasses import dataclass, field

import duckdb
import ibis
import ibis.expr.types as ir

from gpuyield.categories import Category
from gpuyield.errors import ConservationError, DataConsistencyError
from gpuyield.ledger.down import (
    down_islands,
    down_segments,
    job_node_allocations,
    node_ids,
    node_sweep,
    over_capacity,
    sweep_changes,
)
from gpuyield.ledger.jobs import SEGMENT_JOB_ATTRIBUTES, clipped_jobs, job_segments
from gpuyield.ledger.scan import scan_sweep
from gpuyield.ledger.telemetry import (
    has_telemetry,
    measured_lost_progress,
    overhead_intervals,
    with_detected_divergence,
)
from gpuyield.ledger.utilization import (
    IDLE_ALLOCATED,
    IDLE_THRESHOLD,
    Utilization,
    UtilizationSummary,
    attribute,
    has_samples,
    idle_segments,
    on_segments,
    sample_intervals,
    summarize,
)
from gpuyield.ledger.window import Window, node_capacity, resolve_window
from gpuyield.manifest import Manifest, stored_manifest
from gpuyield.store import connection_of

# Partitions of the per-node sweep on engines other than DuckDB (whole nodes per partition).
_SWEEP_BUCKETS = 64
ALLOCATED = tuple(c for c in Category if c not in (Category.DOWN, Category.IDLE))
# GPU-seconds are sums of float products; differences below this are rounding, not accounting.
_TOLERANCE_GPU_S = 1e-3


@dataclass(frozen=True, kw_only=True, slots=True)
class Ledger:
    """The categorised GPU-time of one window, plus the Ibis tables it came from."""

    window: Window
    """The accounted interval."""
    manifest: Manifest
    """The release manifest used."""
    installed_gpu_seconds: float
    """GPUs x seconds of installed capacity in the window."""
    categories: dict[str, float]
    """GPU-seconds per category; sums to ``installed_gpu_seconds``."""
    subcategories: dict[str, float]
    """GPU-seconds per ``category.subcategory``."""
    jobs_without_gpu_count: int
    """Jobs that ran in the window but whose GPU count is unknown (their time is not allocated)."""
    node_seconds_without_gpu_count: float
    """Node-seconds of those jobs, to judge how much that matters."""
    measured_lost_jobs: int
    """Lineage jobs whose lost progress came from telemetry rather than an estimate."""
    estimated_lost_jobs: int
    """Lineage jobs whose lost progress was estimated from the checkpoint interval."""
    overhead_measured: bool
    """True when run telemetry was available to measure overhead."""
    divergence_evidence: tuple[dict[str, object], ...]
    """What the divergence watch found in telemetry: run, step, t_s, kind, metric, value, threshold."""
    segments: ir.Table = field(repr=False)
    """Signed ``[start_s, end_s) x gpus`` segments of every category except idle."""
    capacity: ir.Table = field(repr=False)
    """Installed GPUs per node over time (a row per node and stretch with a fixed count)."""
    jobs: ir.Table = field(repr=False)
    """Jobs clipped to the window, with their runs."""
    down: ir.Table = field(repr=False)
    """Down segments per node (``cluster, node, start_s, end_s, subcategory, gpus``)."""
    utilization: UtilizationSummary | None = None
    """Measured GPU activity, when the store holds utilization samples; None: not measured."""

    @property
    def allocated_gpu_seconds(self) -> float:
        """GPU-seconds held by jobs."""
        return sum(self.categories[c.value] for c in ALLOCATED)


def backend_for(con: duckdb.DuckDBPyConnection) -> ibis.BaseBackend:
    """An Ibis backend over an open DuckDB store."""
    return ibis.duckdb.from_connection(con)


def compute_ledger(
    backend: ibis.BaseBackend,
    *,
    since_s: int | None = None,
    until_s: int | None = None,
    manifest: Manifest | None = None,
    keep_segments: bool = False,
    idle_threshold: float = IDLE_THRESHOLD,
) -> Ledger:
    """Categorise every installed GPU-second of the window and check conservation.

    ``keep_segments`` computes the segments once into a temporary table, for callers that query
    them again (breakdowns, the HTML report); the plain report only needs their totals.

    With run telemetry in the store, lost progress and overhead of lineage jobs are measured and
    runs the divergence watch found diverged are charged to ``diverged``; otherwise estimated.

    With utilization samples in the store, job time measured below ``idle_threshold`` activity
    moves to ``idle.allocated`` (ledger/utilization.py); without them nothing changes.
    """
    window = resolve_window(backend, since_s=since_s, until_s=until_s)
    if manifest is None:
        needed_for = "the stored manifest (on other engines, pass the manifest)"
        manifest = stored_manifest(connection_of(backend, needed_for=needed_for))
    evidence: list[dict[str, object]] = []
    telemetry = has_telemetry(backend)
    if telemetry:
        manifest, evidence = with_detected_divergence(backend, manifest)
    capacity_table, capacity_warnings = node_capacity(backend, window)
    window = dataclasses.replace(window, warnings=window.warnings + capacity_warnings)
    capacity = materialize(backend, "gy_capacity", capacity_table)
    jobs = clipped_jobs(backend, window, manifest)
    if keep_segments or telemetry:
        jobs = materialize(backend, "gy_jobs", jobs)
    allocations = materialize(
        backend, "gy_allocations", job_node_allocations(backend, jobs, capacity)
    )
    _check_nodes_known(allocations)
    lost = overhead = None
    if telemetry:
        lost = materialize(backend, "gy_lost", measured_lost_progress(backend, jobs, manifest))
        overhead = materialize(backend, "gy_overhead", overhead_intervals(backend, jobs, manifest))
    segments_jobs = job_segments(
        backend, jobs, allocations, manifest, window, lost, overhead, node_ids=node_ids(capacity)
    )
    util = None
    if has_samples(backend):
        segments_jobs = materialize(backend, "gy_job_segments", segments_jobs)
        util = _utilization(
            backend, jobs, allocations, capacity, segments_jobs, window, idle_threshold
        )
    islands = down_islands(backend, capacity, window)
    swept = _swept(backend, allocations, islands, capacity)
    _check_node_peaks(swept)
    down = down_segments(swept)
    base = segments_jobs.union(down.select(*_down_columns()))
    segments = base if util is None else base.union(util.segments)
    if keep_segments:
        segments = _kept_segments(backend, segments, jobs)
    installed = _sum_gpu_s(capacity, capacity.num_gpus.cast("float64"))
    totals, lost_jobs = _totals(segments if util is None else base, sorted(manifest.lineage_runs))
    allocated_by_job = sum(v for k, v in totals.items() if "." not in k and k != "down")
    allocated_by_node = _sum_gpu_s(allocations, None)
    if not _close(allocated_by_job, allocated_by_node):
        raise ConservationError(
            f"allocated GPU-seconds differ by job ({allocated_by_job:.3f}) and by node "
            f"({allocated_by_node:.3f})",
            hint="a bug in the ledger: please report it with the input files",
        )
    idle_allocated = 0.0 if util is None else _move_idle(totals, util.summary)
    categories = {c.value: totals.get(c.value, 0.0) for c in Category}
    unallocated = installed - categories["down"] - allocated_by_job
    categories[Category.IDLE.value] = unallocated + idle_allocated
    _check_conservation(installed, categories)
    missing = _jobs_without_gpu_count(jobs)
    return Ledger(
        window=window,
        manifest=manifest,
        installed_gpu_seconds=installed,
        categories=categories,
        subcategories={k: v for k, v in totals.items() if "." in k},
        jobs_without_gpu_count=missing[0],
        node_seconds_without_gpu_count=missing[1],
        measured_lost_jobs=lost_jobs.get(True, 0),
        estimated_lost_jobs=lost_jobs.get(False, 0),
        overhead_measured=telemetry,
        divergence_evidence=tuple(evidence),
        segments=segments,
        capacity=capacity,
        jobs=jobs,
        down=down,
        utilization=None if util is None else util.summary,
    )


def _move_idle(totals: dict[str, float], summary: UtilizationSummary) -> float:
    """Take measured-idle job time out of its categories into ``idle.allocated``; its total."""
    for key, value in summary.moved.items():
        totals[key] = totals.get(key, 0.0) - value
    totals[IDLE_ALLOCATED] = summary.idle_allocated_gpu_seconds
    return summary.idle_allocated_gpu_seconds


def _utilization(
    backend: ibis.BaseBackend,
    jobs: ir.Table,
    allocations: ir.Table,
    capacity: ir.Table,
    segments_jobs: ir.Table,
    window: Window,
    threshold: float,
) -> Utilization:
    """Samples attributed to jobs, their activity per category, and the idle moves."""
    samples = sample_intervals(backend, node_ids(capacity), window.start_s, window.end_s)
    attributed = materialize(
        backend, "gy_attributed", attribute(samples, jobs, allocations, capacity)
    )
    # Not stored: the plain report reads it once (the summary); breakdowns read it again.
    cut = on_segments(attributed, segments_jobs)
    labelled = samples.filter(samples.job_id.notnull()).count()
    counts, activity, moved = summarize(attributed, cut, threshold, labelled)
    summary = UtilizationSummary(
        threshold=threshold,
        samples=counts,
        activity=activity,
        idle_allocated_gpu_seconds=sum(a.idle_gpu_seconds for a in activity.values()),
        moved=moved,
    )
    segments = idle_segments(cut, threshold, list(segments_jobs.columns))
    return Utilization(summary=summary, segments=segments)


def _kept_segments(backend: ibis.BaseBackend, segments: ir.Table, jobs: ir.Table) -> ir.Table:
    """The segments computed once for the queries that follow (breakdowns, figures).

    Stored without the job attributes, which a join on ``job_key`` brings back from the (already
    stored) jobs: at 10M jobs the wide rows took 18 s to write, the narrow ones a fraction of it.
    Same columns, same rows (down segments have no job: their attributes stay null).
    """
    narrow = materialize(backend, "gy_segments", segments.drop(*SEGMENT_JOB_ATTRIBUTES))
    attributes = jobs.select("job_key", *SEGMENT_JOB_ATTRIBUTES)
    joined = narrow.left_join(attributes, narrow.job_key == attributes.job_key)
    return joined.select(
        *[
            (attributes[c] if c in SEGMENT_JOB_ATTRIBUTES else narrow[c]).name(c)
            for c in segments.columns
        ]
    )


def materialize(backend: ibis.BaseBackend, name: str, table: ir.Table) -> ir.Table:
    """Compute an intermediate once instead of once per query that uses it.

    A temp table where the backend has them (DuckDB); otherwise a temporary view, cached (Spark):
    the view binds a table built in memory (the capacity) to this backend, where a bare
    ``cache()`` would run it on Ibis' default backend.
    """
    unique = f"{name}_{uuid.uuid4().hex[:12]}"
    try:
        return backend.create_table(unique, table, temp=True)
    except NotImplementedError:
        return backend.create_view(unique, table).cache()


def _swept(
    backend: ibis.BaseBackend, allocations: ir.Table, islands: ir.Table, capacity: ir.Table
) -> ir.Table:
    """The per-node sweep: a streaming scan where results stream cheaply to this process
    (embedded DuckDB), window functions over node buckets where the engine spreads them (Spark)."""
    if backend.name == "duckdb":
        return scan_sweep(backend, sweep_changes(allocations, islands, capacity), capacity)
    sweep = node_sweep(allocations, islands, capacity, buckets=_SWEEP_BUCKETS)
    return materialize(backend, "gy_sweep", sweep)


def _down_columns() -> list[ir.Value | str]:
    """Down segments carry the job segments' columns (job fields empty) so both union."""
    null_str = ibis.null(str)
    return [
        ibis.null("int64").name("job_key"),
        "cluster",
        null_str.name("job_id"),
        null_str.name("job_id_raw"),
        ibis.null("int64").name("submit_s"),
        null_str.name("run"),
        null_str.name("user_name"),
        null_str.name("account"),
        null_str.name("partition"),
        null_str.name("state"),
        "category",
        "subcategory",
        "start_s",
        "end_s",
        "gpus",
        ibis.literal(False).name("measured"),
    ]


def _close(a: float, b: float) -> bool:
    return abs(a - b) <= _TOLERANCE_GPU_S + 1e-9 * max(abs(a), abs(b))


def _sum_gpu_s(table: ir.Table, gpus: ir.NumericValue | None) -> float:
    gpus = table.gpus if gpus is None else gpus
    value = ((table.end_s - table.start_s).cast("float64") * gpus).sum().to_pyarrow().as_py()
    return float(value or 0.0)


def _totals(
    segments: ir.Table, lineage_runs: list[str]
) -> tuple[dict[str, float], dict[bool, int]]:
    """GPU-seconds per category and subcategory, and lineage jobs that lost progress (by measured).

    One aggregation over the segments, which are then never stored for the plain report.
    """
    gpu_s = (segments.end_s - segments.start_s) * segments.gpus
    lineage_lost = segments.category.isin([Category.FAILED.value, Category.CANCELLED.value]) & (
        segments.run.isin(lineage_runs or [""]).fill_null(False)
    )
    by_cat = segments.group_by(["category", "subcategory", "measured"]).aggregate(
        gpu_s=gpu_s.sum(), lost_jobs=lineage_lost.cast("int64").sum()
    )
    totals: dict[str, float] = {}
    lost_jobs: dict[bool, int] = {}
    for row in by_cat.to_pyarrow().to_pylist():
        category, sub, value = row["category"], row["subcategory"], float(row["gpu_s"])
        totals[category] = totals.get(category, 0.0) + value
        if sub is not None:
            totals[f"{category}.{sub}"] = totals.get(f"{category}.{sub}", 0.0) + value
        measured = bool(row["measured"])
        lost_jobs[measured] = lost_jobs.get(measured, 0) + int(row["lost_jobs"] or 0)
    return totals, lost_jobs


def _check_conservation(installed: float, categories: dict[str, float]) -> None:
    total = sum(categories.values())
    if not _close(total, installed) or any(v < -_TOLERANCE_GPU_S for v in categories.values()):
        raise ConservationError(
            f"categories sum to {total:.3f} GPU-seconds but installed is {installed:.3f}: "
            + ", ".join(f"{k}={v:.3f}" for k, v in categories.items()),
            hint="a bug in the ledger or contradictory inputs; please report it with the files",
        )


def _check_nodes_known(allocations: ir.Table) -> None:
    """Every node a job held GPUs on must be in the inventory, or its GPUs were never installed."""
    unknown = allocations.filter(allocations.node_id.isnull()).select("cluster", "node")
    rows = unknown.distinct().limit(5).to_pyarrow().to_pylist()
    if rows:
        names = ", ".join(f"{r['cluster']}:{r['node']}" for r in rows)
        raise DataConsistencyError(
            f"jobs ran on nodes missing from the inventory: {names}",
            hint="give --events in the long format (its ClusterNodes say when nodes were in the "
            "cluster), or a --nodes inventory that lists them, or a --since after they left",
        )


def _check_node_peaks(swept: ir.Table) -> None:
    """No node may hold more GPUs than it has, at any instant."""
    rows = over_capacity(swept).limit(5).to_pyarrow().to_pylist()
    if rows:
        detail = "; ".join(
            f"{r['node']} held {r['peak']:g} of {r['num_gpus']:g} GPUs" for r in rows
        )
        raise DataConsistencyError(
            f"jobs overlap beyond node capacity: {detail}",
            hint="is the inventory's GPU count per node right? do two sacct captures disagree?",
        )


def _jobs_without_gpu_count(jobs: ir.Table) -> tuple[int, float]:
    unknown = jobs.filter(jobs.num_gpus.isnull())
    row = (
        unknown.aggregate(
            n=unknown.count(),
            node_s=(
                (unknown.clip_end_s - unknown.clip_start_s) * unknown.num_nodes.fill_null(1)
            ).sum(),
        )
        .to_pyarrow()
        .to_pylist()[0]
    )
    return int(row["n"]), float(row["node_s"] or 0.0)
