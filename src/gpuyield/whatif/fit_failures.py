"""Failure rates by cause, down and repair times, from the node events of the window.

The simulator draws hardware failures as independent Poisson processes per node and cause, and a
node out for repair or maintenance cannot fail again; so the maximum-likelihood rate of a cause is
its outages over the node-seconds in service (installed node-seconds less every outage's). Repair
times are exponential in the simulator; a repair still under way at the window end is censored
(its time so far counts, it does not count as an ended repair).
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass

from gpuyield.simulate import FAILURE_CAUSES
from gpuyield.whatif.outages import (
    UNRECOGNISED,
    UNRESPONSIVE,
    Outage,
    group_members,
    node_seconds_out,
)
from gpuyield.whatif.params import MIN_EVENTS, Parameter, Status, fitted, stated
from gpuyield.whatif.stats import Estimate, exponential_mean, median_estimate, poisson_rate

_PER_1000_NODE_DAYS = 1000.0 * 86400.0
HARDWARE_IDS = tuple(c.id for c in FAILURE_CAUSES if c.kind == "hardware")
SOFTWARE_IDS = tuple(c.id for c in FAILURE_CAUSES if c.kind == "software")
#: Table 5's counts: how a group's rate is split over the causes it stands for.
TABLE5_COUNTS = {c.id: c.llama3_count for c in FAILURE_CAUSES}


@dataclass(frozen=True, kw_only=True, slots=True)
class Exposure:
    """Node-seconds the fleet was in service in the window (what failures are counted over)."""

    node_seconds: float
    gpus_per_node: int

    def per_gpu_hour(self, count: int) -> float:
        """A count as failures per GPU-hour."""
        return (
            count / (self.node_seconds * self.gpus_per_node / 3600.0) if self.node_seconds else 0.0
        )


def exposure(
    outages: list[Outage], num_nodes: int, gpus_per_node: int, start_s: int, end_s: int
) -> Exposure:
    """In-service node-seconds of the window."""
    installed = num_nodes * (end_s - start_s)
    return Exposure(
        node_seconds=float(installed - node_seconds_out(outages, start_s, end_s)),
        gpus_per_node=gpus_per_node,
    )


def rate_parameters(outages: list[Outage], exp: Exposure, start_s: int) -> list[Parameter]:
    """One rate per hardware cause (and per reason group seen), per 1,000 node-days, plus the
    total the projections need (refused below ``MIN_EVENTS`` failures)."""
    failures = [o for o in outages if not o.planned and o.start_s >= start_s]
    counts = Counter(o.cause for o in failures)
    groups = list(HARDWARE_IDS) + [g for g in (UNRESPONSIVE, UNRECOGNISED) if counts[g]]
    params = []
    for group in groups:
        count = counts[group]
        reasons = sorted({r for o in failures if o.cause == group for r in o.reasons})
        shown = "; ".join(reasons[:3]) + (" ..." if len(reasons) > 3 else "")
        params.append(
            fitted(
                f"failures.rate.{group}",
                _scaled(poisson_rate(count, exp.node_seconds)),
                unit="per 1,000 node-days",
                events=count,
                evidence=(
                    f"{count} outages over {exp.node_seconds / 86400:,.0f} node-days in service"
                    f" ({exp.per_gpu_hour(count):.3g} per GPU-hour)"
                    + (f"; reasons: {shown}" if shown else "")
                    + _members_note(group)
                ),
            )
        )
    total = len(failures)
    params.append(
        fitted(
            "failures.hardware_total",
            _scaled(poisson_rate(total, exp.node_seconds)),
            unit="per 1,000 node-days",
            events=total,
            evidence=f"{total} unplanned outages; {exp.per_gpu_hour(total):.3g} per GPU-hour",
            needs=MIN_EVENTS,
        )
    )
    return params


def _members_note(group: str) -> str:
    members = group_members(group)
    if members == (group,):
        return ""
    return f"; split over {', '.join(members)} as in Table 5"


def _scaled(estimate: Estimate) -> Estimate:
    """A rate per node-second as per 1,000 node-days."""
    k = _PER_1000_NODE_DAYS
    spread = estimate.spread
    if spread.b:
        spread = type(spread)(kind=spread.kind, a=spread.a, b=spread.b * k)
    return Estimate(
        value=estimate.value * k, low=estimate.low * k, high=estimate.high * k, spread=spread
    )


def software_rate(count: int, running_node_s: float) -> Parameter:
    """Software failures of lineage jobs (FAILED without a node event) per 1,000 node-days of
    their running time: the simulator draws them only for lineage jobs, per node of the job."""
    return fitted(
        "failures.rate.software",
        _scaled(poisson_rate(count, running_node_s)),
        unit="per 1,000 node-days",
        events=count,
        evidence=(
            f"{count} lineage jobs FAILED without a node event over "
            f"{running_node_s / 86400:,.0f} node-days of lineage running time; split over "
            f"{', '.join(SOFTWARE_IDS)} as in Table 5"
        ),
    )


def split_rates(values: dict[str, float]) -> dict[str, float]:
    """Scenario rates per cause id from the fitted rates per cause or group."""
    rates = {cause: 0.0 for cause in (*HARDWARE_IDS, *SOFTWARE_IDS)}
    for key, value in values.items():
        if not key.startswith("failures.rate."):
            continue
        group = key.removeprefix("failures.rate.")
        members = SOFTWARE_IDS if group == "software" else group_members(group)
        weights = [TABLE5_COUNTS[m] for m in members]
        for member, weight in zip(members, weights, strict=True):
            rates[member] += value * weight / sum(weights)
    return rates


def down_parameter(outages: list[Outage], start_s: int) -> Parameter:
    """How long a failed node shows DOWN before it drains: the median, with the distribution-free
    interval of order statistics."""
    downs = sorted(o.down_s for o in outages if not o.planned and o.start_s >= start_s and o.down_s)
    if not downs:
        return stated(
            "failures.down_s",
            600,
            unit="s",
            status=Status.ASSUMED,
            evidence="no DOWN/DOWN* event began an outage: the simulator's default",
        )
    return fitted(
        "failures.down_s",
        median_estimate([float(d) for d in downs]),
        unit="s",
        events=len(downs),
        evidence=f"median of {len(downs)} DOWN/DOWN* events that began an outage",
    )


def repair_parameter(outages: list[Outage], start_s: int) -> Parameter:
    """Mean repair time (exponential; repairs still under way are censored), refused below
    ``MIN_EVENTS`` ended repairs."""
    failures = [o for o in outages if not o.planned and o.start_s >= start_s]
    ended = sum(1 for o in failures if not o.open)
    total = float(sum(o.repair_s for o in failures))
    estimate = (
        exponential_mean(ended, total) if ended else Estimate(value=0.0, low=0.0, high=math.inf)
    )
    still = len(failures) - ended
    return fitted(
        "failures.repair_mean_s",
        estimate,
        unit="s",
        events=ended,
        evidence=(
            f"{ended} repairs ended, {still} still under way at the window end (censored); "
            f"{total / 3600:,.0f} node-hours of repair"
        ),
        needs=MIN_EVENTS,
    )
