"""`simulate validate`: the failure model against published reliability figures, with sources.

Each case (``gpuyield/data/failures/cases.toml``) runs the failure-only model with a failure table
and a job shape. A published interruption count is *within* when it lies in the Poisson band of
the predicted mean, ``mean +- 4 sqrt(mean)``; a published ETTR when the simulated ETTR is within 5%
of it (or above a published lower bound). A case outside its band carries the documented reason.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from gpuyield.simulate.ettr import SECONDS_PER_DAY, JobModel, run_model
from gpuyield.simulate.failure_tables import PublishedCase, get_failure_table, published_cases

#: Width of the Poisson band, in standard deviations (false alarm ~6e-5 per case).
BAND_SIGMAS = 4.0
#: Relative tolerance on a published ETTR.
ETTR_TOLERANCE = 0.05


@dataclass(frozen=True, kw_only=True, slots=True)
class CaseResult:
    """Predicted against published for one case."""

    case: PublishedCase
    #: Failure table rate used, per 1,000 node-days.
    rate_per_1000_node_days: float
    #: Expected interruptions (nodes x days x rate).
    predicted_interruptions: float
    #: Interruptions in one seeded simulation.
    simulated_interruptions: int
    #: Poisson band around the prediction (counts).
    band: tuple[float, float]
    #: Simulated ETTR (kept progress over wall time).
    simulated_ettr: float
    within: bool

    def to_json(self) -> dict[str, Any]:
        """Plain data for ``--json``."""
        c = self.case
        return {
            "id": c.id,
            "name": c.name,
            "table": c.table,
            "rate_per_1000_node_days": self.rate_per_1000_node_days,
            "nodes": c.nodes,
            "days": c.days,
            "predicted_interruptions": self.predicted_interruptions,
            "simulated_interruptions": self.simulated_interruptions,
            "published_interruptions": c.published_interruptions,
            "band": list(self.band),
            "simulated_ettr": self.simulated_ettr,
            "published_ettr": c.published_ettr,
            "published_min_ettr": c.published_min_ettr,
            "within": self.within,
            "in_sample": c.in_sample,
            "reason_outside": c.expect_outside,
            "url": c.url,
            "states": c.states,
        }


def validate_cases(*, seed: int = 0) -> tuple[CaseResult, ...]:
    """Every published case, predicted and checked."""
    return tuple(_run(case, seed) for case in published_cases())


def _run(case: PublishedCase, seed: int) -> CaseResult:
    rate = get_failure_table(case.table).rate_per_1000_node_days
    model = JobModel(
        num_nodes=case.nodes,
        node_failures_per_day=rate / 1000.0,
        duration_s=case.days * SECONDS_PER_DAY,
        interval_s=case.interval_s,
        restart_s=case.restart_s,
    )
    sim = run_model(model, np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(7,))))
    mean = case.nodes * case.days * rate / 1000.0
    half = BAND_SIGMAS * math.sqrt(mean)
    band = (mean - half, mean + half)
    checks = []
    if case.published_interruptions is not None:
        checks.append(band[0] <= case.published_interruptions <= band[1])
    if case.published_ettr is not None:
        checks.append(abs(sim.ettr - case.published_ettr) <= ETTR_TOLERANCE * case.published_ettr)
    if case.published_min_ettr is not None:
        checks.append(sim.ettr >= case.published_min_ettr)
    return CaseResult(
        case=case,
        rate_per_1000_node_days=rate,
        predicted_interruptions=mean,
        simulated_interruptions=sim.interruptions,
        band=band,
        simulated_ettr=sim.ettr,
        within=all(checks),
    )
