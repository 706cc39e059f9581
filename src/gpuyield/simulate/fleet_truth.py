"""Truth by GPU type and weighted, for a typed fleet (``fleet.research_accelerator``, prices).

The lineage groups (partition ``train``) hold one GPU model at one price, the research nodes
(partitions ``research``) another; research jobs never run on lineage nodes in a typed fleet
(scenario.py refuses backfill there). So each group's ledger is the simulator's own booking of its
jobs and its nodes' down time, idle what is left of its capacity; weighted, each group counts
``peak / peak(h100-sxm)`` H100-equivalent seconds, ``peak x 1e12`` FLOPs and ``price / 3600``
dollars per GPU-second, from the same catalog the ledger reads.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from gpuyield.categories import Category
from gpuyield.estimate.catalog import get_accelerator
from gpuyield.simulate.cluster import SimulationResult
from gpuyield.simulate.fleet_types import is_typed, model_of
from gpuyield.simulate.records import Tally
from gpuyield.simulate.truth import book_down, book_research, lineage_allocated

REFERENCE = "h100-sxm"


@dataclass(frozen=True, kw_only=True, slots=True)
class GroupTruth:
    """One group of nodes (train or research): its model, price and GPU-seconds per category."""

    model: str
    usd_per_gpu_hour: float
    installed_gpu_seconds: int
    categories: dict[str, int]


@dataclass(frozen=True, kw_only=True, slots=True)
class FleetTruth:
    """``truth.json``'s ``by_gpu_type`` and ``weighted``, in the report's shape."""

    groups: tuple[GroupTruth, ...]
    priced: bool

    def to_dict(self) -> dict[str, Any]:
        """The report's ``by_gpu_type`` (installed, categories) and ``weighted`` (installed,
        categories, yield) for the units the fleet has."""
        by_type: dict[str, dict[str, Any]] = {}
        for group in self.groups:
            entry = by_type.setdefault(
                group.model,
                {"installed_gpu_seconds": 0, "categories": {c.value: 0 for c in Category}},
            )
            entry["installed_gpu_seconds"] += group.installed_gpu_seconds
            for key, value in group.categories.items():
                entry["categories"][key] += value
        reference = get_accelerator(REFERENCE).peak_tflops_bf16
        units = {
            "h100_equiv_seconds": lambda g: get_accelerator(g.model).peak_tflops_bf16 / reference,
            "flops": lambda g: get_accelerator(g.model).peak_tflops_bf16 * 1e12,
            **({"dollars": lambda g: g.usd_per_gpu_hour / 3600} if self.priced else {}),
        }
        return {
            "by_gpu_type": by_type,
            "weighted": {unit: self._weighted(weight).to_dict() for unit, weight in units.items()},
        }

    def _weighted(self, weight: Callable[[GroupTruth], float]) -> _Weighted:
        installed = sum(g.installed_gpu_seconds * weight(g) for g in self.groups)
        categories = {
            c.value: sum(g.categories[c.value] * weight(g) for g in self.groups) for c in Category
        }
        return _Weighted(installed=installed, categories=categories)


@dataclass(frozen=True, kw_only=True, slots=True)
class _Weighted:
    """The fleet's truth in one unit (H100-equivalent seconds, FLOPs or dollars)."""

    installed: float
    #: By category id.
    categories: dict[str, float]

    def to_dict(self) -> dict[str, Any]:
        released = self.categories[Category.RELEASED.value]
        return {
            "installed": self.installed,
            "categories": self.categories,
            "yield": released / self.installed if self.installed else None,
        }


def fleet_truth(result: SimulationResult) -> FleetTruth | None:
    """Truth per group of a typed fleet; None for an untyped one (truth.json keeps its shape)."""
    sc = result.scenario
    fleet = sc.fleet
    if not is_typed(fleet):
        return None
    window = sc.end_s - sc.start_s
    split = sc.group_nodes_total()
    train, research = Tally(), Tally()
    for run in result.lineage:
        train.merge(run.tally)
    used = {
        "train": sum(lineage_allocated(result)) + book_down(result, train, range(0, split)),
        "research": (book_research(result, research) if result.rows is not None else 0)
        + book_down(result, research, range(split, fleet.num_nodes)),
    }
    groups = []
    for name, tally, nodes in (
        ("train", train, split),
        ("research", research, fleet.num_nodes - split),
    ):
        installed = nodes * fleet.gpus_per_node * window
        tally.add(Category.IDLE.value, installed - used[name])
        is_research = name == "research"
        groups.append(
            GroupTruth(
                model=model_of(fleet, research=is_research),
                usd_per_gpu_hour=(
                    fleet.research_price_per_gpu_hour if is_research else fleet.price_per_gpu_hour
                ),
                installed_gpu_seconds=installed,
                categories={c.value: int(tally.categories.get(c.value, 0)) for c in Category},
            )
        )
    priced = bool(fleet.price_per_gpu_hour or fleet.research_price_per_gpu_hour)
    return FleetTruth(groups=tuple(g for g in groups if g.installed_gpu_seconds), priced=priced)
