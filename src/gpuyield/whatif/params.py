"""A fitted parameter: its value, interval, the evidence behind it and how sure we are of it."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from gpuyield.whatif.stats import Estimate, Spread, fixed

#: A parameter that needs data but rests on fewer events than this is refused (the window is too
#: short or the cluster too small to say): with 10 events a rate's 95% interval spans 0.48x-1.84x.
MIN_EVENTS = 10


class Status(StrEnum):
    """Where a parameter's value came from."""

    # Estimated from the window's records.
    FITTED = "fitted"
    # Read from the manifest's run_settings: the lab's own statement.
    SETTING = "setting"
    # The records cannot show it: a default, stated in every output.
    ASSUMED = "assumed"
    # Needs data, but the window holds fewer than MIN_EVENTS events: projections are refused.
    TOO_FEW = "too-few-events"


@dataclass(frozen=True, kw_only=True, slots=True)
class Parameter:
    """One number of the fitted scenario."""

    key: str
    """Where it goes (``failures.rate.gpu``, ``lineage.pt-main.checkpoint_interval_s``, ...)."""
    value: float
    low: float
    """Interval at 95% (``stats.LEVEL``); equal to ``value`` for settings and assumptions."""
    high: float
    unit: str
    status: Status
    events: int
    """Observations behind the value (failures, jobs, gaps)."""
    evidence: str
    """What it was computed from, in one line."""
    spread: Spread
    """How a projection draws it (fixed for settings and assumptions)."""

    @property
    def refused(self) -> bool:
        """True when too few events stand behind it."""
        return self.status is Status.TOO_FEW

    def contains(self, value: float, *, rel: float = 0.0) -> bool:
        """True when ``value`` lies in the interval (widened by ``rel`` of the value)."""
        slack = abs(value) * rel
        return self.low - slack <= value <= self.high + slack

    def to_dict(self) -> dict[str, Any]:
        """JSON shape."""
        return {
            "key": self.key,
            "value": self.value,
            "interval": [self.low, self.high],
            "unit": self.unit,
            "status": self.status.value,
            "events": self.events,
            "evidence": self.evidence,
        }


def fitted(
    key: str, estimate: Estimate, *, unit: str, events: int, evidence: str, needs: int = 0
) -> Parameter:
    """A parameter estimated from data; ``needs`` events at least, else it is refused."""
    return Parameter(
        key=key,
        value=estimate.value,
        low=estimate.low,
        high=estimate.high,
        unit=unit,
        status=Status.TOO_FEW if events < needs else Status.FITTED,
        events=events,
        evidence=evidence,
        spread=estimate.spread,
    )


def stated(key: str, value: float, *, unit: str, status: Status, evidence: str) -> Parameter:
    """A setting read from the manifest, or an assumption: known as is, not drawn."""
    estimate = fixed(value)
    return Parameter(
        key=key,
        value=value,
        low=estimate.low,
        high=estimate.high,
        unit=unit,
        status=status,
        events=0,
        evidence=evidence,
        spread=estimate.spread,
    )


def too_few(key: str, value: float, *, unit: str, events: int, evidence: str) -> Parameter:
    """A parameter the window holds too few events to fit: ``value`` is a stand-in (stated),
    and projections are refused."""
    estimate = fixed(value)
    return Parameter(
        key=key,
        value=value,
        low=estimate.low,
        high=estimate.high,
        unit=unit,
        status=Status.TOO_FEW,
        events=events,
        evidence=evidence,
        spread=estimate.spread,
    )
