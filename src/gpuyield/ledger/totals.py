"""The ledger's GPU-seconds per category: the segments' one aggregation, and idle as the rest.

Summed in one order on every engine (exact sums, then the groups sorted), so a store, DuckDB on
a lake and Spark give the same figures to the last digit. Measured-idle job time moves from its
job's category to ``idle.allocated`` after the allocated time is checked by job and by node.
"""

from __future__ import annotations

from dataclasses import dataclass

import ibis.expr.types as ir

from gpuyield.categories import IDLE_ALLOCATED, Category
from gpuyield.ledger.checks import LedgerFigures, allocated_both_ways, check_conservation
from gpuyield.ledger.sums import exact_sum, gpu_seconds
from gpuyield.ledger.utilization import UtilizationSummary


@dataclass(frozen=True, kw_only=True, slots=True)
class Totals:
    """Every installed GPU-second of the window in one category, checked."""

    categories: dict[Category, float]
    """GPU-seconds per category (every member, in report order)."""
    subcategories: dict[str, float]
    """GPU-seconds per ``category.subcategory``."""
    measured_lost_jobs: int
    """Lineage jobs whose lost progress came from telemetry."""
    estimated_lost_jobs: int
    """Lineage jobs whose lost progress was estimated."""


def ledger_totals(
    segments: ir.Table,
    lineage_runs: list[str],
    figures: LedgerFigures,
    utilization: UtilizationSummary | None,
) -> Totals:
    """The segments' GPU-seconds per category (before measured idle moves: their allocated time
    must equal the allocations'), idle what no job held plus what jobs held idle."""
    sums = _segment_sums(segments, lineage_runs)
    by_key = sums.gpu_seconds
    allocated_by_job = allocated_both_ways(by_key, figures.allocated_by_node_gpu_seconds)
    idle_allocated = 0.0 if utilization is None else _move_idle(by_key, utilization)
    installed = figures.installed_gpu_seconds
    return Totals(
        categories=_categories(by_key, installed, allocated_by_job, idle_allocated),
        subcategories={k: v for k, v in by_key.items() if "." in k},
        measured_lost_jobs=sums.lost_jobs.get(True, 0),
        estimated_lost_jobs=sums.lost_jobs.get(False, 0),
    )


@dataclass(frozen=True, kw_only=True, slots=True)
class _SegmentSums:
    gpu_seconds: dict[str, float]
    """Per category and per ``category.subcategory``."""
    lost_jobs: dict[bool, int]
    """Lineage jobs that lost progress, by whether telemetry measured it."""


def _categories(
    totals: dict[str, float], installed: float, allocated_by_job: float, idle_allocated: float
) -> dict[Category, float]:
    """Every category's GPU-seconds; idle is what no job held plus what jobs held idle."""
    categories = {c: totals.get(c.value, 0.0) for c in Category}
    unallocated = installed - categories[Category.DOWN] - allocated_by_job
    categories[Category.IDLE] = unallocated + idle_allocated
    subcategories = {k: v for k, v in totals.items() if "." in k}
    check_conservation(installed, categories, subcategories)
    return categories


def _move_idle(totals: dict[str, float], summary: UtilizationSummary) -> float:
    """Take measured-idle job time out of its categories into ``idle.allocated``; its total."""
    for key, value in summary.moved.items():
        totals[key] = totals.get(key, 0.0) - value
    totals[IDLE_ALLOCATED] = summary.idle_allocated_gpu_seconds
    return summary.idle_allocated_gpu_seconds


def _segment_sums(segments: ir.Table, lineage_runs: list[str]) -> _SegmentSums:
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
    return _SegmentSums(gpu_seconds=totals, lost_jobs=lost_jobs)
