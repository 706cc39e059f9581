"""A typed fleet: the lineage nodes (partition ``train``) hold one GPU model at one price, the
research nodes (partitions ``research``) another. The simulator then writes typed GRES and TRES
and ``[prices]``, and truth by GPU type and weighted (``fleet_truth.py``)."""

from __future__ import annotations

import math
from typing import Protocol

from gpuyield.errors import InputError


class FleetConfig(Protocol):
    """The fleet fields a typed fleet reads (``scenario.FleetConfig``'s)."""

    @property
    def accelerator(self) -> str: ...
    @property
    def research_accelerator(self) -> str: ...
    @property
    def price_per_gpu_hour(self) -> float: ...
    @property
    def research_price_per_gpu_hour(self) -> float: ...


def is_typed(fleet: FleetConfig) -> bool:
    """The files name GPU types and prices (a mixed or a priced fleet)."""
    return bool(
        fleet.research_accelerator or fleet.price_per_gpu_hour or fleet.research_price_per_gpu_hour
    )


def model_of(fleet: FleetConfig, *, research: bool) -> str:
    """The accelerator id of the train (lineage) or the research nodes."""
    return (fleet.research_accelerator or fleet.accelerator) if research else fleet.accelerator


def check_prices(fleet: FleetConfig) -> None:
    """Prices are finite numbers of dollars per GPU-hour, 0 (not priced) or more."""
    for name in ("price_per_gpu_hour", "research_price_per_gpu_hour"):
        value = getattr(fleet, name)
        if not 0 <= value < math.inf:
            raise InputError(
                f"fleet.{name} must be a finite number >= 0, got {value!r}",
                hint="fix the scenario file",
            )


def check_typed(fleet: FleetConfig, *, backfill: bool) -> None:
    """A typed fleet keeps research jobs off the lineage nodes: their truth is per group of
    nodes, and a research job on a lineage node would hold that node's GPU type."""
    if is_typed(fleet) and backfill:
        raise InputError(
            "a typed fleet (research_accelerator or prices) needs "
            "research.backfill_lineage_gaps = false",
            hint="research jobs on lineage nodes would hold the lineage nodes' GPU type",
        )
