"""The ledger by GPU model and weighted: H100-equivalent seconds, FLOPs paid for, dollars.

``fleet_yield(ledger)`` splits a computed ledger by the GPU model of each node (``models.py``:
manifest, DCGM, gres.conf, GRES type, node features) and weighs every class of GPU by the
estimator's catalog peaks and the manifest's ``[prices]`` (``weighted.py``); ``split.py`` checks
that the classes add up to the ledger, category by category.
"""

from gpuyield.ledger.weights.models import UNTYPED, NodeGpu
from gpuyield.ledger.weights.names import NameMatch, resolve_name
from gpuyield.ledger.weights.weighted import (
    REFERENCE,
    UNITS,
    WASTE,
    WEIGHTS,
    FleetYield,
    GpuClass,
    GpuType,
    WeightedLedger,
    fleet_yield,
    several_classes,
)

__all__ = [
    "REFERENCE",
    "UNITS",
    "UNTYPED",
    "WASTE",
    "WEIGHTS",
    "FleetYield",
    "GpuClass",
    "GpuType",
    "NameMatch",
    "NodeGpu",
    "WeightedLedger",
    "fleet_yield",
    "resolve_name",
    "several_classes",
]
