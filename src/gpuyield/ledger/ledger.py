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

from gpuyield.categories import ALLOCATED, Category
from gpuyield.ledger.checks import checked_figures
from gpuyield.ledger.coverage import CoverageGapError, captured_parts
from gpuyield.ledger.down import (
    down_islands,
    down_segments,
    job_node_allocations,
    node_ids,
    node_sweep,
    sweep_changes,
)
from gpuyield.ledger.estimated import estimated_overhead_intervals, estimated_runs
from gpuyield.ledger.jobs import SEGMENT_JOB_ATTRIBUTES, clipped_jobs, job_segments
from gpuyield.ledger.plan import materialize, reused_on_spark
from gpuyield.ledger.scan import scan_sweep
from gpuyield.ledger.telemetry import (
    has_telemetry,
    measured_lost_progress,
    overhead_intervals,
    with_detected_divergence,
)
from gpuyield.ledger.totals import ledger_totals
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


@dataclass(frozen=True, kw_only=True, slots=True)
class _Progress:
    lost: ir.Table | None
    """Measured lost progress (telemetry), or None."""
    overhead: ir.Table | None
    """Overhead intervals, measured and estimated, or None."""
    estimated: bool
    """True when some lineage job's overhead was estimated (no telemetry for it)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class _Inputs:
    """What one window's segments are computed from."""

    window: Window
    """The window, with what the capacity's reading warned of."""
    manifest: Manifest
    """The manifest, with the runs telemetry found diverged."""
    evidence: tuple[dict[str, object], ...]
    """What the divergence watch found."""
    telemetry: bool
    """True when the store holds run telemetry."""
    capacity: ir.Table
    """Installed GPUs per node over time."""
    jobs: ir.Table
    """Jobs clipped to the window."""
    allocations: ir.Table
    """Each job on each of its nodes."""
    progress: _Progress
    """Lost progress and overhead of lineage jobs."""

    def job_segments(self, backend: ibis.BaseBackend) -> ir.Table:
        """The jobs' categorised segments (``jobs.job_segments``)."""
        return job_segments(
            backend,
            self.jobs,
            self.allocations,
            self.manifest,
            self.window,
            self.progress.lost,
            self.progress.overhead,
            node_ids=node_ids(self.capacity),
        )


def _inputs(
    backend: ibis.BaseBackend, window: Window, manifest: Manifest, *, keep_segments: bool
) -> _Inputs:
    """The window's capacity, jobs and allocations, and what telemetry says diverged."""
    evidence: list[dict[str, object]] = []
    telemetry = has_telemetry(backend)
    if telemetry:
        detected = with_detected_divergence(backend, manifest)
        manifest, evidence = detected.manifest, detected.evidence
    node_gpus = node_capacity(backend, window)
    window = dataclasses.replace(window, warnings=window.warnings + node_gpus.warnings)
    capacity = materialize(backend, "gy_capacity", node_gpus.table)
    jobs = clipped_jobs(backend, window, manifest)
    if keep_segments or telemetry:
        jobs = materialize(backend, "gy_jobs", jobs)
    allocations = job_node_allocations(backend, jobs, capacity)
    return _Inputs(
        window=window,
        manifest=manifest,
        evidence=tuple(evidence),
        telemetry=telemetry,
        capacity=capacity,
        jobs=jobs,
        allocations=materialize(backend, "gy_allocations", allocations),
        progress=_progress(backend, jobs, manifest, telemetry=telemetry),
    )


def _compute_window(
    backend: ibis.BaseBackend,
    window: Window,
    manifest: Manifest,
    *,
    keep_segments: bool,
    idle_threshold: float,
) -> Ledger:
    inputs = _inputs(backend, window, manifest, keep_segments=keep_segments)
    window, manifest, jobs, capacity = inputs.window, inputs.manifest, inputs.jobs, inputs.capacity
    segments_jobs = inputs.job_segments(backend)
    util = None
    if has_samples(backend):  # the job segments are read twice then: once for the samples' cut
        segments_jobs = materialize(backend, "gy_job_segments", segments_jobs)
        util = _utilization(backend, jobs, segments_jobs, window, idle_threshold)
    swept = _swept(backend, inputs.allocations, down_islands(backend, capacity, window), capacity)
    figures = checked_figures(capacity, inputs.allocations, swept, jobs)
    down = down_segments(swept)
    base = segments_jobs.union(down.select(*_down_columns()))
    segments = base if util is None else base.union(util.segments)
    if keep_segments:
        segments = _kept_segments(backend, segments, jobs)
    totals = ledger_totals(
        segments if util is None else base,  # the idle moves come from the summary
        sorted(manifest.lineage_runs),
        figures,
        None if util is None else util.summary,
    )
    return Ledger(
        window=window,
        manifest=manifest,
        installed_gpu_seconds=figures.installed_gpu_seconds,
        categories=totals.categories,
        subcategories=totals.subcategories,
        jobs_without_gpu_count=figures.jobs_without_gpu_count,
        node_seconds_without_gpu_count=figures.node_seconds_without_gpu_count,
        measured_lost_jobs=totals.measured_lost_jobs,
        estimated_lost_jobs=totals.estimated_lost_jobs,
        overhead_measured=inputs.telemetry,
        overhead_estimated_runs=tuple(estimated_runs(manifest))
        if inputs.progress.estimated
        else (),
        divergence_evidence=inputs.evidence,
        segments=segments,
        capacity=capacity,
        jobs=jobs,
        down=down,
        utilization=None if util is None else util.summary,
    )


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
    sweep = node_sweep(allocations, islands, capacity, per_node=True)
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
