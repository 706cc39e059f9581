"""The divergence watch's vocabulary: what it finds, what it does, its thresholds, its findings.

Kept apart from the detectors (``watch.py``, ``watch_loss.py``) so both can use them without an
import cycle; ``gpuyield.guard.watch`` re-exports every name. Standard library and core only.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from gpuyield.errors import GpuyieldError, InputError


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
    #: Robust z-score above the level that starts a loss excursion. Sigma is the noise of the
    #: *differences* between consecutive healthy points (1.4826 x their MAD / sqrt 2), so a
    #: falling curve's descent does not count as noise. 6, with ``spike_points`` 3: on 138 real
    #: healthy curves (tests/data/training-curves) 5, 6 and 8 all raise nothing, and 6 and 8 catch
    #: every +60% jump within 5 points (10 missed two on the noisiest curve by 46 points).
    spike_z: float = 6.0
    #: Floor of the robust sigma, as a fraction of |level| (a smooth curve is not noise-free):
    #: with the default spike_z an excursion starts at least 6% above the level.
    rel_noise_floor: float = 0.01
    #: "Still above the level" means above level + sustain_z x sigma.
    sustain_z: float = 3.0
    #: Logged points in a row above the level (the first one above spike_z) that make a
    #: ``loss_spike``. 3, not 1: a single batch can lift a logged loss up to 1.93x and fall back at
    #: the next step on healthy runs (modded-nanogpt's record logs, tests/data/training-curves).
    spike_points: int = 3
    #: A single point this many times the level is a ``loss_spike`` at once (a poisoned batch, a
    #: blow-up), without waiting for ``spike_points``.
    immediate_factor: float = 3.0
    #: Healthy points whose median is the level a point is compared with: few, so the level
    #: follows a falling curve (the long ``window`` would lag it by half its length).
    level_points: int = 8
    #: Logged points in a row above the level that make a divergence (the run did not recover).
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
            "spike_points": self.spike_points,
            "level_points": self.level_points,
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
            ("immediate_factor", self.immediate_factor),
        ):
            if not value > 1:
                raise InputError(f"watch.{name} must be > 1, got {value!r}")
        if self.sustain_z > self.spike_z:
            raise InputError(
                f"watch.sustain_z ({self.sustain_z}) must not exceed watch.spike_z ({self.spike_z})"
            )
        if self.spike_points > self.sustain_points:
            raise InputError(
                f"watch.spike_points ({self.spike_points}) must not exceed watch.sustain_points "
                f"({self.sustain_points})",
                hint="a divergence is a spike that lasted longer",
            )


@dataclass(frozen=True, kw_only=True, slots=True)
class DivergenceEvent:
    """One finding, with its evidence."""

    #: The step where it happened (for a loss spike, the first point of the jump).
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
    #: The step at which the watch had the evidence and reported it (later than ``step`` when a
    #: jump had to persist for ``spike_points``); None when it is ``step``.
    reported_step: int | None = None

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
