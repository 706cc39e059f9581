"""``gpuyield whatif``: what each remedy would buy on this cluster over a horizon.

Each of ``seeds`` draws takes the fitted parameters from their uncertainty (rates from their
Gamma, shares from their Beta, fitted times log-normal around the estimate) and a simulator seed,
simulates the baseline and every remedy with those same parameters and seed (common random
numbers: the failures a run meets are the same with and without the remedy), and books every
GPU-second with the ledger's rules (the simulator's truth). The spread over draws gives each
figure's interval: both the luck of the horizon and what the window could not pin down.

A run that drops failed replicas keeps its Slurm job running, so Slurm's records (and the
truth booked like them) show all its time as kept; the stalls and the time a replica was missing
are not progress. They are booked here as ``failed`` (hardware), which is what they are.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import Any

import numpy as np

from gpuyield.categories import Category
from gpuyield.simulate import Scenario, compute_truth, simulate
from gpuyield.whatif.model import ClusterFit
from gpuyield.whatif.remedies import Remedy, apply_remedy
from gpuyield.whatif.replay import ReplayCheck
from gpuyield.whatif.scenario_out import scenario_file
from gpuyield.whatif.stats import LEVEL, t_quantile

#: Draws of a projection unless told (``--seeds``).
SEEDS = 5


@dataclass(frozen=True, kw_only=True, slots=True)
class Band:
    """A figure's mean over draws and its prediction interval at ``LEVEL``."""

    mean: float
    low: float
    high: float

    def to_list(self) -> list[float]:
        """``[low, high]``."""
        return [self.low, self.high]

    def scaled(self, factor: float) -> Band:
        """The same band times ``factor`` (a price)."""
        return Band(mean=self.mean * factor, low=self.low * factor, high=self.high * factor)


def band(values: list[float]) -> Band:
    """Mean and the normal prediction interval of one more draw: mean +- t sd sqrt(1 + 1/n)."""
    mean = statistics.fmean(values)
    if len(values) < 2:
        return Band(mean=mean, low=mean, high=mean)
    half = t_quantile(len(values) - 1) * statistics.stdev(values) * math.sqrt(1 + 1 / len(values))
    return Band(mean=mean, low=mean - half, high=mean + half)


@dataclass(frozen=True, kw_only=True, slots=True)
class Outcome:
    """GPU-hours per category over the horizon, for the baseline or one remedy."""

    yield_: Band
    gpu_hours: dict[str, Band]
    """Per category: absolute for the baseline, remedy minus baseline for a remedy."""


@dataclass(frozen=True, kw_only=True, slots=True)
class RemedyProjection:
    """What one remedy moves, against the baseline, over the horizon."""

    remedy: Remedy
    outcome: Outcome
    yield_gain: Band
    """Yield with the remedy minus the baseline's (a share of installed GPU-time)."""
    gpu_hours_gained: Band
    """Released GPU-hours gained."""
    dollars_gained: Band | None
    """``gpu_hours_gained`` at the price per GPU-hour (None without a price)."""

    def to_dict(self) -> dict[str, Any]:
        """JSON shape (docs/whatif.md)."""
        return {
            "yield": self.outcome.yield_.mean,
            "yield_interval": self.outcome.yield_.to_list(),
            "yield_gain": self.yield_gain.mean,
            "yield_gain_interval": self.yield_gain.to_list(),
            "gpu_hours_gained": self.gpu_hours_gained.mean,
            "gpu_hours_gained_interval": self.gpu_hours_gained.to_list(),
            "dollars_gained": None if self.dollars_gained is None else self.dollars_gained.mean,
            "dollars_gained_interval": None
            if self.dollars_gained is None
            else self.dollars_gained.to_list(),
            "gpu_hours_moved": {k: v.mean for k, v in self.outcome.gpu_hours.items()},
            "gpu_hours_moved_interval": {k: v.to_list() for k, v in self.outcome.gpu_hours.items()},
            **self.remedy.to_dict(),
        }


@dataclass(frozen=True, kw_only=True, slots=True)
class Projection:
    """Baseline and remedies over the horizon, ranked by the yield they add."""

    fit: ClusterFit
    check: ReplayCheck
    forced: bool
    """Projected although the check failed (``--force``): every output says so."""
    horizon_days: float
    seeds: int
    uncertainty: bool
    """Parameters drawn from their uncertainty (False: the fitted values, seeds only)."""
    price_per_gpu_hour: float | None
    price_source: str
    baseline: Outcome
    installed_gpu_hours: float
    remedies: tuple[RemedyProjection, ...]
    """Best first."""

    @property
    def ranking(self) -> tuple[str, ...]:
        """Remedy names, most yield gained first."""
        return tuple(r.remedy.name for r in self.remedies)

    def to_dict(self) -> dict[str, Any]:
        """JSON shape (docs/whatif.md)."""
        return {
            "horizon_days": self.horizon_days,
            "seeds": self.seeds,
            "interval_level": LEVEL,
            "parameter_uncertainty": self.uncertainty,
            "price_per_gpu_hour": self.price_per_gpu_hour,
            "price_source": self.price_source,
            "check": {**self.check.to_dict(), "forced": self.forced},
            "baseline": {
                "yield": self.baseline.yield_.mean,
                "yield_interval": self.baseline.yield_.to_list(),
                "installed_gpu_hours": self.installed_gpu_hours,
                "gpu_hours": {k: v.mean for k, v in self.baseline.gpu_hours.items()},
            },
            "remedies": {r.remedy.name: r.to_dict() for r in self.remedies},
            "ranking": list(self.ranking),
            "fit": {
                "window": self.fit.to_dict()["window"],
                "notes": list(self.fit.notes),
            },
        }


def project(
    fit: ClusterFit,
    remedies: list[Remedy],
    check: ReplayCheck,
    *,
    horizon_days: float,
    seeds: int = SEEDS,
    uncertainty: bool = True,
    price_per_gpu_hour: float | None = None,
    price_source: str = "",
    forced: bool = False,
) -> Projection:
    """Simulate the baseline and each remedy ``seeds`` times over ``horizon_days``."""
    base_runs: list[dict[str, float]] = []
    remedy_runs: list[list[dict[str, float]]] = [[] for _ in remedies]
    installed = 0.0
    for draw in range(seeds):
        values = draw_values(fit, draw) if uncertainty else fit.values()
        scenario = scenario_file(fit, values, days=horizon_days, seed=draw).scenario()
        base = simulated_categories(scenario)
        installed = base.installed_gpu_seconds
        base_runs.append(base.categories)
        for index, remedy in enumerate(remedies):
            if len(remedy.not_applicable) == len(remedy.parts):
                remedy_runs[index].append(base.categories)  # it changes nothing here
                continue
            changed = apply_remedy(remedy, scenario, fit)
            remedy_runs[index].append(simulated_categories(changed).categories)
    baseline = _outcome(base_runs, installed)
    projected = [
        _remedy(remedy, runs, base_runs, installed, price_per_gpu_hour)
        for remedy, runs in zip(remedies, remedy_runs, strict=True)
    ]
    projected.sort(key=lambda r: (-r.yield_gain.mean, r.remedy.name))
    return Projection(
        fit=fit,
        check=check,
        forced=forced,
        horizon_days=horizon_days,
        seeds=seeds,
        uncertainty=uncertainty,
        price_per_gpu_hour=price_per_gpu_hour,
        price_source=price_source,
        baseline=baseline,
        installed_gpu_hours=installed / 3600,
        remedies=tuple(projected),
    )


def draw_values(fit: ClusterFit, draw: int) -> dict[str, float]:
    """One draw of every parameter from its uncertainty (settings and assumptions as they are)."""
    rng = np.random.default_rng((0x3A7F, draw))
    return {p.key: p.spread.draw(p.value, rng) for p in fit.parameters}


@dataclass(frozen=True, kw_only=True, slots=True)
class SimulatedCategories:
    """GPU-seconds per category of one simulation, and its installed GPU-seconds."""

    categories: dict[str, float]
    installed_gpu_seconds: float


def simulated_categories(scenario: Scenario) -> SimulatedCategories:
    """GPU-seconds per category of one simulation of ``scenario`` (the time a run that drops
    failed replicas did not progress booked as failed)."""
    result = simulate(scenario)
    truth = compute_truth(result)
    categories = {k: float(v) for k, v in truth.categories.items()}
    for run, config in zip(result.lineage, scenario.lineage, strict=True):
        if config.policy.value != "drop":
            continue
        kept = float(run.productive_s) * config.num_gpus
        lost = max(float(run.tally.categories["released"]) - kept, 0.0)
        categories[Category.RELEASED.value] -= lost
        categories[Category.FAILED.value] += lost
    return SimulatedCategories(
        categories=categories, installed_gpu_seconds=float(truth.installed_gpu_seconds)
    )


def _outcome(runs: list[dict[str, float]], installed: float) -> Outcome:
    return Outcome(
        yield_=band([r[Category.RELEASED.value] / installed for r in runs]),
        gpu_hours={c.value: band([r[c.value] / 3600 for r in runs]) for c in Category},
    )


def _remedy(
    remedy: Remedy,
    runs: list[dict[str, float]],
    base: list[dict[str, float]],
    installed: float,
    price: float | None,
) -> RemedyProjection:
    released = Category.RELEASED.value
    deltas = [{k: r[k] - b[k] for k in r} for r, b in zip(runs, base, strict=True)]
    gained = band([d[released] / 3600 for d in deltas])
    return RemedyProjection(
        remedy=remedy,
        outcome=Outcome(
            yield_=band([r[released] / installed for r in runs]),
            gpu_hours={c.value: band([d[c.value] / 3600 for d in deltas]) for c in Category},
        ),
        yield_gain=band([d[released] / installed for d in deltas]),
        gpu_hours_gained=gained,
        dollars_gained=None if price is None else gained.scaled(price),
    )
