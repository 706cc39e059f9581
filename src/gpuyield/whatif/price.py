"""The price a projection puts on a GPU-hour when ``--price-per-gpu-hour`` is not given: the
manifest's ``[prices]``, as ``gpuyield report --weight dollars`` reads them.

A remedy gains GPU-hours across the fleet, so one price stands for all of them: the fleet's
installed GPU-hours at their own prices (each node's partition table, else ``[prices]``, by GPU
type: ledger/weights) over those GPU-hours, a mean weighted by how much of each type was
installed. A fleet with GPUs ``[prices]`` does not price gets no price (a mean over part of it
would misstate the rest); the source says so.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpuyield.ledger import Ledger

#: ``price_source`` of a price given on the command line.
FLAG_SOURCE = "--price-per-gpu-hour"


@dataclass(frozen=True, kw_only=True, slots=True)
class GpuHourPrice:
    """Dollars per GPU-hour (None: no price) and where it came from, in words."""

    usd_per_gpu_hour: float | None
    source: str
    """``--price-per-gpu-hour``, the manifest's ``[prices]`` with their source and basis, or why
    the manifest's prices give none ("" without ``[prices]``)."""


def manifest_price(ledger: Ledger) -> GpuHourPrice:
    """The mean price of the ledger's installed GPU-hours under the manifest's ``[prices]``."""
    from gpuyield.ledger.weights import fleet_yield

    prices = ledger.manifest.prices
    if prices is None:
        return GpuHourPrice(usd_per_gpu_hour=None, source="")
    dollars = fleet_yield(ledger).weighted["dollars"]
    basis = f", {prices.basis}" if prices.basis else ""
    stated = f"the manifest's [prices] ({prices.default.source}{basis})"
    if dollars is None or ledger.installed_gpu_seconds <= 0:
        return GpuHourPrice(
            usd_per_gpu_hour=None, source=f"none: {stated}, but no GPU-time is installed"
        )
    if dollars.not_weighted_gpu_seconds:
        types = ", ".join(sorted(dollars.not_weighted_gpu_seconds))
        return GpuHourPrice(
            usd_per_gpu_hour=None,
            source=f"none: {stated} price no {types} GPUs; pass --price-per-gpu-hour",
        )
    return GpuHourPrice(
        usd_per_gpu_hour=dollars.installed / (ledger.installed_gpu_seconds / 3600),
        source=f"{stated}, mean over the installed GPU-hours",
    )
