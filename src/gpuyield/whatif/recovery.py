"""Recovery checks: does the fit find the parameters of a cluster whose parameters we set?

A simulated cluster's scenario is its truth. ``true_values`` says, for each key the fit reports,
the value the scenario set (rates summed over the causes a reason group stands for, arrivals as
the Poisson mean the simulator draws around, end states normalised); ``recovered`` compares a fit
with it. Used by the tests (tests/whatif/) and the recovery study (``python -m bench whatif``).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from gpuyield.simulate import Scenario, SimulationResult, expected_research_jobs
from gpuyield.whatif.fit_failures import HARDWARE_IDS, SOFTWARE_IDS
from gpuyield.whatif.model import ClusterFit
from gpuyield.whatif.outages import UNRECOGNISED, UNRESPONSIVE, group_members
from gpuyield.whatif.params import Status

_PER_1000_NODE_DAYS = 1000.0 * 86400.0


@dataclass(frozen=True, kw_only=True, slots=True)
class Recovery:
    """One fitted parameter against the value the scenario set."""

    key: str
    true: float
    value: float
    low: float
    high: float

    @property
    def covered(self) -> bool:
        """The true value lies in the fitted interval."""
        return self.low <= self.true <= self.high


def true_values(scenario: Scenario, result: SimulationResult) -> dict[str, float]:
    """The value ``scenario`` set for each key the fit reports (where the scenario sets one)."""
    rates = {c: r * _PER_1000_NODE_DAYS for c, r in scenario.failure_rates().items()}
    truth = {f"failures.rate.{c}": rates[c] for c in HARDWARE_IDS}
    for group in (UNRESPONSIVE, UNRECOGNISED):
        truth[f"failures.rate.{group}"] = sum(rates[m] for m in group_members(group))
    truth["failures.hardware_total"] = sum(rates[c] for c in HARDWARE_IDS)
    truth["failures.rate.software"] = sum(rates[c] for c in SOFTWARE_IDS)
    cfg = scenario.failures
    truth |= {
        "failures.down_s": float(cfg.down_s),
        "failures.repair_mean_s": float(cfg.repair_mean_s),
        "failures.manual_share": cfg.manual_share,
        "failures.rollbacks_per_day": cfg.rollbacks_per_day,
    }
    for run in scenario.lineage:
        key = f"lineage.{run.name}"
        truth |= {
            f"{key}.checkpoint_interval_s": float(run.checkpoint_interval_s),
            f"{key}.checkpoint_write_s": float(run.checkpoint_write_s),
            f"{key}.startup_s": float(run.startup_s),
            f"{key}.requeue_wait_s": float(run.requeue_wait_s),
            f"{key}.planned_stops_per_day": run.planned_stops_per_day,
            f"{key}.planned_pause_s": float(run.planned_pause_s),
        }
    if scenario.research.enabled:
        truth |= _research_truth(scenario, result)
    return truth


def _research_truth(scenario: Scenario, result: SimulationResult) -> dict[str, float]:
    research = scenario.research
    days = scenario.days
    means = expected_research_jobs(scenario, lent_node_s(scenario, result))
    truth: dict[str, float] = {}
    for cls, mean in zip(research.classes, means, strict=True):
        key = f"research.classes.{cls.num_gpus}"
        truth[f"research.arrivals.{cls.num_gpus}"] = mean / days
        truth[f"{key}.median_duration_s"] = float(cls.median_duration_s)
        truth[f"{key}.duration_sigma"] = cls.duration_sigma
        truth[f"{key}.time_limit_s"] = float(cls.time_limit_s)
    total = sum(research.end_states.values())
    for state, share in research.end_states.items():
        truth[f"research.end_states.{state}"] = share / total
    truth["research.diverged_share"] = research.diverged_share
    return truth


def lent_node_s(scenario: Scenario, result: SimulationResult) -> int:
    """Node-seconds the lineage groups lent research in ``result`` (the simulator's count)."""
    if not scenario.research.backfill_lineage_gaps:
        return 0
    span = scenario.end_s - scenario.start_s
    lent = 0
    for run, done, group in zip(scenario.lineage, result.lineage, result.groups, strict=True):
        held_from = min(scenario.start_s + round(run.start_day * 86400), scenario.end_s)
        held_to = done.completed_s if done.completed_s is not None else scenario.end_s
        lent += (group[1] + group[2]) * (span - (held_to - held_from))
    return lent


def recovered(fit: ClusterFit, truth: dict[str, float]) -> list[Recovery]:
    """Every parameter the fit estimated from data (not settings, assumptions or refusals) that
    the scenario sets, against its true value."""
    return [
        Recovery(key=p.key, true=truth[p.key], value=p.value, low=p.low, high=p.high)
        for p in fit.parameters
        if p.status is Status.FITTED and p.key in truth
    ]


def with_seed(scenario: Scenario, seed: int) -> Scenario:
    """The same cluster, another seed."""
    return dataclasses.replace(scenario, seed=seed)
