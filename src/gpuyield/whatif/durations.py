"""Log-normal job durations by maximum likelihood, as the window lets us see them.

The simulator draws a research job's full duration log-normal, clipped to ``[60 s, time limit]``;
a completed job ran exactly that long. Two things hide durations from a window: a job still
running at the window end (so completed jobs are a sample biased short, more so the later they
started), and the clip. The likelihood takes both in: each completed job that started at ``s``
counts with its density *given* it ended by the window end ``E`` (truncated at ``E - s``), and a
duration at the limit (or at 60 s) counts as "at least" (or "at most"). Maximised by Nelder-Mead
over (mu, log sigma); standard errors from the numerical Hessian.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from gpuyield.whatif.stats import normal_cdf

#: The simulator's shortest duration.
MIN_DURATION_S = 60


@dataclass(frozen=True, kw_only=True, slots=True)
class LogNormalFit:
    """Maximum-likelihood log-normal parameters and their standard errors."""

    mu: float
    sigma: float
    se_mu: float
    se_log_sigma: float
    n: int

    @property
    def median_s(self) -> float:
        """exp(mu)."""
        return math.exp(self.mu)


def fit_lognormal(
    durations: np.ndarray, room: np.ndarray, limit_s: float, *, min_n: int = 3
) -> LogNormalFit | None:
    """Fit ``durations`` (seconds) of jobs that could have run at most ``room`` seconds before
    the window ended; ``limit_s`` is the time limit. None with fewer than ``min_n`` durations."""
    d = np.asarray(durations, dtype=float)
    room = np.asarray(room, dtype=float)
    if d.size < min_n:
        return None
    logs = np.log(np.clip(d, 1.0, None))
    start = np.array([float(np.median(logs)), math.log(max(float(np.std(logs)), 0.05))])

    def nll(theta: np.ndarray) -> float:
        return _negative_log_likelihood(theta, d, room, limit_s)

    best = _nelder_mead(nll, start)
    best = np.array(
        [
            min(max(best[0], _MU_RANGE[0]), _MU_RANGE[1]),
            min(max(best[1], _LOG_SIGMA_RANGE[0]), _LOG_SIGMA_RANGE[1]),
        ]
    )
    cov = _inverse_hessian(nll, best)
    return LogNormalFit(
        mu=float(best[0]),
        sigma=float(math.exp(best[1])),
        se_mu=float(math.sqrt(max(cov[0, 0], 0.0))),
        se_log_sigma=float(math.sqrt(max(cov[1, 1], 0.0))),
        n=int(d.size),
    )


# Where the search may go: medians from 1 s to 3 years, sigmas from 0.01 to 10 (a likelihood
# that keeps rising past them, as a handful of jobs all at the clip can make it, stops there).
_MU_RANGE = (0.0, math.log(1e8))
_LOG_SIGMA_RANGE = (math.log(0.01), math.log(10.0))


def _negative_log_likelihood(
    theta: np.ndarray, d: np.ndarray, room: np.ndarray, limit_s: float
) -> float:
    mu = min(max(float(theta[0]), _MU_RANGE[0]), _MU_RANGE[1])
    sigma = math.exp(min(max(float(theta[1]), _LOG_SIGMA_RANGE[0]), _LOG_SIGMA_RANGE[1]))
    top = d >= limit_s
    bottom = d <= MIN_DURATION_S
    inside = ~(top | bottom)
    z = (np.log(np.clip(d, 1.0, None)) - mu) / sigma
    total = float(np.sum(-0.5 * z[inside] ** 2 - math.log(sigma) - np.log(d[inside])))
    if top.any():
        total += float(top.sum()) * _log(1.0 - _cdf((math.log(limit_s) - mu) / sigma))
    if bottom.any():
        total += float(bottom.sum()) * _log(_cdf((math.log(MIN_DURATION_S) - mu) / sigma))
    cut = room < limit_s  # a job with room past the limit was sure to end in the window
    if cut.any():
        seen = normal_cdf((np.log(np.clip(room[cut], 1.0, None)) - mu) / sigma)
        total -= float(np.sum(np.log(np.clip(seen, 1e-300, None))))
    return -total


def _cdf(z: float) -> float:
    return float(normal_cdf(np.array([z]))[0])


def _log(x: float) -> float:
    return math.log(max(x, 1e-300))


Objective = Callable[[np.ndarray], float]


def _nelder_mead(func: Objective, x0: np.ndarray, *, steps: int = 400) -> np.ndarray:
    """Minimise ``func`` from ``x0`` (two dimensions) by Nelder-Mead."""
    simplex = [x0, x0 + np.array([0.3, 0.0]), x0 + np.array([0.0, 0.3])]
    values = [func(x) for x in simplex]
    for _ in range(steps):
        order = np.argsort(values)
        simplex = [simplex[i] for i in order]
        values = [values[i] for i in order]
        if abs(values[-1] - values[0]) < 1e-10:
            break
        centre = np.mean(simplex[:-1], axis=0)
        reflected = centre + (centre - simplex[-1])
        fr = func(reflected)
        if fr < values[0]:
            expanded = centre + 2 * (centre - simplex[-1])
            fe = func(expanded)
            simplex[-1], values[-1] = (expanded, fe) if fe < fr else (reflected, fr)
        elif fr < values[-2]:
            simplex[-1], values[-1] = reflected, fr
        else:
            contracted = centre + 0.5 * (simplex[-1] - centre)
            fc = func(contracted)
            if fc < values[-1]:
                simplex[-1], values[-1] = contracted, fc
            else:
                simplex = [simplex[0] + 0.5 * (x - simplex[0]) for x in simplex]
                values = [func(x) for x in simplex]
    return simplex[int(np.argmin(values))]


def _inverse_hessian(func: Objective, x: np.ndarray, h: float = 1e-3) -> np.ndarray:
    """Covariance of a maximum-likelihood estimate: the inverse of the negative log-likelihood's
    Hessian, by central differences."""
    n = x.size
    hess = np.zeros((n, n))
    for i in range(n):
        for j in range(n):
            ei, ej = np.eye(n)[i] * h, np.eye(n)[j] * h
            hess[i, j] = (
                func(x + ei + ej) - func(x + ei - ej) - func(x - ei + ej) + func(x - ei - ej)
            ) / (4 * h * h)
    try:
        return np.linalg.inv(hess)
    except np.linalg.LinAlgError:
        return np.full((n, n), np.inf)
