"""The ledger by GPU type, and weighted: H100-equivalent seconds, FLOPs paid for, dollars.

A GPU-second of model M weighs ``peak(M) / peak(h100-sxm)`` H100-equivalent seconds and
``peak(M) x 1e12`` FLOPs (dense BF16 peaks from the estimator's accelerator catalog, the one source
of them), and ``price / 3600`` dollars (the manifest's ``[prices]``). Each weighted ledger is the
GPU-second ledger with every class of GPU multiplied by its weight, so each is conserved as that
one is: its categories sum to its installed total. GPUs whose model (or price) is not known are
not weighted and are named, never guessed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import ibis

from gpuyield.categories import Category
from gpuyield.errors import ConservationError
from gpuyield.estimate.catalog import Accelerator, get_accelerator
from gpuyield.ledger.ledger import Ledger, stored_manifest_of
from gpuyield.ledger.sums import json_number
from gpuyield.ledger.weights.models import NodeGpu, fleet_models
from gpuyield.ledger.weights.split import ClassTotals, node_class_table, split_by_class

REFERENCE = "h100-sxm"
WEIGHTS = ("gpu-seconds", "h100-equiv", "flops", "dollars")
"""The weights `report --weight` takes."""
#: The ``weighted`` keys of ``report --json``, by ``--weight`` name.
UNITS = {
    "gpu-seconds": "gpu_seconds",
    "h100-equiv": "h100_equiv_seconds",
    "flops": "flops",
    "dollars": "dollars",
}
WASTE = (Category.DOWN, Category.IDLE, Category.FAILED, Category.CANCELLED, Category.DIVERGED)


@dataclass(frozen=True, kw_only=True, slots=True)
class TypePrice:
    """One price the GPUs of a type were charged at."""

    usd_per_gpu_hour: float
    source: str
    """``prices 'h100'`` or ``prices.partitions.P 'h100'``: the table and the key that matched."""
    installed_gpu_seconds: float


@dataclass(frozen=True, kw_only=True, slots=True)
class ChargedPrice:
    """A price a GPU type's GPU-seconds were weighted by in dollars, and where it came from."""

    usd_per_gpu_hour: float
    source: str
    """``prices 'h100'`` or ``prices.partitions.P 'h100'``: the table and the key that matched."""

    def to_dict(self) -> dict[str, Any]:
        """One entry of ``weights.TYPE`` in the dollars ledger (docs/contracts.md)."""
        return {"usd_per_gpu_hour": self.usd_per_gpu_hour, "source": self.source}


Weight = float | list[ChargedPrice]
"""Of one GPU type: its weight per GPU-second, or in dollars the prices its GPUs were charged."""


@dataclass(frozen=True, kw_only=True, slots=True)
class GpuType:
    """The ledger of one GPU type (a catalog model, or a name the catalog lacks)."""

    key: str
    accelerator: Accelerator | None
    slurm_types: tuple[str, ...]
    """GRES types Slurm names these GPUs by."""
    model_sources: tuple[str, ...]
    """Where the model came from (one line per distinct source)."""
    nodes: int
    installed_gpu_seconds: float
    categories: dict[str, float]
    subcategories: dict[str, float]
    prices: tuple[TypePrice, ...]

    @property
    def h100_equiv(self) -> float | None:
        """Dense BF16 peak relative to the H100 SXM's; None for a model the catalog lacks."""
        if self.accelerator is None:
            return None
        return self.accelerator.peak_tflops_bf16 / get_accelerator(REFERENCE).peak_tflops_bf16

    def to_dict(self) -> dict[str, Any]:
        """The ``by_gpu_type`` entry of ``report --json`` (docs/contracts.md)."""
        acc = self.accelerator
        return {
            "model": None if acc is None else acc.id,
            "name": None if acc is None else acc.name,
            "slurm_types": list(self.slurm_types),
            "model_source": list(self.model_sources),
            "nodes": self.nodes,
            "peak_tflops_bf16": None if acc is None else acc.peak_tflops_bf16,
            "peak_tflops_fp8": None if acc is None else acc.peak_tflops_fp8,
            "peak_source": None if acc is None else acc.source,
            "h100_equiv": self.h100_equiv,
            "prices": [
                {
                    "usd_per_gpu_hour": p.usd_per_gpu_hour,
                    "source": p.source,
                    "installed_gpu_seconds": json_number(p.installed_gpu_seconds),
                }
                for p in self.prices
            ],
            "installed_gpu_seconds": json_number(self.installed_gpu_seconds),
            "categories": {k: json_number(v) for k, v in self.categories.items()},
            "subcategories": {k: json_number(v) for k, v in self.subcategories.items()},
            "yield": _ratio(self.categories[Category.RELEASED.value], self.installed_gpu_seconds),
        }


@dataclass(frozen=True, kw_only=True, slots=True)
class WeightedLedger:
    """The ledger in one weighted unit; categories sum to ``installed``."""

    unit: str
    """``h100_equiv_seconds``, ``flops`` or ``dollars``."""
    installed: float
    categories: dict[str, float]
    subcategories: dict[str, float]
    weights: dict[str, Weight]
    """Per GPU type, the weight of one of its GPU-seconds (dollars: its prices per GPU-hour)."""
    basis: str
    """What the weight is (the reference peak; the prices' source and basis)."""
    not_weighted_gpu_seconds: dict[str, float] = field(default_factory=dict)
    """Installed GPU-seconds of types without a weight (unknown model, no price), by type."""

    @property
    def yield_(self) -> float | None:
        """Released / installed, in this unit."""
        return _ratio(self.categories[Category.RELEASED.value], self.installed)

    @property
    def waste(self) -> float:
        """Down, idle, failed, cancelled and diverged: what the essay counts as lost."""
        return sum(self.categories[c.value] for c in WASTE)

    def to_dict(self) -> dict[str, Any]:
        """The ``weighted`` entry of ``report --json`` (docs/contracts.md)."""
        return {
            "installed": self.installed,
            "categories": self.categories,
            "subcategories": self.subcategories,
            "yield": self.yield_,
            "waste": self.waste,
            "weights": {
                k: [p.to_dict() for p in w] if isinstance(w, list) else w
                for k, w in self.weights.items()
            },
            "basis": self.basis,
            "not_weighted_gpu_seconds": {
                k: json_number(v) for k, v in self.not_weighted_gpu_seconds.items()
            },
        }


@dataclass(frozen=True, kw_only=True, slots=True)
class FleetYield:
    """The ledger by GPU type and in every weight the data allows."""

    by_gpu_type: dict[str, GpuType]
    weighted: dict[str, WeightedLedger | None]
    """By unit; ``dollars`` is None without ``[prices]`` in the manifest."""
    warnings: tuple[str, ...]
    nodes: tuple[NodeGpu, ...] = field(repr=False)
    classes: tuple[GpuClass, ...] = field(repr=False, default=())
    """The classes of GPU (one model at one price) the ledger was split into."""
    node_classes: dict[tuple[str, str], int] = field(repr=False, default_factory=dict)
    """``(cluster, node)`` -> its class's ``class_id``."""

    def to_dict(self) -> dict[str, Any]:
        """``by_gpu_type`` and ``weighted`` of ``report --json``."""
        return {
            "by_gpu_type": {k: t.to_dict() for k, t in self.by_gpu_type.items()},
            "weighted": {k: None if w is None else w.to_dict() for k, w in self.weighted.items()},
        }


@dataclass(frozen=True, kw_only=True, slots=True)
class GpuClass:
    """Nodes of one GPU type at one price, and their ledger."""

    class_id: int
    gpu: NodeGpu
    """One of its nodes (type, model and price are the class's)."""
    totals: ClassTotals

    def weight(self, unit: str) -> float | None:
        """One GPU-second of this class in ``unit`` (a ``UNITS`` value or ``gpu_seconds``)."""
        acc, price = self.gpu.accelerator, self.gpu.usd_per_gpu_hour
        if unit == "gpu_seconds":
            return 1.0
        if unit == "dollars":
            return None if price is None else price / 3600
        if acc is None:
            return None
        if unit == "flops":
            return acc.peak_tflops_bf16 * 1e12
        return acc.peak_tflops_bf16 / get_accelerator(REFERENCE).peak_tflops_bf16


def several_classes(backend: ibis.BaseBackend) -> bool:
    """Whether the store's inventory holds more than one class of GPU (model and price): then a
    report splits the ledger by class, and should keep the ledger's segments (computed once,
    read by the split; at 290k jobs 24% more time than the ledger alone, not 75% to compute
    them twice). A store whose every node is alike needs nothing."""
    nodes = backend.table("nodes").select("cluster", "node").to_pyarrow().to_pylist()
    models = fleet_models(
        backend, sorted((r["cluster"], r["node"]) for r in nodes), stored_manifest_of(backend)
    )
    return len({(g.type_key, g.usd_per_gpu_hour, g.price_source) for g in models.nodes}) > 1


def fleet_yield(ledger: Ledger) -> FleetYield:
    """The ledger by GPU type and weighted (checked against the ledger, category by category).

    One class of GPU (one model, one price: most clusters) is the ledger itself, read as it is;
    several are split from the ledger's tables (``split.py``).
    """
    backend = ibis.get_backend(ledger.capacity)
    names = ledger.capacity.select("cluster", "node").distinct().to_pyarrow().to_pylist()
    models = fleet_models(
        backend, sorted((r["cluster"], r["node"]) for r in names), ledger.manifest
    )
    first: dict[tuple[str, float | None, str | None], NodeGpu] = {}
    ids: dict[tuple[str, float | None, str | None], int] = {}
    node_class: dict[tuple[str, str], int] = {}
    for gpu in models.nodes:
        key = (gpu.type_key, gpu.usd_per_gpu_hour, gpu.price_source)
        first.setdefault(key, gpu)
        node_class[(gpu.cluster, gpu.node)] = ids.setdefault(key, len(ids) + 1)
    if len(ids) == 1:
        split = {1: _whole(ledger)}
    else:
        split = split_by_class(backend, ledger, node_class_table(node_class)) if ids else {}
    classes = [
        GpuClass(class_id=i, gpu=first[k], totals=split[i]) for k, i in ids.items() if i in split
    ]
    return FleetYield(
        by_gpu_type=_by_type(models.nodes, classes),
        weighted=_weighted(classes, ledger),
        warnings=models.warnings,
        nodes=models.nodes,
        classes=tuple(classes),
        node_classes=node_class,
    )


def _whole(ledger: Ledger) -> ClassTotals:
    return ClassTotals(
        installed_gpu_seconds=ledger.installed_gpu_seconds,
        categories={c.value: v for c, v in ledger.categories.items()},
        subcategories=dict(ledger.subcategories),
    )


def _by_type(nodes: tuple[NodeGpu, ...], classes: list[GpuClass]) -> dict[str, GpuType]:
    types = {}
    for key in sorted({g.type_key for g in nodes}):
        members = [g for g in nodes if g.type_key == key]
        parts = [c for c in classes if c.gpu.type_key == key]
        types[key] = GpuType(
            key=key,
            accelerator=members[0].accelerator,
            slurm_types=tuple(sorted({t for g in members for t in g.slurm_types})),
            model_sources=tuple(sorted({g.model_source for g in members})),
            nodes=len(members),
            installed_gpu_seconds=sum(c.totals.installed_gpu_seconds for c in parts),
            categories=_summed([c.totals.categories for c in parts], [c.value for c in Category]),
            subcategories=_summed([c.totals.subcategories for c in parts], None),
            prices=tuple(
                TypePrice(
                    usd_per_gpu_hour=c.gpu.usd_per_gpu_hour,
                    source=c.gpu.price_source or "",
                    installed_gpu_seconds=c.totals.installed_gpu_seconds,
                )
                for c in parts
                if c.gpu.usd_per_gpu_hour is not None
            ),
        )
    return types


def _summed(dicts: list[dict[str, float]], keys: list[str] | None) -> dict[str, float]:
    keys = keys if keys is not None else sorted({k for d in dicts for k in d})
    return {k: sum(d.get(k, 0.0) for d in dicts) for k in keys}


def _weighted(classes: list[GpuClass], ledger: Ledger) -> dict[str, WeightedLedger | None]:
    reference = get_accelerator(REFERENCE)
    out: dict[str, WeightedLedger | None] = {
        "h100_equiv_seconds": _in_unit(
            "h100_equiv_seconds",
            classes,
            f"dense BF16 peak / {reference.peak_tflops_bf16:g} TFLOP/s ({reference.name}: "
            f"{reference.source})",
        ),
        "flops": _in_unit(
            "flops",
            classes,
            "FLOPs paid for: GPU-seconds x dense BF16 peak FLOP/s (the estimator's accelerator "
            "catalog)",
        ),
        "dollars": None,
    }
    prices = ledger.manifest.prices
    if prices is not None:
        basis = f", {prices.basis}" if prices.basis else ""
        out["dollars"] = _in_unit(
            "dollars",
            classes,
            f"$ per GPU-hour from the manifest's [prices] ({prices.default.source}{basis})",
        )
    return out


def _in_unit(unit: str, classes: list[GpuClass], basis: str) -> WeightedLedger:
    """Every class's GPU-seconds times its weight; classes without one are named instead."""
    installed = 0.0
    categories = {c.value: 0.0 for c in Category}
    subcategories: dict[str, float] = {}
    numbers: dict[str, float] = {}
    charged: dict[str, list[ChargedPrice]] = {}
    missing: dict[str, float] = {}
    for part in classes:
        weight = part.weight(unit)
        key, totals = part.gpu.type_key, part.totals
        if weight is None:
            missing[key] = missing.get(key, 0.0) + totals.installed_gpu_seconds
            continue
        if unit == "dollars":
            gpu = part.gpu
            # A dollar weight means a price: models._priced sets the price and its source together.
            assert gpu.usd_per_gpu_hour is not None and gpu.price_source is not None
            charged.setdefault(key, []).append(
                ChargedPrice(usd_per_gpu_hour=gpu.usd_per_gpu_hour, source=gpu.price_source)
            )
        else:
            numbers[key] = weight
        installed += totals.installed_gpu_seconds * weight
        for k, v in totals.categories.items():
            categories[k] += v * weight
        for k, v in totals.subcategories.items():
            subcategories[k] = subcategories.get(k, 0.0) + v * weight
    _check_weighted(unit, installed, categories)
    return WeightedLedger(
        unit=unit,
        installed=installed,
        categories=categories,
        subcategories=dict(sorted(subcategories.items())),
        # One of the two is empty: in dollars every type states its prices, else its number.
        weights={**numbers, **charged},
        basis=basis,
        not_weighted_gpu_seconds=missing,
    )


def _check_weighted(unit: str, installed: float, categories: dict[str, float]) -> None:
    total = sum(categories.values())
    if abs(total - installed) > 1e-9 * max(1.0, abs(installed)) + 1e-6:
        raise ConservationError(
            f"{unit}: categories sum to {total!r}, installed is {installed!r}",
            hint="a bug in the weighting by GPU type; please report it with the input files",
        )


def _ratio(num: float, den: float) -> float | None:
    return None if den <= 0 else num / den
