"""The ledger's checks: every GPU-second in exactly one category, none below zero, the same
allocated time by job and by node, every node a job held known, no node above its GPUs.

Each failure is a ``ConservationError`` or ``DataConsistencyError`` saying which number is wrong
and by how much: a bug in the ledger or contradictory inputs, never silently rounded away.

The sums and counts the checks need (``LedgerFigures``) are one query: on Spark every query is
seconds of planning and scheduling whatever its size, and a report ran one per figure. Only a
failed check asks again, for the names its message gives.
"""

from __future__ import annotations

from dataclasses import dataclass

import ibis.expr.types as ir

from gpuyield.categories import Category
from gpuyield.errors import ConservationError, DataConsistencyError
from gpuyield.ledger.down import above_capacity, over_capacity
from gpuyield.ledger.sums import exact_sum, gpu_seconds

# GPU-seconds are sums of float products; differences below this are rounding, not accounting.
TOLERANCE_GPU_S = 1e-3


@dataclass(frozen=True, kw_only=True, slots=True)
class LedgerFigures:
    """The ledger's sums beside its categories, and the counts its checks look at."""

    installed_gpu_seconds: float
    """GPUs x seconds of installed capacity in the window."""
    allocated_by_node_gpu_seconds: float
    """GPU-seconds jobs held, summed over the per-node allocations."""
    jobs_without_gpu_count: int
    """Jobs in the window whose GPU count is unknown."""
    node_seconds_without_gpu_count: float
    """Node-seconds of those jobs."""
    unknown_node_allocations: int
    """Allocations on nodes missing from the inventory (``check_nodes_known`` names them)."""
    over_capacity_intervals: int
    """Intervals a node held more GPUs than it has (``check_node_peaks`` names the nodes)."""


def checked_figures(
    capacity: ir.Table, allocations: ir.Table, swept: ir.Table, jobs: ir.Table
) -> LedgerFigures:
    """The figures in one query, then the checks on them: every node a job held is known (else
    a ``DataConsistencyError`` naming some), none above its GPUs at any instant."""
    cap_s = (capacity.end_s - capacity.start_s).cast("float64") * capacity.num_gpus.cast("float64")
    alloc_s = (allocations.end_s - allocations.start_s).cast("float64") * allocations.gpus
    unknown = jobs.filter(jobs.num_gpus.isnull())
    over = swept.filter(above_capacity(swept))
    row = (
        capacity.aggregate(installed=exact_sum(cap_s))
        .cross_join(
            allocations.aggregate(
                allocated=exact_sum(alloc_s),
                unknown_nodes=allocations.node_id.isnull().cast("int64").sum(),
            )
        )
        .cross_join(
            unknown.aggregate(
                n=unknown.count(),
                node_s=(
                    (unknown.clip_end_s - unknown.clip_start_s) * unknown.num_nodes.fill_null(1)
                ).sum(),
            )
        )
        .cross_join(over.aggregate(over=over.count()))
        .to_pyarrow()
        .to_pylist()[0]
    )
    figures = LedgerFigures(
        installed_gpu_seconds=gpu_seconds(row["installed"]),
        allocated_by_node_gpu_seconds=gpu_seconds(row["allocated"]),
        jobs_without_gpu_count=int(row["n"]),
        node_seconds_without_gpu_count=float(row["node_s"] or 0.0),
        unknown_node_allocations=int(row["unknown_nodes"] or 0),
        over_capacity_intervals=int(row["over"]),
    )
    if figures.unknown_node_allocations:
        check_nodes_known(allocations)
    if figures.over_capacity_intervals:
        check_node_peaks(swept)
    return figures


def allocated_both_ways(totals: dict[str, float], allocated_by_node: float) -> float:
    """Allocated GPU-seconds summed by job; they must equal the same summed by node."""
    allocated_by_job = sum(v for k, v in totals.items() if "." not in k and k != Category.DOWN)
    if not close(allocated_by_job, allocated_by_node):
        raise ConservationError(
            f"allocated GPU-seconds differ by job ({allocated_by_job:.3f}) and by node "
            f"({allocated_by_node:.3f})",
            hint="a bug in the ledger: please report it with the input files",
        )
    return allocated_by_job


def check_conservation(
    installed: float, categories: dict[Category, float], subcategories: dict[str, float]
) -> None:
    """Every GPU-second in one category, none below zero: else say which is wrong, by how much."""
    every = {**{str(c): v for c, v in categories.items()}, **subcategories}
    negative = {k: v for k, v in every.items() if v < -TOLERANCE_GPU_S}
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
    if not close(total, installed):
        raise ConservationError(
            f"categories sum to {total:.3f} GPU-seconds but installed is {installed:.3f}, "
            f"{total - installed:+.3f} off: "
            + ", ".join(f"{k}={v:.3f}" for k, v in categories.items()),
            hint="a bug in the ledger or contradictory inputs; please report it with the files",
        )


def check_nodes_known(allocations: ir.Table) -> None:
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


def check_node_peaks(swept: ir.Table) -> None:
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


def close(a: float, b: float) -> bool:
    return abs(a - b) <= TOLERANCE_GPU_S + 1e-9 * max(abs(a), abs(b))
