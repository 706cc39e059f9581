"""The loss rules of the divergence watch: jumps that persist, divergences, slow climbs.

What a point is compared with:

- the **level**: the median of the last ``level_points`` healthy points (few, so it follows a
  falling curve; the long window would lag it by half its length);
- the **noise**: sigma = 1.4826 x the MAD of the differences between consecutive healthy points
  over the last ``window``, divided by sqrt 2, never below ``rel_noise_floor`` x |level|. A curve
  that falls by 0.05 per step has differences near -0.05, whose spread is its noise alone; the
  spread of its values, which the watch used before, also held the descent and hid jumps on steep
  stretches.

A point above level + ``spike_z`` sigma opens an *excursion*. It is a ``loss_spike`` once
``spike_points`` points in a row stay above level + ``sustain_z`` sigma (at once if the point is
``immediate_factor`` times the level); the event names the excursion's first step. One point that
falls back at the next step is a bad batch, common on healthy runs, and raises nothing. An
excursion still above after ``sustain_points`` points is a ``divergence``. Points inside an
excursion never enter the windows, so a diverged run does not become the new normal. A slow climb
without a jump is a divergence of the rolling median (``loss_median``): ``drift_rel`` above the
lowest full-window median and ``sustain_z`` sigmas of the values above it.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass

from gpuyield.guard._rolling import RollingMedian
from gpuyield.guard.watch_types import DivergenceEvent, EventKind, WatchConfig

#: 1.4826 x MAD estimates the standard deviation of normal noise.
MAD_TO_SIGMA = 1.4826
#: The difference of two independent draws has sqrt 2 times their standard deviation.
_DIFF_TO_POINT = 1.0 / math.sqrt(2.0)


@dataclass(kw_only=True, slots=True)
class _Excursion:
    """An open loss excursion: where it started, the level it left, and how long it has lasted."""

    start_step: int
    start_value: float
    start_t: float | None
    level: float
    sigma: float
    points_above: int = 1
    reported_spike: bool = False
    reported_divergence: bool = False


class LossWatch:
    """The loss half of ``DivergenceWatch``: feed it every finite loss in step order."""

    def __init__(self, config: WatchConfig) -> None:
        self.config = config
        self._recent: deque[float] = deque(maxlen=config.level_points)
        self._diffs = RollingMedian(config.window)
        self._values = RollingMedian(config.window)
        self._last: float | None = None
        self._points = 0
        self._excursion: _Excursion | None = None
        self._best_median: float | None = None
        self._in_drift = False

    def restart(self) -> None:
        """A restart from a checkpoint: an open excursion ends (the windows keep their history)."""
        self._excursion = None

    def _level_and_sigma(self) -> tuple[float, float]:
        """The level a new point is compared with, and the noise around it."""
        level = _median(self._recent)
        floor = self.config.rel_noise_floor * abs(level)
        if len(self._diffs) < 2:
            return level, floor
        centre = self._diffs.median()
        return level, max(MAD_TO_SIGMA * self._diffs.mad(centre) * _DIFF_TO_POINT, floor)

    def update(self, step: int, t: float | None, loss: float) -> list[DivergenceEvent]:
        """Check one finite loss; returns the events it completes."""
        if self._excursion is not None:
            return self._continue(step, t, loss, self._excursion)
        if self._points >= self.config.warmup_points and self._recent:
            opened = self._maybe_open(step, t, loss)
            if opened is not None:
                return opened
        self._push(loss)
        return self._check_drift(step, t)

    def _maybe_open(self, step: int, t: float | None, loss: float) -> list[DivergenceEvent] | None:
        """Open an excursion if ``loss`` is a jump (None when it is not)."""
        config = self.config
        level = _median(self._recent)
        # Cheap pre-test: below this the z-score cannot reach spike_z, so skip the MAD.
        if loss - level <= config.spike_z * config.rel_noise_floor * abs(level):
            return None
        level, sigma = self._level_and_sigma()
        if loss <= level + config.spike_z * sigma:
            return None
        excursion = _Excursion(
            start_step=step, start_value=loss, start_t=t, level=level, sigma=sigma
        )
        self._excursion = excursion
        immediate = level > 0 and loss >= config.immediate_factor * level
        if immediate or config.spike_points <= 1:
            return [self._spike(excursion, step)]
        return []

    def _continue(
        self, step: int, t: float | None, loss: float, excursion: _Excursion
    ) -> list[DivergenceEvent]:
        config = self.config
        threshold = excursion.level + config.sustain_z * excursion.sigma
        if loss <= threshold:
            # Back: a spike (reported or not), not a divergence; the excursion's points stay out.
            self._excursion = None
            self._push(loss)
            return self._check_drift(step, t)
        excursion.points_above += 1
        found = []
        if not excursion.reported_spike and excursion.points_above >= config.spike_points:
            found.append(self._spike(excursion, step))
        if not excursion.reported_divergence and excursion.points_above >= config.sustain_points:
            excursion.reported_divergence = True
            found.append(
                DivergenceEvent(
                    step=step,
                    kind=EventKind.DIVERGENCE,
                    metric="loss",
                    value=loss,
                    threshold=threshold,
                    baseline=excursion.level,
                    t=t,
                )
            )
        return found

    def _spike(self, excursion: _Excursion, now: int) -> DivergenceEvent:
        excursion.reported_spike = True
        return DivergenceEvent(
            step=excursion.start_step,
            kind=EventKind.LOSS_SPIKE,
            metric="loss",
            value=excursion.start_value,
            threshold=excursion.level + self.config.spike_z * excursion.sigma,
            baseline=excursion.level,
            t=excursion.start_t,
            reported_step=None if now == excursion.start_step else now,
        )

    def _push(self, loss: float) -> None:
        if self._last is not None:
            self._diffs.push(loss - self._last)
        self._last = loss
        self._recent.append(loss)
        self._values.push(loss)
        self._points += 1

    def _check_drift(self, step: int, t: float | None) -> list[DivergenceEvent]:
        """A slow climb: the rolling median well above the lowest full-window median so far."""
        config = self.config
        if self._points < config.window:
            return []
        median = self._values.median()
        best = median if self._best_median is None else min(self._best_median, median)
        self._best_median = best
        threshold = best + config.drift_rel * abs(best)
        if median > threshold:
            # Noise-aware: on a very noisy curve the lowest median is itself luck, so the climb
            # must also exceed sustain_z robust sigmas of the points (MAD only computed here).
            sigma = MAD_TO_SIGMA * self._values.mad(median)
            threshold = max(threshold, best + config.sustain_z * sigma)
        if median <= threshold:
            self._in_drift = False
            return []
        if self._in_drift:
            return []
        self._in_drift = True
        return [
            DivergenceEvent(
                step=step,
                kind=EventKind.DIVERGENCE,
                metric="loss_median",
                value=median,
                threshold=threshold,
                baseline=best,
                t=t,
            )
        ]


def _median(values: deque[float]) -> float:
    ordered = sorted(values)
    n, mid = len(ordered), len(ordered) // 2
    return ordered[mid] if n % 2 else (ordered[mid - 1] + ordered[mid]) / 2
