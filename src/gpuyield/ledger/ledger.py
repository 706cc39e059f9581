"""The ledger: every installed GPU-second in the window, in exactly one category.

The logic is written in Ibis over the store's tables, so the same expressions run on DuckDB (the
default) and on other Ibis backends such as Spark. Allocation is computed per job and, separately, per
node; the two must agree, and no node may hold more GPUs than it has: that is the conservation check.
"""

from __future__ import annotations

import dataclasses
import functools
import json
from collections.abc import Callable
from dataclasses import dataclass, field

import duckdb
import ibis
import ibis.expr.types as ir

from gpuyield.categories import ALLOCATED, IDLE_ALLOCATED, Category
from gpuyield.errors import ConservationError, DataConsistencyError
from gpuyield.ledger.coverage import CoverageGapError, captured_parts
from gpuyield.ledger.down import (
    down_islands,
    down_segments,
    job_node_allocations,
    node_ids,
    node_sweep,
    over_capacity,
    sweep_changes,
)
from gpuyield.ledger.estimated import estimated_overhead_intervals, estimated_runs
from gpuyield.ledger.jobs import SEGMENT_JOB_ATTRIBUTES, clipped_jobs, job_segments
from gpuyield.ledger.plan import materialize, reused_on_spark
from gpuyield.ledger.scan import scan_sweep
from gpuyield.ledger.sums import exact_sum, gpu_seconds
from gpuyield.ledger.telemetry import (
    has_telemetry,
    measured_lost_progress,
    overhead_intervals,
    with_detected_divergence,
)
from gpuyield.ledger.utilization import (
    IDLE_THRESHOLD,
    Utilization,
    UtilizationSummary,
    combined_summaries,
    has_samples,
    idle_segments,
    on_segments,
    summarize,
    window_groups,
)
from gpuyield.ledger.window import Window, node_capacity, resolve_window
from gpuyield.manifest import Manifest, check_engine_regex, empty_manifest, stored_manifest
from gpuyield.store import connection_of

# Partitions of the per-node sweep on engines other than DuckDB (whole nodes per partition).
_SWEEP_BUCKETS = 64
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
    categories: dict[Category, float]
    """GPU-seconds per category (every member, in report order); sums to ``installed_gpu_seconds``."""
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
    overhead_estimated_runs: tuple[str, ...]
    """Lineage runs whose jobs without telemetry had overhead estimated from run_settings."""
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
        return sum(self.categories[c] for c in ALLOCATED)


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
    allow_gaps: bool = False,
    idle_threshold: float = IDLE_THRESHOLD,
) -> Ledger:
    """Categorise every installed GPU-second of the window and check conservation.

    ``keep_segments`` computes the segments once into a temporary table, for callers that query
    them again (breakdowns, the HTML report); the plain report only needs their totals.

    With run telemetry in the store, lost progress and overhead of lineage jobs are measured and
    runs the divergence watch found diverged are charged to ``diverged``; otherwise estimated.

    The window must lie inside the store's coverage; with ``allow_gaps`` its uncaptured parts are
    left out (each captured part is accounted on its own, and the parts are summed).

    With utilization samples in the store, job time measured below ``idle_threshold`` activity
    moves to ``idle.allocated`` (ledger/utilization.py); without them nothing changes.
    """
    window = resolve_window(backend, since_s=since_s, until_s=until_s, allow_gaps=allow_gaps)
    if manifest is None:
        manifest = stored_manifest_of(backend)
    if not window.not_captured:
        return _compute_window(
            backend, window, manifest, keep_segments=keep_segments, idle_threshold=idle_threshold
        )
    parts = [
        _compute_window(
            backend,
            dataclasses.replace(window, start_s=start_s, end_s=end_s, not_captured=()),
            manifest,
            keep_segments=keep_segments,
            idle_threshold=idle_threshold,
        )
        for start_s, end_s in captured_parts(window)
    ]
    if not parts:
        raise CoverageGapError(window.not_captured, window.coverage)
    return combine_parts(window, parts)


def stored_manifest_of(backend: ibis.BaseBackend) -> Manifest:
    """The manifest of the latest ingest, read through the backend (a store, or a lake)."""
    if backend.name == "duckdb":
        return stored_manifest(connection_of(backend, needed_for="the stored manifest"))
    manifests = backend.table("manifests")
    latest = manifests.order_by(ibis.desc("ingest_id")).limit(1).to_pyarrow().to_pylist()
    if not latest:
        return empty_manifest()
    manifest = Manifest.from_dict(json.loads(latest[0]["document"]))
    check_engine_regex(manifest.match.pattern, "the stored manifest's runs.match")
    return manifest


def _compute_window(
    backend: ibis.BaseBackend,
    window: Window,
    manifest: Manifest,
    *,
    keep_segments: bool,
    idle_threshold: float,
) -> Ledger:
    evidence: list[dict[str, object]] = []
    telemetry = has_telemetry(backend)
    if telemetry:
        detected = with_detected_divergence(backend, manifest)
        manifest, evidence = detected.manifest, detected.evidence
    node_gpus = node_capacity(backend, window)
    capacity_table, capacity_warnings = node_gpus.table, node_gpus.warnings
    window = dataclasses.replace(window, warnings=window.warnings + capacity_warnings)
    capacity = materialize(backend, "gy_capacity", capacity_table)
    jobs = clipped_jobs(backend, window, manifest)
    if keep_segments or telemetry:
        jobs = materialize(backend, "gy_jobs", jobs)
    allocations = materialize(
        backend, "gy_allocations", job_node_allocations(backend, jobs, capacity)
    )
    _check_nodes_known(allocations)
    progress = _progress(backend, jobs, manifest, telemetry=telemetry)
    segments_jobs = job_segments(
        backend, jobs, allocations, manifest, window, progress.lost, progress.overhead,
        node_ids=node_ids(capacity),
    )  # fmt: skip
    util = None
    if has_samples(backend):  # the job segments are read twice then: once for the samples' cut
        segments_jobs = materialize(backend, "gy_job_segments", segments_jobs)
        util = _utilization(backend, jobs, segments_jobs, window, idle_threshold)
    islands = down_islands(backend, capacity, window)
    swept = _swept(backend, allocations, islands, capacity)
    _check_node_peaks(swept)
    down = down_segments(swept)
    base = segments_jobs.union(down.select(*_down_columns()))
    segments = base if util is None else base.union(util.segments)
    if keep_segments:
        segments = _kept_segments(backend, segments, jobs)
    installed = _sum_gpu_s(capacity, capacity.num_gpus.cast("float64"))
    # Totals before the idle moves: allocated by job must still equal allocated by node.
    totals, lost_jobs = _totals(segments if util is None else base, sorted(manifest.lineage_runs))
    allocated_by_job = _allocated_both_ways(totals, allocations)
    idle_allocated = 0.0 if util is None else _move_idle(totals, util.summary)
    categories = _categories(totals, installed, allocated_by_job, idle_allocated)
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
        overhead_estimated_runs=tuple(estimated_runs(manifest)) if progress.estimated else (),
        divergence_evidence=tuple(evidence),
        segments=segments,
        capacity=capacity,
        jobs=jobs,
        down=down,
        utilization=None if util is None else util.summary,
    )


@dataclass(frozen=True, kw_only=True, slots=True)
class _Progress:
    lost: ir.Table | None
    """Measured lost progress (telemetry), or None."""
    overhead: ir.Table | None
    """Overhead intervals, measured and estimated, or None."""
    estimated: bool
    """True when some lineage job's overhead was estimated (no telemetry for it)."""


def _progress(
    backend: ibis.BaseBackend, jobs: ir.Table, manifest: Manifest, *, telemetry: bool
) -> _Progress:
    """Lost progress and overhead of lineage jobs: measured from telemetry, else estimated."""
    lost = overhead = None
    if telemetry:
        lost = materialize(backend, "gy_lost", measured_lost_progress(backend, jobs, manifest))
        overhead = materialize(backend, "gy_overhead", overhead_intervals(backend, jobs, manifest))
    estimated = estimated_overhead_intervals(jobs, manifest, lost)
    if estimated is not None:
        estimated = materialize(backend, "gy_overhead_estimated", estimated)
        if not estimated.count().to_pyarrow().as_py():
            estimated = None  # every lineage job had telemetry: nothing was estimated
    if estimated is not None:
        overhead = estimated if overhead is None else overhead.union(estimated)
    return _Progress(lost=lost, overhead=overhead, estimated=estimated is not None)


def _categories(
    totals: dict[str, float], installed: float, allocated_by_job: float, idle_allocated: float
) -> dict[Category, float]:
    """Every category's GPU-seconds; idle is what no job held plus what jobs held idle."""
    categories = {c: totals.get(c.value, 0.0) for c in Category}
    unallocated = installed - categories[Category.DOWN] - allocated_by_job
    categories[Category.IDLE] = unallocated + idle_allocated
    subcategories = {k: v for k, v in totals.items() if "." in k}
    _check_conservation(installed, categories, subcategories)
    return categories


def combine_parts(window: Window, parts: list[Ledger]) -> Ledger:
    """One ledger of a window with gaps: the captured parts' GPU-seconds summed, their tables
    united (a job across a gap is in two parts, each clipped to its own)."""
    first = parts[0]

    def summed(pick: Callable[[Ledger], dict[str, float]]) -> dict[str, float]:
        keys = {k for p in parts for k in pick(p)}
        return {k: sum(pick(p).get(k, 0.0) for p in parts) for k in sorted(keys)}

    def united(pick: Callable[[Ledger], ir.Table]) -> ir.Table:
        return functools.reduce(lambda a, b: a.union(b), [pick(p) for p in parts[1:]], pick(first))

    warnings = tuple(dict.fromkeys(w for p in parts for w in p.window.warnings))
    return Ledger(
        window=dataclasses.replace(window, warnings=warnings),
        manifest=first.manifest,
        installed_gpu_seconds=sum(p.installed_gpu_seconds for p in parts),
        categories={c: sum(p.categories[c] for p in parts) for c in Category},
        subcategories=summed(lambda p: p.subcategories),
        jobs_without_gpu_count=sum(p.jobs_without_gpu_count for p in parts),
        node_seconds_without_gpu_count=sum(p.node_seconds_without_gpu_count for p in parts),
        measured_lost_jobs=sum(p.measured_lost_jobs for p in parts),
        estimated_lost_jobs=sum(p.estimated_lost_jobs for p in parts),
        overhead_measured=first.overhead_measured,
        overhead_estimated_runs=tuple(
            dict.fromkeys(r for p in parts for r in p.overhead_estimated_runs)
        ),
        divergence_evidence=first.divergence_evidence,
        segments=united(lambda p: p.segments),
        capacity=united(lambda p: p.capacity),
        jobs=united(lambda p: p.jobs),
        down=united(lambda p: p.down),
        utilization=combined_summaries([p.utilization for p in parts]),
    )


def _allocated_both_ways(totals: dict[str, float], allocations: ir.Table) -> float:
    """Allocated GPU-seconds summed by job; they must equal the same summed by node."""
    allocated_by_job = sum(v for k, v in totals.items() if "." not in k and k != Category.DOWN)
    allocated_by_node = _sum_gpu_s(allocations, None)
    if not _close(allocated_by_job, allocated_by_node):
        raise ConservationError(
            f"allocated GPU-seconds differ by job ({allocated_by_job:.3f}) and by node "
            f"({allocated_by_node:.3f})",
            hint="a bug in the ledger: please report it with the input files",
        )
    return allocated_by_job


def _move_idle(totals: dict[str, float], summary: UtilizationSummary) -> float:
    """Take measured-idle job time out of its categories into ``idle.allocated``; its total."""
    for key, value in summary.moved.items():
        totals[key] = totals.get(key, 0.0) - value
    totals[IDLE_ALLOCATED] = summary.idle_allocated_gpu_seconds
    return summary.idle_allocated_gpu_seconds


def _utilization(
    backend: ibis.BaseBackend,
    jobs: ir.Table,
    segments_jobs: ir.Table,
    window: Window,
    threshold: float,
) -> Utilization:
    """The samples attributed at ingest, their activity per category, and the idle moves."""
    # Stored for the window (a job's GPUs at one instant together): the summary reads it once,
    # the cut again.
    groups = materialize(
        backend,
        "gy_sample_groups",
        window_groups(backend, jobs, window.start_s, window.end_s, threshold),
    )
    # Not stored: the plain report reads it once (the summary); breakdowns read it again.
    cut = on_segments(groups, segments_jobs)
    summary = summarize(groups, cut, threshold)
    segments = idle_segments(cut, list(segments_jobs.columns))
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


def _swept(
    backend: ibis.BaseBackend, allocations: ir.Table, islands: ir.Table, capacity: ir.Table
) -> ir.Table:
    """The per-node sweep: a streaming scan where results stream cheaply to this process
    (embedded DuckDB), window functions over node buckets where the engine spreads them (Spark)."""
    if backend.name == "duckdb":
        return scan_sweep(backend, sweep_changes(allocations, islands, capacity), capacity)
    # Read twice by the sweep (islands open and close): once, not once per read.
    islands = reused_on_spark(backend, "gy_islands", islands)
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
    units = exact_sum((table.end_s - table.start_s).cast("float64") * gpus)
    return gpu_seconds(units.to_pyarrow().as_py())


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
        gpu_s=exact_sum(gpu_s), lost_jobs=lineage_lost.cast("int64").sum()
    )
    totals: dict[str, float] = {}
    lost_jobs: dict[bool, int] = {}
    rows = by_cat.to_pyarrow().to_pylist()
    # Summed in one order on every engine (the groups come back in any order).
    for row in sorted(
        rows, key=lambda r: (r["category"], r["subcategory"] or "", bool(r["measured"]))
    ):
        category, sub, value = row["category"], row["subcategory"], gpu_seconds(row["gpu_s"])
        totals[category] = totals.get(category, 0.0) + value
        if sub is not None:
            totals[f"{category}.{sub}"] = totals.get(f"{category}.{sub}", 0.0) + value
        measured = bool(row["measured"])
        lost_jobs[measured] = lost_jobs.get(measured, 0) + int(row["lost_jobs"] or 0)
    return totals, lost_jobs


def _check_conservation(
    installed: float, categories: dict[Category, float], subcategories: dict[str, float]
) -> None:
    """Every GPU-second in one category, none below zero: else say which is wrong, by how much."""
    every = {**{str(c): v for c, v in categories.items()}, **subcategories}
    negative = {k: v for k, v in every.items() if v < -_TOLERANCE_GPU_S}
    if negative:
        key = min(negative, key=lambda k: negative[k])
        raise ConservationError(
            f"{'subcategory' if '.' in key else 'category'} {key} is {negative[key]:.3f} "
            f"GPU-seconds, {-negative[key]:.3f} below zero (installed {installed:.3f}; "
            + ", ".join(f"{k}={v:.3f}" for k, v in categories.items())
            + ")",
            hint="a bug in the ledger or contradictory inputs; please report it with the files",
        )
    total = sum(categories.values())
    if not _close(total, installed):
        raise ConservationError(
            f"categories sum to {total:.3f} GPU-seconds but installed is {installed:.3f}, "
            f"{total - installed:+.3f} off: "
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
            hint="give ingest.events in the long format (its ClusterNodes say when nodes were in "
            "the cluster), or an ingest.nodes inventory that lists them, or a window.since after "
            "they left; if the inventory is under another cluster name, ingest it with "
            "ingest.cluster NAME",
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
