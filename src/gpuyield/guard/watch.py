"""A streaming divergence detector over loss, grad norm and loss scale.

``DivergenceWatch.update(step, loss=..., grad_norm=..., loss_scale=...)`` is called once per logged
step and returns the events it found at that step. What it looks for:

- ``nonfinite``: loss is NaN/Inf (or grad norm is, when no loss scaler is in use: with fp16 dynamic
  loss scaling an Inf grad norm is a normal skipped step, and persistent overflow shows up as a
  loss-scale collapse instead).
- ``loss_spike``: the loss sits more than ``spike_z`` robust standard deviations above the rolling
  median of the last ``window`` healthy points (sigma = 1.4826 x MAD, never below
  ``rel_noise_floor`` x |median|, so a very smooth curve does not make every wiggle a spike), after
  ``warmup_points``.
- ``divergence``: after a spike, the loss stayed above its pre-spike level + ``sustain_z`` sigma for
  ``sustain_points`` logged points in a row: the run did not recover by itself; or, without any
  spike, the rolling median climbed ``drift_rel`` (and ``sustain_z`` robust sigmas) above the
  lowest rolling median seen (a slow climb, which a rolling baseline would otherwise absorb).
- ``grad_norm_explosion``: grad norm above ``grad_norm_factor`` x its rolling median.
- ``loss_scale_collapse``: the loss scale fell to ``loss_scale_factor`` times below its rolling
  maximum, or to ``min_loss_scale`` or less (fp16 overflowing on every step).

Points inside an excursion (from a spike or explosion until the metric is back near its baseline)
are kept out of the rolling windows, so a run that stays diverged never becomes the new normal, and
each excursion reports once. A step number lower than the previous one (a restart from a checkpoint)
ends open excursions. This module imports only the standard library.
"""

from __future__ import annotations

import bisect
import logging
import math
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import SupportsFloat

from gpuyield.errors import GpuyieldError, InputError

logger = logging.getLogger("gpuyield.guard")

#: 1.4826 x MAD estimates the standard deviation of normal noise.
_MAD_TO_SIGMA = 1.4826


class EventKind(StrEnum):
    """What the watch found."""

    NONFINITE = "nonfinite"
    LOSS_SPIKE = "loss_spike"
    DIVERGENCE = "divergence"
    GRAD_NORM_EXPLOSION = "grad_norm_explosion"
    LOSS_SCALE_COLLAPSE = "loss_scale_collapse"


class Action(StrEnum):
    """What the watch does when it finds an event."""

    # Log a warning on the "gpuyield.guard" logger and carry on.
    WARN = "warn"
    # Log, and set ``should_stop`` so the training loop (or a callback) stops cleanly.
    STOP = "stop"
    # Log, and raise ``DivergenceError`` from ``update``.
    RAISE = "raise"


@dataclass(frozen=True, kw_only=True, slots=True)
class WatchConfig:
    """Thresholds of the divergence watch; the defaults are tuned in ``bench/guard.py``."""

    #: Healthy points seen before the spike and explosion tests start.
    warmup_points: int = 20
    #: Rolling window, in logged points, for the medians, the MAD and the loss-scale maximum.
    window: int = 64
    #: Robust z-score above the rolling median that makes a loss spike. 10, not the textbook 3-6:
    #: batch losses have heavy tails, and at 6 the bench's healthy curves gave ~70 alarms per 100k
    #: steps (2-5 at 10) while every real BigScience spike is still caught at its first point.
    spike_z: float = 10.0
    #: Floor of the robust sigma, as a fraction of |median loss| (a smooth curve is not noise-free):
    #: with the default spike_z a spike is at least 10% above the median.
    rel_noise_floor: float = 0.01
    #: After a spike, "still above the pre-spike level" means above median + sustain_z x sigma.
    sustain_z: float = 3.0
    #: Logged points in a row above the pre-spike level that make a divergence.
    sustain_points: int = 25
    #: A rolling median this fraction above the lowest one seen is a slow divergence.
    drift_rel: float = 0.2
    #: Grad norm above this many times its rolling median is an explosion.
    grad_norm_factor: float = 10.0
    #: Loss scale at or below its rolling max divided by this is a collapse.
    loss_scale_factor: float = 16.0
    #: Loss scale at or below this is a collapse at any time (fp16 overflowing on every step).
    min_loss_scale: float = 1.0

    def __post_init__(self) -> None:
        positive = {
            "window": self.window,
            "spike_z": self.spike_z,
            "sustain_z": self.sustain_z,
            "sustain_points": self.sustain_points,
            "rel_noise_floor": self.rel_noise_floor,
            "drift_rel": self.drift_rel,
        }
        for name, value in positive.items():
            if not value > 0:
                raise InputError(f"watch.{name} must be > 0, got {value!r}")
        if self.warmup_points < 0:
            raise InputError(f"watch.warmup_points must be >= 0, got {self.warmup_points}")
        if self.warmup_points > self.window:
            raise InputError(
                f"watch.warmup_points ({self.warmup_points}) must not exceed watch.window "
                f"({self.window})",
                hint="the warm-up fills the rolling window; make the window at least as long",
            )
        for name, value in (
            ("grad_norm_factor", self.grad_norm_factor),
            ("loss_scale_factor", self.loss_scale_factor),
        ):
            if not value > 1:
                raise InputError(f"watch.{name} must be > 1, got {value!r}")
        if self.sustain_z > self.spike_z:
            raise InputError(
                f"watch.sustain_z ({self.sustain_z}) must not exceed watch.spike_z ({self.spike_z})"
            )


@dataclass(frozen=True, kw_only=True, slots=True)
class DivergenceEvent:
    """One finding, with its evidence."""

    #: The step at which it was found.
    step: int
    #: What was found.
    kind: EventKind
    #: The metric that tripped: "loss", "loss_median" (a slow climb), "grad_norm", "loss_scale".
    metric: str
    #: The metric's value at ``step``.
    value: float
    #: The threshold it crossed (for a collapse, the value it fell to or below).
    threshold: float
    #: The healthy level it was compared with (rolling median or max; the pre-spike level for a
    #: divergence); None for non-finite values.
    baseline: float | None = None
    #: Epoch seconds when the step was logged, when known.
    t: float | None = None
    #: The step of the last checkpoint saved before the event (roll back there), when known.
    rollback_step: int | None = None

    def describe(self) -> str:
        """One line for logs: what, where, and the evidence."""
        base = f", baseline {self.baseline:.6g}" if self.baseline is not None else ""
        rollback = (
            f"; last checkpoint at step {self.rollback_step}"
            if self.rollback_step is not None
            else ""
        )
        return (
            f"{self.kind.value} at step {self.step}: {self.metric}={self.value:.6g} "
            f"(threshold {self.threshold:.6g}{base}){rollback}"
        )


class DivergenceError(GpuyieldError):
    """Raised by the watch with action "raise": training diverged."""

    def __init__(self, event: DivergenceEvent) -> None:
        hint = (
            f"roll back to the checkpoint at step {event.rollback_step}"
            if event.rollback_step is not None
            else "roll back to the last checkpoint before this step, then lower the learning "
            "rate or skip the data batch"
        )
        super().__init__(f"training diverged: {event.describe()}", hint=hint)
        self.event = event


class _RollingMedian:
    """Median (and MAD) of the last ``size`` values, kept sorted; O(size) per update."""

    __slots__ = ("_order", "_sorted")

    def __init__(self, size: int) -> None:
        self._order: deque[float] = deque(maxlen=size)
        self._sorted: list[float] = []

    def __len__(self) -> int:
        return len(self._order)

    def push(self, value: float) -> None:
        if len(self._order) == self._order.maxlen:
            oldest = self._order[0]
            del self._sorted[bisect.bisect_left(self._sorted, oldest)]
        self._order.append(value)
        bisect.insort(self._sorted, value)

    def median(self) -> float:
        values, n = self._sorted, len(self._sorted)
        mid = n // 2
        return values[mid] if n % 2 else (values[mid - 1] + values[mid]) / 2

    def mad(self, center: float) -> float:
        deviations = sorted(abs(v - center) for v in self._sorted)
        n, mid = len(deviations), len(deviations) // 2
        return deviations[mid] if n % 2 else (deviations[mid - 1] + deviations[mid]) / 2

    def clear(self) -> None:
        self._order.clear()
        self._sorted.clear()


@dataclass(kw_only=True, slots=True)
class _Excursion:
    """An open loss excursion: where it started and the level it left."""

    start_step: int
    level: float
    sigma: float
    points_above: int = 1
    reported_divergence: bool = False


@dataclass(kw_only=True, slots=True)
class _State:
    """Mutable detector state (kept apart from the public class for clarity)."""

    loss: _RollingMedian
    log_grad_norm: _RollingMedian
    loss_scales: deque[float]
    loss_points: int = 0
    last_step: int | None = None
    excursion: _Excursion | None = None
    best_median: float | None = None
    in_drift: bool = False
    in_grad_explosion: bool = False
    in_nonfinite: bool = False
    in_scale_collapse: bool = False
    events: list[DivergenceEvent] = field(default_factory=list)


def _as_float(name: str, value: SupportsFloat | None) -> float | None:
    if value is None:
        return None
    try:
        return float(value)
    except (TypeError, ValueError) as error:
        raise InputError(f"watch.update: {name} must be a number, got {value!r}") from error


class DivergenceWatch:
    """Streaming detector; feed it every logged step with ``update``.

    >>> watch = DivergenceWatch(action="stop")
    >>> for step, batch in enumerate(loader):
    ...     loss = train_step(batch)
    ...     watch.update(step, loss=loss.item())
    ...     if watch.should_stop:
    ...         break
    """

    def __init__(
        self,
        config: WatchConfig | None = None,
        *,
        action: Action | str = Action.WARN,
        act_on: Iterable[EventKind | str] | None = None,
    ) -> None:
        self.config = config or WatchConfig()
        try:
            self.action = Action(action)
        except ValueError as error:
            raise InputError(
                f"unknown watch action {action!r}",
                hint="choose one of: " + ", ".join(a.value for a in Action),
            ) from error
        kinds = act_on if act_on is not None else list(EventKind)
        self.act_on = frozenset(EventKind(k) for k in kinds)
        self.should_stop = False
        self._state = self._fresh_state()

    def _fresh_state(self) -> _State:
        size = self.config.window
        return _State(
            loss=_RollingMedian(size),
            log_grad_norm=_RollingMedian(size),
            loss_scales=deque(maxlen=size),
        )

    @property
    def events(self) -> tuple[DivergenceEvent, ...]:
        """Every event found so far, in order."""
        return tuple(self._state.events)

    def reset(self) -> None:
        """Forget all history (a new run); ``events`` and ``should_stop`` are cleared too."""
        self._state = self._fresh_state()
        self.should_stop = False

    def update(
        self,
        step: int,
        *,
        loss: SupportsFloat | None = None,
        grad_norm: SupportsFloat | None = None,
        loss_scale: SupportsFloat | None = None,
        t: float | None = None,
    ) -> list[DivergenceEvent]:
        """Feed one logged step; returns the events found at it (and acts on them)."""
        state = self._state
        if state.last_step is not None and step < state.last_step:
            self._restart()
        state.last_step = step
        loss_f = _as_float("loss", loss)
        grad_f = _as_float("grad_norm", grad_norm)
        scale_f = _as_float("loss_scale", loss_scale)
        found: list[DivergenceEvent] = []
        found += self._check_nonfinite(step, t, loss_f, grad_f, scale_f)
        if loss_f is not None and math.isfinite(loss_f):
            found += self._check_loss(step, t, loss_f)
        if grad_f is not None and math.isfinite(grad_f) and grad_f > 0:
            found += self._check_grad_norm(step, t, grad_f)
        if scale_f is not None and math.isfinite(scale_f):
            found += self._check_loss_scale(step, t, scale_f)
        state.events.extend(found)
        for event in found:
            self._act(event)
        return found

    def _restart(self) -> None:
        """The step went backwards (a restart): the old attempt's excursions end."""
        state = self._state
        state.excursion = None
        state.in_grad_explosion = state.in_nonfinite = state.in_scale_collapse = False

    def _act(self, event: DivergenceEvent) -> None:
        if event.kind not in self.act_on:
            return
        logger.warning("gpuyield divergence watch: %s", event.describe())
        if self.action is Action.STOP:
            self.should_stop = True
        elif self.action is Action.RAISE:
            self.should_stop = True
            raise DivergenceError(event)

    def _check_nonfinite(
        self,
        step: int,
        t: float | None,
        loss: float | None,
        grad_norm: float | None,
        loss_scale: float | None,
    ) -> list[DivergenceEvent]:
        state = self._state
        bad: tuple[str, float] | None = None
        if loss is not None and not math.isfinite(loss):
            bad = ("loss", loss)
        elif grad_norm is not None and not math.isfinite(grad_norm) and loss_scale is None:
            bad = ("grad_norm", grad_norm)
        if bad is None:
            state.in_nonfinite = False
            return []
        if state.in_nonfinite:
            return []
        state.in_nonfinite = True
        metric, value = bad
        return [
            DivergenceEvent(
                step=step,
                kind=EventKind.NONFINITE,
                metric=metric,
                value=value,
                threshold=math.inf,
                t=t,
            )
        ]

    def _check_loss(self, step: int, t: float | None, loss: float) -> list[DivergenceEvent]:
        state, config = self._state, self.config
        if state.excursion is not None:
            return self._continue_excursion(step, t, loss, state.excursion)
        if state.loss_points >= config.warmup_points and len(state.loss) > 0:
            median = state.loss.median()
            floor = config.rel_noise_floor * abs(median)
            # Cheap pre-test: below this the z-score cannot reach spike_z, so skip the MAD.
            if loss - median > config.spike_z * floor:
                sigma = max(_MAD_TO_SIGMA * state.loss.mad(median), floor)
                threshold = median + config.spike_z * sigma
                if loss > threshold:
                    state.excursion = _Excursion(start_step=step, level=median, sigma=sigma)
                    return [
                        DivergenceEvent(
                            step=step,
                            kind=EventKind.LOSS_SPIKE,
                            metric="loss",
                            value=loss,
                            threshold=threshold,
                            baseline=median,
                            t=t,
                        )
                    ]
        state.loss.push(loss)
        state.loss_points += 1
        return self._check_drift(step, t)

    def _check_drift(self, step: int, t: float | None) -> list[DivergenceEvent]:
        """A slow climb: the rolling median well above the lowest full-window median so far."""
        state, config = self._state, self.config
        if state.loss_points < config.window:
            return []
        median = state.loss.median()
        best = median if state.best_median is None else min(state.best_median, median)
        state.best_median = best
        threshold = best + config.drift_rel * abs(best)
        if median > threshold:
            # Noise-aware: on a very noisy curve the lowest median is itself luck, so the climb
            # must also exceed sustain_z robust sigmas of the points (MAD only computed here).
            sigma = _MAD_TO_SIGMA * state.loss.mad(median)
            threshold = max(threshold, best + config.sustain_z * sigma)
        if median <= threshold:
            state.in_drift = False
            return []
        if state.in_drift:
            return []
        state.in_drift = True
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

    def _continue_excursion(
        self, step: int, t: float | None, loss: float, excursion: _Excursion
    ) -> list[DivergenceEvent]:
        state, config = self._state, self.config
        threshold = excursion.level + config.sustain_z * excursion.sigma
        if loss <= threshold:
            state.excursion = None  # recovered: a spike, not a divergence
            state.loss.push(loss)
            state.loss_points += 1
            return []
        excursion.points_above += 1
        if excursion.points_above < config.sustain_points or excursion.reported_divergence:
            return []
        excursion.reported_divergence = True
        return [
            DivergenceEvent(
                step=step,
                kind=EventKind.DIVERGENCE,
                metric="loss",
                value=loss,
                threshold=threshold,
                baseline=excursion.level,
                t=t,
            )
        ]

    def _check_grad_norm(
        self, step: int, t: float | None, grad_norm: float
    ) -> list[DivergenceEvent]:
        state, config = self._state, self.config
        log_value = math.log(grad_norm)
        history = state.log_grad_norm
        if len(history) >= max(config.warmup_points, 1):
            median = math.exp(history.median())
            threshold = median * config.grad_norm_factor
            if grad_norm > threshold:
                if state.in_grad_explosion:
                    return []
                state.in_grad_explosion = True
                return [
                    DivergenceEvent(
                        step=step,
                        kind=EventKind.GRAD_NORM_EXPLOSION,
                        metric="grad_norm",
                        value=grad_norm,
                        threshold=threshold,
                        baseline=median,
                        t=t,
                    )
                ]
        state.in_grad_explosion = False
        history.push(log_value)
        return []

    def _check_loss_scale(
        self, step: int, t: float | None, loss_scale: float
    ) -> list[DivergenceEvent]:
        state, config = self._state, self.config
        scales = state.loss_scales
        # Until the window is full the scaler may still be searching down from its initial value.
        peak = max(scales) if len(scales) == scales.maxlen else None
        threshold = max(config.min_loss_scale, peak / config.loss_scale_factor if peak else 0.0)
        scales.append(loss_scale)
        if loss_scale > threshold:
            state.in_scale_collapse = False
            return []
        if state.in_scale_collapse:
            return []
        state.in_scale_collapse = True
        return [
            DivergenceEvent(
                step=step,
                kind=EventKind.LOSS_SCALE_COLLAPSE,
                metric="loss_scale",
                value=loss_scale,
                threshold=threshold,
                baseline=peak,
                t=t,
            )
        ]
