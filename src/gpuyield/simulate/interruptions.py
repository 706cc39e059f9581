"""The interruptions a lineage run will meet that are not node failures, drawn up front.

Software failures, planned stops, manual restarts and divergence rollbacks are drawn before the
run's event loop, in this order: the order of draws from the scenario's generator fixes a seed's
output, so it must not depend on how the loop goes.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gpuyield.simulate.failures import SOFTWARE_CAUSES, poisson_times
from gpuyield.simulate.scenario import LineageConfig, Scenario


@dataclass(frozen=True, kw_only=True, slots=True)
class RunInterruptions:
    """Sorted event times (seconds) of one run's window, by kind."""

    software_at_s: np.ndarray
    #: Index into ``SOFTWARE_CAUSES`` of each software failure.
    software_cause: np.ndarray
    planned_at_s: np.ndarray
    rollback_at_s: np.ndarray
    #: The stream deciding whether a failure needs a person to restart the run (None: never).
    manual: np.random.Generator | None


def draw_interruptions(
    scenario: Scenario,
    run: LineageConfig,
    *,
    nodes: int,
    submit_s: int,
    end_s: int,
    rng: np.random.Generator,
) -> RunInterruptions:
    """Draw a run's software failures, planned stops, manual restarts and rollbacks."""
    none = np.empty(0, dtype=np.int64)
    live = submit_s < end_s
    rates = scenario.failure_rates()
    sw_rate = sum(rates[c] for c in SOFTWARE_CAUSES) * nodes
    sw_times = poisson_times(rng, sw_rate, submit_s, end_s) if live else none
    sw_weights = np.array([rates[c] for c in SOFTWARE_CAUSES])
    sw_causes = (
        rng.choice(len(SOFTWARE_CAUSES), size=sw_times.size, p=sw_weights / sw_weights.sum())
        if sw_times.size
        else none
    )
    planned = (
        poisson_times(rng, run.planned_stops_per_day / 86400, submit_s, end_s) if live else none
    )
    # Manual restarts draw from their own stream, created only when the scenario has them,
    # so scenarios without them keep every draw (and output) they had.
    cfg = scenario.failures
    manual = np.random.default_rng(int(rng.integers(2**63))) if cfg.manual_share > 0 else None
    # Divergence rollbacks, also on their own stream only when the scenario has them.
    rollbacks = (
        poisson_times(
            np.random.default_rng(int(rng.integers(2**63))),
            cfg.rollbacks_per_day / 86400,
            submit_s,
            end_s,
        )
        if cfg.rollbacks_per_day > 0 and live
        else none
    )
    return RunInterruptions(
        software_at_s=sw_times,
        software_cause=sw_causes,
        planned_at_s=planned,
        rollback_at_s=rollbacks,
        manual=manual,
    )


__all__ = ["RunInterruptions", "draw_interruptions"]
