"""The yield report: the ledger's totals, metrics and data quality, as a typed record and as JSON."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import ibis

from gpuyield.categories import ALLOCATED, SUBCATEGORIES, TYPICAL_LAB_SHARES, Category
from gpuyield.ledger import Ledger, compute_ledger
from gpuyield.ledger.coverage import CoverageSpan
from gpuyield.ledger.sums import json_number
from gpuyield.ledger.utilization import UtilizationSummary
from gpuyield.report.source import ReportSource, ledger_backend
from gpuyield.times import iso_utc as iso

if TYPE_CHECKING:
    import duckdb

    from gpuyield.ledger.ladder import SkippedRungWaste
    from gpuyield.ledger.weights import FleetYield
    from gpuyield.report.breakdown import Breakdown

# How the essay's "typical lab" buckets map onto ledger categories, for the side-by-side column.
ESSAY_BUCKETS: dict[str, tuple[Category, ...]] = {
    "unavailable": (Category.DOWN,),
    "idle": (Category.IDLE,),
    "bad runs": (Category.CANCELLED,),
    "failures and divergence": (Category.FAILED, Category.DIVERGED),
    "experiments": (Category.EXPERIMENT,),
    "released": (Category.RELEASED,),
}


@dataclass(frozen=True, kw_only=True, slots=True)
class IngestSource:
    """One ingest the report was computed from: the file read, its SHA-256, and its row counts."""

    ingest_id: int
    source: str
    """What was read (``sacct``, ``events``, ``manifest``, ...)."""
    path: str
    sha256: str
    rows_read: int | None
    rows_rejected: int | None
    rows_skipped: int | None

    def to_dict(self) -> dict[str, Any]:
        """The ``--json`` shape of one ``sources`` entry (docs/contracts.md)."""
        return {name: getattr(self, name) for name in _SOURCE_COLUMNS}


@dataclass(frozen=True, kw_only=True, slots=True)
class EssayShare:
    """One of the essay's buckets: this cluster's share of installed time beside the essay's."""

    bucket: str
    """The essay's name for it ("unavailable", "bad runs", ...)."""
    share: float | None
    """This cluster's share of installed GPU-time (None when nothing is installed)."""
    typical_share: float
    """The essay's typical lab."""


@dataclass(frozen=True, kw_only=True, slots=True)
class YieldReport:
    """Everything ``gpuyield report`` shows."""

    window_start_s: int
    """Window start (epoch seconds, UTC)."""
    window_end_s: int
    """Window end (exclusive)."""
    installed_gpu_seconds: float
    """Installed capacity in the window."""
    categories: dict[Category, float]
    """GPU-seconds per category (sums to installed)."""
    subcategories: dict[str, float]
    """GPU-seconds per ``category.subcategory``."""
    rejected_rows: int
    """Input rows rejected by lenient ingests."""
    jobs_without_gpu_count: int
    """Jobs that ran but whose GPU count is unknown."""
    figures: dict[str, str]
    """How each derived figure was obtained: measured, estimated, not measured."""
    warnings: tuple[str, ...] = field(default=())
    """Caveats about the window or the data."""
    sources: tuple[IngestSource, ...] = field(default=())
    """Provenance: every ingest (file, hash, rows read, rejected)."""
    divergence_evidence: tuple[dict[str, Any], ...] = field(default=())
    """Divergence watch findings in run telemetry (step, kind, metric, value, threshold)."""
    waste_in_skipped_rungs: SkippedRungWaste | None = None
    """Waste of runs that skipped a ladder rung against the others (None: no ladder declared)."""
    coverage: tuple[CoverageSpan, ...] = field(default=())
    """The store's captured time per cluster."""
    not_captured: tuple[CoverageSpan, ...] = field(default=())
    """Gaps in the window (``allow_gaps``): left out of installed, never idle."""
    activity: UtilizationSummary | None = None
    """Measured GPU activity; None when no utilization samples were ingested."""
    fleet: FleetYield | None = None
    """The ledger by GPU model and weighted (H100-equivalents, FLOPs, dollars): ledger/weights."""

    @property
    def allocated_gpu_seconds(self) -> float:
        """GPU-seconds held by jobs."""
        return sum(self.categories[c] for c in ALLOCATED)

    @property
    def yield_(self) -> float | None:
        """Released / installed."""
        return _ratio(self.categories[Category.RELEASED], self.installed_gpu_seconds)

    @property
    def utilization(self) -> float | None:
        """Allocated / (installed - down)."""
        return _ratio(
            self.allocated_gpu_seconds, self.installed_gpu_seconds - self.categories[Category.DOWN]
        )

    @property
    def goodput(self) -> float | None:
        """Released / allocated."""
        return _ratio(self.categories[Category.RELEASED], self.allocated_gpu_seconds)

    def subcategories_shown(self) -> dict[str, float | int]:
        """Every subcategory, zeros included, sorted, as ``--json`` prints its GPU-seconds."""
        return {
            k: json_number(self.subcategories.get(k, 0.0))
            for k in sorted({*SUBCATEGORIES, *self.subcategories})
        }

    def essay_comparison(self) -> list[EssayShare]:
        """This cluster beside the essay's typical lab, bucket by bucket."""
        return [
            EssayShare(
                bucket=bucket,
                share=_ratio(sum(self.categories[c] for c in cats), self.installed_gpu_seconds),
                typical_share=TYPICAL_LAB_SHARES[bucket],
            )
            for bucket, cats in ESSAY_BUCKETS.items()
        ]

    def to_dict(self) -> dict[str, Any]:
        """The ``--json`` shape (docs/contracts.md)."""
        return {
            "window": {"start": iso(self.window_start_s), "end": iso(self.window_end_s)},
            "installed_gpu_seconds": json_number(self.installed_gpu_seconds),
            "categories": {k.value: json_number(v) for k, v in self.categories.items()},
            "subcategories": self.subcategories_shown(),
            "yield": self.yield_,
            "utilization": self.utilization,
            "goodput": self.goodput,
            "rejected_rows": self.rejected_rows,
            "jobs_without_gpu_count": self.jobs_without_gpu_count,
            "allocated_gpu_seconds": json_number(self.allocated_gpu_seconds),
            "figures": self.figures,
            "typical_lab": {
                e.bucket: {"share": e.share, "typical": e.typical_share}
                for e in self.essay_comparison()
            },
            "warnings": list(self.warnings),
            "sources": [s.to_dict() for s in self.sources],
            "divergence_evidence": list(self.divergence_evidence),
            # Only with a ladder in the manifest: reports without one keep their shape.
            **(
                {"waste_in_skipped_rungs": self.waste_in_skipped_rungs.to_dict()}
                if self.waste_in_skipped_rungs is not None
                else {}
            ),
            "coverage": [c.to_dict() for c in self.coverage],
            "not_captured": [
                {**g.to_dict(), "duration_s": g.duration_s} for g in self.not_captured
            ],
            # Only with samples: a store without them reports exactly what it did before.
            **({} if self.activity is None else {"gpu_activity": self._activity_dict()}),
            **({} if self.fleet is None else self.fleet.to_dict()),
        }

    def category_before_idle(self, category: str) -> float:
        """A category's GPU-seconds before measured-idle time moved out of it (``category``: a
        ``Category`` or its value, as the utilization summary keys it)."""
        moved = self.activity.moved.get(category, 0.0) if self.activity else 0.0
        return self.categories[Category(category)] + moved

    def measured_share(self, category: str) -> float | None:
        """The share of a category's time (before measured idle moved out) that utilization
        samples measured (None when it held no time)."""
        assert self.activity is not None
        held = self.category_before_idle(category)
        return _ratio(self.activity.activity[category].measured_gpu_seconds, held)

    def _activity_dict(self) -> dict[str, Any]:
        """The ``gpu_activity`` block of the JSON (docs/contracts.md)."""
        util = self.activity
        assert util is not None
        per_category = {}
        for category, a in util.activity.items():
            per_category[category] = {
                "measured_gpu_seconds": json_number(a.measured_gpu_seconds),
                "measured_share": self.measured_share(category),
                "idle_gpu_seconds": json_number(a.idle_gpu_seconds),
                "active_share": a.active_share,
                "tensor_share": a.tensor_share,
            }
        samples = util.samples
        return {
            "idle_threshold": util.threshold,
            "idle_allocated_gpu_seconds": json_number(util.idle_allocated_gpu_seconds),
            "samples": {k: getattr(samples, k) for k in SAMPLE_FIELDS},
            "categories": per_category,
        }


def _ratio(num: float, den: float) -> float | None:
    return None if den <= 0 else num / den


def _overhead_figure(measured: bool, estimated_runs: tuple[str, ...]) -> str:
    """How overhead was found: measured from telemetry, estimated from run_settings, or neither."""
    if estimated_runs:
        runs = ", ".join(estimated_runs)
        how = "measured where run telemetry exists; " if measured else ""
        return f"{how}estimated from run_settings (restart_s, checkpoint_save_s) for {runs}"
    return "measured" if measured else "not measured (no run telemetry)"


def report_from_ledger(ledger: Ledger, backend: ibis.BaseBackend | None = None) -> YieldReport:
    """Wrap a computed ledger with the data-quality and provenance facts of the tables it was
    computed from (``backend``: the ledger's own when None; a store or a lake, any engine)."""
    from gpuyield.ledger.ladder import analyse_ladder
    from gpuyield.ledger.weights import fleet_yield

    backend = backend if backend is not None else ledger.jobs._find_backend()
    rejected = int(backend.table("rejects").count().to_pyarrow().as_py())
    ingests = backend.table("ingests").select(*_SOURCE_COLUMNS).order_by("ingest_id")
    sources = tuple(IngestSource(**row) for row in ingests.to_pyarrow().to_pylist())
    ladder = analyse_ladder(ledger)
    fleet = fleet_yield(ledger)
    return YieldReport(
        window_start_s=ledger.window.start_s,
        window_end_s=ledger.window.end_s,
        installed_gpu_seconds=ledger.installed_gpu_seconds,
        categories=ledger.categories,
        subcategories=ledger.subcategories,
        rejected_rows=rejected,
        jobs_without_gpu_count=ledger.jobs_without_gpu_count,
        figures=_figures(ledger),
        warnings=ledger.window.warnings + fleet.warnings,
        divergence_evidence=ledger.divergence_evidence,
        waste_in_skipped_rungs=None if ladder is None else ladder.waste,
        coverage=ledger.window.coverage,
        not_captured=ledger.window.not_captured,
        activity=ledger.utilization,
        fleet=fleet,
        sources=sources,
    )


# How the utilization samples were attributed (``gpu_activity.samples``), in this order.
SAMPLE_FIELDS = (
    "total",
    "by_job_label",
    "by_gpu_index",
    "by_whole_node",
    "unallocated",
    "unattributed",
)

# What the report says of each ingest (``sources``), in this order.
_SOURCE_COLUMNS = (
    "ingest_id",
    "source",
    "path",
    "sha256",
    "rows_read",
    "rows_rejected",
    "rows_skipped",
)


def _figures(ledger: Ledger) -> dict[str, str]:
    """How each derived figure was obtained: measured, estimated, not measured."""
    lost = ledger.measured_lost_jobs, ledger.estimated_lost_jobs
    figures = {
        "overhead": _overhead_figure(ledger.overhead_measured, ledger.overhead_estimated_runs),
        "lost_progress": (
            "none lost"
            if not any(lost)
            else "measured"
            if not lost[1]
            else "estimated from run_settings (checkpoint_interval_s, restart_s)"
            if not lost[0]
            else f"measured for {lost[0]} jobs, estimated for {lost[1]}"
        ),
        "down": "from node events (sacctmgr show event)",
    }
    if ledger.utilization is not None:
        figures["gpu_activity"] = "measured (utilization samples)"
    return figures


def build_report(
    db: ReportSource,
    *,
    since_s: int | None = None,
    until_s: int | None = None,
    allow_gaps: bool = False,
) -> YieldReport:
    """Compute the ledger of the store at ``db`` (or of a lake) and summarise it."""
    from gpuyield.ledger.weights import several_classes

    with ledger_backend(db) as backend:
        ledger = compute_ledger(
            backend,
            since_s=since_s,
            until_s=until_s,
            allow_gaps=allow_gaps,
            keep_segments=several_classes(backend),
        )
        return report_from_ledger(ledger, backend)


@dataclass(frozen=True, kw_only=True, slots=True)
class ReportWithBreakdown:
    """A report and, when one was asked for, its breakdown: ``gpuyield report --by``."""

    report: YieldReport
    breakdown: Breakdown | None
    """None without ``by``."""

    def to_dict(self) -> dict[str, Any]:
        """The ``--json`` shape: the report's, plus ``breakdown`` when there is one."""
        data = self.report.to_dict()
        if self.breakdown is not None:
            data["breakdown"] = self.breakdown.to_dict()
        return data


def build_report_with_breakdown(
    db: ReportSource,
    *,
    since_s: int | None = None,
    until_s: int | None = None,
    by: str | None = None,
    top: int | None = None,
    allow_gaps: bool = False,
    con: duckdb.DuckDBPyConnection | None = None,
    weight: str = "gpu-seconds",
) -> ReportWithBreakdown:
    """The report and, when ``by`` is given, its breakdown (one ledger computation for both);
    with a ``weight`` other than GPU-seconds the breakdown is in its unit (report/weights.py).

    ``con``: a read-only connection to ``db`` the caller opened (and closes), e.g. to interrupt
    the computation from another thread."""
    from gpuyield.ledger.weights import several_classes
    from gpuyield.report.breakdown import breakdown
    from gpuyield.report.weights import unit_of, weighted_breakdown

    weighted = unit_of(weight) != "gpu_seconds"
    with ledger_backend(db, con=con) as backend:
        # One breakdown reads the segments once more: computing them again costs less than
        # storing them (10M jobs: --by account 16.3 s -> 8.8 s, 3.2 -> 2.1 GB, same output).
        # A fleet of several GPU classes reads them once more, for the split by class.
        ledger = compute_ledger(
            backend,
            since_s=since_s,
            until_s=until_s,
            allow_gaps=allow_gaps,
            keep_segments=several_classes(backend),
        )
        report = report_from_ledger(ledger, backend)
        rows = None
        if by is not None and weighted:
            assert report.fleet is not None
            rows = weighted_breakdown(ledger, report.fleet, by, weight, top=top)
        elif by is not None:
            rows = breakdown(ledger, by, top=top, backend=backend)
        return ReportWithBreakdown(report=report, breakdown=rows)
