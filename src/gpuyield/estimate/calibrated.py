"""A point estimate of effective MFU with an interval calibrated on the catalog's published runs.

The effective (all-in) MFU of a published run, ``6 N D / (reported hours x BF16 peak)``, is modelled
on a log scale as an intercept per accelerator generation plus one slope on ``log10`` of the active
parameters, fitted by least squares over the catalog's runs. The slope is there because small
models on large clusters reach a far lower share of peak than large ones (Llama 3.2 1B: 4%,
Llama 3.1 405B: 35%); without it the Hopper residuals span 9x.

The interval comes from the model's *leave-one-out* residuals: each run is predicted by the model
fitted on the others, and the residuals of the runs on the same generation (every run when that
generation has fewer than ``MIN_RESIDUALS``) give the 10th and 90th percentiles (Weibull plotting
positions, ``k / (n + 1)``, the unbiased estimate of a quantile from ``n`` draws). A new run then
falls inside with about 80% probability if it resembles the catalog's runs; ``gpuyield estimate
validate`` measures that coverage by leaving each run out in turn (the whole procedure, residuals
included, is refitted without it).

Dense and MoE runs share the model: a separate MoE offset, tried and measured, made the
leave-one-out point estimates worse (median ratio 1.26 against 1.22) and the catalog has only five
MoE runs, too few for residuals of their own; ``estimate validate`` reports coverage by
architecture so a systematic miss would show.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache

import numpy as np

from gpuyield.estimate.effective import EffectiveRun, effective_runs

#: Stated coverage of the interval.
COVERAGE = 0.8
#: A generation with fewer leave-one-out residuals than this takes every run's.
MIN_RESIDUALS = 8
#: A generation with fewer runs than this gets no intercept of its own (the pooled fit predicts it).
#: One run is enough: with the shared slope it says more about its hardware than runs on other
#: chips do (leave-one-out, the two TPU runs predict each other within 1.1x; the pooled fit misses
#: them by 1.3-1.5x).
MIN_GENERATION_RUNS = 1


@dataclass(frozen=True, kw_only=True, slots=True)
class MfuFit:
    """log(effective MFU) = intercept[generation] + slope * log10(active params)."""

    #: Intercept per generation with enough runs.
    intercepts: dict[str, float]
    #: Intercept of the pooled fit (one intercept for all runs), for other generations.
    pooled_intercept: float
    #: Slope of the pooled fit, used with ``pooled_intercept``.
    pooled_slope: float
    #: Slope shared by the generations in ``intercepts``.
    slope: float

    def log_mfu(self, generation: str | None, active_params: float) -> float:
        """Predicted log effective MFU of a run of ``active_params`` on ``generation``."""
        x = math.log10(active_params)
        if generation in self.intercepts:
            return self.intercepts[generation] + self.slope * x
        return self.pooled_intercept + self.pooled_slope * x


@dataclass(frozen=True, kw_only=True, slots=True)
class CalibratedMfu:
    """The expected effective MFU of one run and its calibrated interval."""

    #: Point estimate (the fit's prediction).
    expected: float
    #: Interval ends: a run like the catalog's falls between them with probability ``coverage``.
    low: float
    high: float
    #: Stated coverage (0.8).
    coverage: float
    #: Leave-one-out residuals the interval's percentiles come from.
    support: int
    #: Which runs those are (``hopper runs`` or ``all runs``).
    basis: str


def _design(runs: Sequence[EffectiveRun], generations: Sequence[str]) -> np.ndarray:
    rows = []
    for run in runs:
        dummies = [1.0 if run.generation == g else 0.0 for g in generations]
        rows.append([*dummies, math.log10(run.model.active_params.central)])
    return np.array(rows)


def fit_mfu(runs: Sequence[EffectiveRun]) -> MfuFit:
    """Least-squares fit of log effective MFU over ``runs`` (per-generation and pooled)."""
    y = np.log([run.effective_mfu for run in runs])
    counts: dict[str, int] = {}
    for run in runs:
        counts[run.generation] = counts.get(run.generation, 0) + 1
    generations = sorted(g for g, n in counts.items() if n >= MIN_GENERATION_RUNS)
    mine = [i for i, run in enumerate(runs) if run.generation in generations]
    beta = np.linalg.lstsq(_design([runs[i] for i in mine], generations), y[mine], rcond=None)[0]
    x = np.array([math.log10(run.model.active_params.central) for run in runs])
    pooled = np.linalg.lstsq(np.column_stack((np.ones(len(runs)), x)), y, rcond=None)[0]
    return MfuFit(
        intercepts={g: float(b) for g, b in zip(generations, beta[:-1], strict=True)},
        slope=float(beta[-1]),
        pooled_intercept=float(pooled[0]),
        pooled_slope=float(pooled[1]),
    )


def loo_residuals(runs: Sequence[EffectiveRun]) -> list[float]:
    """Each run's log effective MFU less the prediction of the fit without it."""
    out = []
    for i, run in enumerate(runs):
        fit = fit_mfu([r for j, r in enumerate(runs) if j != i])
        predicted = fit.log_mfu(run.generation, run.model.active_params.central)
        out.append(math.log(run.effective_mfu) - predicted)
    return out


@dataclass(frozen=True, kw_only=True, slots=True)
class Calibration:
    """A fit and the leave-one-out residuals of the runs it was fitted on."""

    fit: MfuFit
    runs: tuple[EffectiveRun, ...]
    residuals: tuple[float, ...]

    def interval(self, generation: str | None, active_params: float) -> CalibratedMfu:
        """The expected effective MFU and its interval for a run of this shape."""
        mine = [
            e
            for run, e in zip(self.runs, self.residuals, strict=True)
            if run.generation == generation
        ]
        pool, basis = (
            (mine, f"{generation} runs")
            if len(mine) >= MIN_RESIDUALS
            else (
                list(self.residuals),
                "all runs",
            )
        )
        tail = (1.0 - COVERAGE) / 2.0
        lo, hi = np.quantile(pool, [tail, 1.0 - tail], method="weibull")
        centre = self.fit.log_mfu(generation, active_params)
        return CalibratedMfu(
            expected=math.exp(centre),
            low=math.exp(centre + float(lo)),
            high=math.exp(centre + float(hi)),
            coverage=COVERAGE,
            support=len(pool),
            basis=basis,
        )


def calibrate(runs: Sequence[EffectiveRun]) -> Calibration:
    """Fit ``runs`` and compute their leave-one-out residuals."""
    return Calibration(fit=fit_mfu(runs), runs=tuple(runs), residuals=tuple(loo_residuals(runs)))


@cache
def calibration(exclude: str | None = None) -> Calibration:
    """The calibration over every catalog run (but ``exclude``, for a leave-one-out test)."""
    return calibrate([run for run in effective_runs() if run.model.id != exclude])
