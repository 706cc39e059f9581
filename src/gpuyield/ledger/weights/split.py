"""The ledger's GPU-seconds split by class of GPU (one GPU model at one price), category by
category, each class conserved on its own.

A class's installed time is its nodes' capacity; its down time, its nodes' down segments; a job's
time goes to the classes of the nodes it held, in proportion to its GPUs there (a job on 8 H100s
and 4 A100s is two thirds H100); idle is what each class has left, as in the ledger. The classes
then add up to the ledger's own totals, category by category (checked).
"""

from __future__ import annotations

from dataclasses import dataclass

import ibis
import ibis.expr.types as ir
import pyarrow as pa

from gpuyield.categories import Category
from gpuyield.errors import ConservationError
from gpuyield.ledger.down import job_node_allocations
from gpuyield.ledger.ledger import Ledger

_TOLERANCE_GPU_S = 1e-3


@dataclass(frozen=True, kw_only=True, slots=True)
class ClassTotals:
    """GPU-seconds of one class of GPU, per category; categories sum to ``installed_gpu_seconds``."""

    installed_gpu_seconds: float
    categories: dict[str, float]
    subcategories: dict[str, float]


def node_class_table(classes: dict[tuple[str, str], int]) -> ir.Table:
    """``cluster, node, class_id`` as a table the engine can join."""
    keys = sorted(classes)
    return ibis.memtable(
        pa.table(
            {
                "cluster": pa.array([c for c, _ in keys], pa.string()),
                "node": pa.array([n for _, n in keys], pa.string()),
                "class_id": pa.array([classes[k] for k in keys], pa.int64()),
            }
        )
    )


def job_shares(backend: ibis.BaseBackend, ledger: Ledger, node_class: ir.Table) -> ir.Table:
    """``job_key, class_id, share``: the part of each job's GPUs on nodes of each class."""
    ids = ledger.capacity.select("cluster", "node").distinct()
    ids = ids.mutate(node_id=ibis.row_number().over(order_by=["cluster", "node"]))
    alloc = job_node_allocations(backend, ledger.jobs, ids)
    alloc = alloc.join(ids, "node_id").select("job_key", "gpus", cluster=ids.cluster, node=ids.node)
    alloc = alloc.join(node_class, ["cluster", "node"])
    per_class = alloc.group_by(["job_key", "class_id"]).aggregate(gpus=alloc.gpus.sum())
    total = per_class.gpus.sum().over(ibis.window(group_by="job_key"))
    return per_class.select("job_key", "class_id", share=per_class.gpus / total)


def split_by_class(
    backend: ibis.BaseBackend, ledger: Ledger, node_class: ir.Table
) -> dict[int, ClassTotals]:
    """Every class's GPU-seconds per category and subcategory, checked against the ledger."""
    installed = _installed(ledger, node_class)
    used: dict[int, dict[str, float]] = {c: {} for c in installed}
    # Down time first, then jobs': the order the sums were always taken in.
    for part in (_down(ledger, node_class), _jobs(backend, ledger, node_class)):
        for row in part.to_pyarrow().to_pylist():
            cats = used.setdefault(int(row["class_id"]), {})
            for key in _keys(row["category"], row["subcategory"]):
                cats[key] = cats.get(key, 0.0) + float(row["gpu_s"])
    totals = {}
    for class_id, cats in used.items():
        installed_s = installed.get(class_id, 0.0)
        categories = {c.value: cats.get(c.value, 0.0) for c in Category}
        # Idle is what the class has left, as in the ledger (which adds allocated-idle to it).
        categories[Category.IDLE.value] += installed_s - sum(categories.values())
        totals[class_id] = ClassTotals(
            installed_gpu_seconds=installed_s,
            categories=categories,
            subcategories={k: v for k, v in sorted(cats.items()) if "." in k},
        )
    _check(ledger, totals)
    return totals


def _keys(category: str, subcategory: str | None) -> list[str]:
    return [category] if subcategory is None else [category, f"{category}.{subcategory}"]


def _installed(ledger: Ledger, node_class: ir.Table) -> dict[int, float]:
    capacity = ledger.capacity.join(node_class, ["cluster", "node"])
    gpu_s = (capacity.end_s - capacity.start_s).cast("float64") * capacity.num_gpus
    rows = capacity.group_by("class_id").aggregate(gpu_s=gpu_s.sum()).to_pyarrow().to_pylist()
    return {int(r["class_id"]): float(r["gpu_s"] or 0.0) for r in rows}


def _down(ledger: Ledger, node_class: ir.Table) -> ir.Table:
    """``class_id, category, subcategory, gpu_s``: down GPU-seconds per class."""
    down = ledger.down.join(node_class, ["cluster", "node"])
    gpu_s = ((down.end_s - down.start_s) * down.gpus).sum()
    return down.group_by(["class_id", "category", "subcategory"]).aggregate(gpu_s=gpu_s)


def _jobs(backend: ibis.BaseBackend, ledger: Ledger, node_class: ir.Table) -> ir.Table:
    """Job segments (and allocated-idle moves) per class: each job's by its shares (columns as
    ``_down``'s)."""
    segments = ledger.segments.filter(ledger.segments.job_key.notnull())
    gpu_s = (segments.end_s - segments.start_s) * segments.gpus
    per_job = segments.group_by(["job_key", "category", "subcategory"]).aggregate(gpu_s=gpu_s.sum())
    shares = job_shares(backend, ledger, node_class)
    joined = per_job.join(shares, "job_key")
    return joined.group_by(["class_id", "category", "subcategory"]).aggregate(
        gpu_s=(joined.gpu_s * joined.share).sum()
    )


def _check(ledger: Ledger, totals: dict[int, ClassTotals]) -> None:
    """The classes must add up to the ledger, category by category."""
    keys = {
        "installed": ledger.installed_gpu_seconds,
        **{c.value: v for c, v in ledger.categories.items()},
    }
    for key, expected in keys.items():
        got = sum(
            t.installed_gpu_seconds if key == "installed" else t.categories[key]
            for t in totals.values()
        )
        if abs(got - expected) > _TOLERANCE_GPU_S + 1e-9 * abs(expected):
            raise ConservationError(
                f"{key}: GPU-seconds by GPU type sum to {got:.3f}, the ledger has {expected:.3f}",
                hint="a bug in the weighting by GPU type; please report it with the input files",
            )
