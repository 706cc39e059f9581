"""A streaming divergence detector over loss, grad norm and loss scale.

``DivergenceWatch.update(step, loss=..., grad_norm=..., loss_scale=...)`` is called once per logged
step and returns the events it found at that step. What it looks for:

- ``nonfinite``: loss is NaN/Inf (or grad norm is, when no loss scaler is in use: with fp16 dynamic
  loss scaling an Inf grad norm is a normal skipped step, and persistent overflow shows up as a
  loss-scale collapse instead), at the first non-finite step.
- ``loss_spike``: the loss jumped more than ``spike_z`` robust standard deviations above its level
  and stayed above it for ``spike_points`` logged points (or jumped to ``immediate_factor`` times
  the level at once); the event names the jump's first step. The noise is that of the differences
  between consecutive points, so a curve's own descent is not taken for noise
  (``watch_loss.py`` has the rules).
- ``divergence``: a jump that stayed above its level for ``sustain_points`` logged points in a row
  (the run did not recover by itself); or, without any jump, the rolling median climbed
  ``drift_rel`` (and ``sustain_z`` robust sigmas) above the lowest rolling median seen.
- ``grad_norm_explosion``: grad norm above ``grad_norm_factor`` x its rolling median.
- ``loss_scale_collapse``: the loss scale fell to ``loss_scale_factor`` times below its rolling
  maximum, or to ``min_loss_scale`` or less (fp16 overflowing on every step).

Points inside an excursion are kept out of the rolling windows, so a run that stays diverged never
becomes the new normal, and each excursion reports once. A step number lower than the previous one
(a restart from a checkpoint) ends open excursions. This module imports only the standard library.
"""

from __future__ import annotations

import logging
import math
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import SupportsFloat

from gpuyield.errors import InputError
from gpuyield.guard._rolling import RollingMedian
from gpuyield.guard.watch_loss import LossWatch
from gpuyield.guard.watch_types import (
    Action,
    DivergenceError,
    DivergenceEvent,
    EventKind,
    WatchConfig,
)

__all__ = [
    "Action",
    "DivergenceError",
    "DivergenceEvent",
    "DivergenceWatch",
    "EventKind",
    "WatchConfig",
]

logger = logging.getLogger("gpuyield.guard")


@dataclass(kw_only=True, slots=True)
class _State:
    """Mutable detector state (kept apart from the public class for clarity)."""

    loss: LossWatch
    log_grad_norm: RollingMedian
    loss_scales: deque[float]
    last_step: int | None = None
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
            loss=LossWatch(self.config),
            log_grad_norm=RollingMedian(size),
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
            found += state.loss.update(step, t, loss_f)
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
        state.loss.restart()
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
