"""The few statistics the fit needs, exact where it is cheap and stated where it is not.

No SciPy (not a dependency of gpuyield): the regularized incomplete gamma function is computed
here (series and continued fraction, Numerical Recipes 6.2) for exact Poisson intervals, the normal
quantile comes from the standard library, and proportions use Wilson's score interval. Every
interval is two-sided at ``LEVEL`` (95%).

Each estimate carries the distribution its uncertainty is drawn from for projections
(``Spread``): a rate's Gamma posterior (Jeffreys prior), a share's Beta posterior, or a normal on
the log scale for parameters fitted by maximum likelihood.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from enum import StrEnum
from statistics import NormalDist

import numpy as np

#: Two-sided level of every interval the fit reports.
LEVEL = 0.95
_Z = NormalDist().inv_cdf(0.5 + LEVEL / 2)


class SpreadKind(StrEnum):
    """How a parameter's uncertainty is drawn for a projection."""

    # Known exactly (a setting read from the manifest, an assumption): no draw.
    FIXED = "fixed"
    # A rate: Gamma(shape, scale) (events + 1/2 over exposure).
    GAMMA = "gamma"
    # A share: Beta(a, b) (successes + 1/2, failures + 1/2).
    BETA = "beta"
    # A positive quantity fitted by maximum likelihood: log-normal around the estimate.
    LOGNORMAL = "lognormal"
    # A quantity fitted by maximum likelihood that may be any real: normal.
    NORMAL = "normal"


@dataclass(frozen=True, kw_only=True, slots=True)
class Spread:
    """The distribution a parameter is drawn from (``a``, ``b`` as ``kind`` says)."""

    kind: SpreadKind
    a: float = 0.0
    b: float = 0.0

    def draw(self, value: float, rng: np.random.Generator) -> float:
        """One draw; ``value`` is the estimate (returned as is for a fixed parameter)."""
        if self.kind is SpreadKind.GAMMA:
            return float(rng.gamma(self.a, self.b))
        if self.kind is SpreadKind.BETA:
            return float(rng.beta(self.a, self.b))
        if self.kind is SpreadKind.LOGNORMAL:
            return float(value * math.exp(rng.normal(0.0, self.a)))
        if self.kind is SpreadKind.NORMAL:
            return float(rng.normal(value, self.a))
        return value


FIXED = Spread(kind=SpreadKind.FIXED)


@dataclass(frozen=True, kw_only=True, slots=True)
class Estimate:
    """A fitted value, its interval at ``LEVEL`` and how to draw it."""

    value: float
    low: float
    high: float
    spread: Spread = FIXED


def fixed(value: float) -> Estimate:
    """A value known exactly (read from a setting) or assumed: its interval is itself."""
    return Estimate(value=value, low=value, high=value)


def poisson_rate(count: int, exposure: float) -> Estimate:
    """Events per unit of exposure, with Garwood's exact interval."""
    if exposure <= 0:
        return Estimate(value=0.0, low=0.0, high=math.inf)
    alpha = 1 - LEVEL
    low = 0.0 if count == 0 else gamma_quantile(alpha / 2, count) / exposure
    high = gamma_quantile(1 - alpha / 2, count + 1) / exposure
    spread = Spread(kind=SpreadKind.GAMMA, a=count + 0.5, b=1.0 / exposure)
    return Estimate(value=count / exposure, low=low, high=high, spread=spread)


def exponential_mean(events: int, total_time: float) -> Estimate:
    """Mean of an exponential time from ``events`` ended times summing (with the censored ones)
    to ``total_time``: the reciprocal of the rate ``events / total_time``."""
    rate = poisson_rate(events, total_time)
    if events == 0:
        return Estimate(value=math.inf, low=1.0 / rate.high, high=math.inf)
    spread = Spread(kind=SpreadKind.LOGNORMAL, a=1.0 / math.sqrt(events))
    return Estimate(
        value=total_time / events,
        low=1.0 / rate.high,
        high=math.inf if rate.low == 0 else 1.0 / rate.low,
        spread=spread,
    )


def proportion(successes: float, trials: float) -> Estimate:
    """A share with Wilson's score interval (good coverage near 0 and 1)."""
    if trials <= 0:
        return Estimate(value=0.0, low=0.0, high=1.0)
    p = successes / trials
    z2 = _Z * _Z
    centre = (p + z2 / (2 * trials)) / (1 + z2 / trials)
    half = _Z * math.sqrt(p * (1 - p) / trials + z2 / (4 * trials * trials)) / (1 + z2 / trials)
    spread = Spread(kind=SpreadKind.BETA, a=successes + 0.5, b=trials - successes + 0.5)
    # At 0 or all, the bounds are 0 or 1 exactly (rounding would leave them a hair inside).
    low = 0.0 if successes <= 0 else max(centre - half, 0.0)
    high = 1.0 if successes >= trials else min(centre + half, 1.0)
    return Estimate(value=p, low=low, high=high, spread=spread)


def log_normal_estimate(value: float, log_se: float) -> Estimate:
    """A positive maximum-likelihood estimate with standard error ``log_se`` on the log scale."""
    return Estimate(
        value=value,
        low=value * math.exp(-_Z * log_se),
        high=value * math.exp(_Z * log_se),
        spread=Spread(kind=SpreadKind.LOGNORMAL, a=log_se),
    )


def normal_estimate(value: float, se: float) -> Estimate:
    """A maximum-likelihood estimate with standard error ``se``."""
    return Estimate(
        value=value,
        low=value - _Z * se,
        high=value + _Z * se,
        spread=Spread(kind=SpreadKind.NORMAL, a=se),
    )


def median_estimate(values: list[float]) -> Estimate:
    """The median with the distribution-free interval of order statistics."""
    ordered = sorted(values)
    n = len(ordered)
    half = _Z * math.sqrt(n) / 2
    low = ordered[max(math.floor(n / 2 - half), 0)]
    high = ordered[min(math.ceil(n / 2 + half), n - 1)]
    return Estimate(value=float(statistics.median(ordered)), low=float(low), high=float(high))


def z_value() -> float:
    """The normal quantile of ``LEVEL``'s two-sided interval (1.96)."""
    return _Z


def gamma_quantile(p: float, shape: float) -> float:
    """The ``p`` quantile of Gamma(shape, 1), by bisection on the regularized incomplete gamma."""
    low, high = 0.0, max(1.0, shape)
    while regularized_gamma(shape, high) < p:
        high *= 2
    for _ in range(200):
        mid = (low + high) / 2
        if regularized_gamma(shape, mid) < p:
            low = mid
        else:
            high = mid
        if high - low <= 1e-12 * max(high, 1.0):
            break
    return (low + high) / 2


def regularized_gamma(a: float, x: float) -> float:
    """P(a, x): the Gamma(a, 1) distribution function at ``x``."""
    if x <= 0:
        return 0.0
    if x < a + 1:
        return _gamma_series(a, x)
    return 1.0 - _gamma_fraction(a, x)


def _gamma_series(a: float, x: float) -> float:
    term = total = 1.0 / a
    n = a
    for _ in range(10_000):
        n += 1
        term *= x / n
        total += term
        if abs(term) < abs(total) * 1e-15:
            break
    return total * math.exp(-x + a * math.log(x) - math.lgamma(a))


def _gamma_fraction(a: float, x: float) -> float:
    """Q(a, x) by Lentz's continued fraction."""
    tiny = 1e-300
    b = x + 1 - a
    c = 1 / tiny
    d = 1 / b
    h = d
    for i in range(1, 10_000):
        an = -i * (i - a)
        b += 2
        d = an * d + b
        d = tiny if abs(d) < tiny else d
        c = b + an / c
        c = tiny if abs(c) < tiny else c
        d = 1 / d
        delta = d * c
        h *= delta
        if abs(delta - 1) < 1e-15:
            break
    return math.exp(-x + a * math.log(x) - math.lgamma(a)) * h


# Coefficients of erfc's rational Chebyshev fit (Numerical Recipes 6.2.2), lowest order first.
_ERFC = (
    -1.26551223,
    1.00002368,
    0.37409196,
    0.09678418,
    -0.18628806,
    0.27886807,
    -1.13520398,
    1.48851587,
    -0.82215223,
    0.17087277,
)


def normal_cdf(x: np.ndarray) -> np.ndarray:
    """Standard normal distribution function, vectorised (relative error below 1.2e-7)."""
    z = -np.asarray(x, dtype=float) / math.sqrt(2.0)
    t = 1.0 / (1.0 + 0.5 * np.abs(z))
    poly = np.zeros_like(t)
    for coefficient in reversed(_ERFC):
        poly = poly * t + coefficient
    erfc = t * np.exp(-z * z + poly)
    erfc = np.where(z >= 0, erfc, 2.0 - erfc)
    return 0.5 * erfc


# Exact 97.5% quantiles of Student's t (LEVEL = 0.95), where the expansion below is poor.
_T_SMALL = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776}


def t_quantile(df: int) -> float:
    """Student's t quantile of ``LEVEL``'s two-sided interval: tabulated up to 4 degrees of
    freedom, beyond by the Cornish-Fisher expansion (within 0.1% there)."""
    if df in _T_SMALL:
        return _T_SMALL[df]
    z = _Z
    return (
        z
        + (z**3 + z) / (4 * df)
        + (5 * z**5 + 16 * z**3 + 3 * z) / (96 * df**2)
        + (3 * z**7 + 19 * z**5 + 17 * z**3 - 15 * z) / (384 * df**3)
    )
