"""DivergenceWatch: each detector on series whose answer follows from the documented rules."""

from __future__ import annotations

import itertools
import logging
import math
import statistics

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from gpuyield.errors import InputError
from gpuyield.guard import (
    DivergenceError,
    DivergenceEvent,
    DivergenceWatch,
    EventKind,
    WatchConfig,
)

# Small windows keep the series short; the rules are the same at the defaults.
_CONFIG = WatchConfig(warmup_points=10, window=20, sustain_points=5)
# The threshold rules, one point at a time (spike_points=1: report the first point above).
_SINGLE = WatchConfig(warmup_points=10, window=20, sustain_points=5, spike_points=1)
_LEVEL = 2.0
# With a flat history the MAD is 0, so sigma is the noise floor: rel_noise_floor x level.
_FLOOR_SIGMA = _CONFIG.rel_noise_floor * _LEVEL
_SPIKE_THRESHOLD = _LEVEL + _CONFIG.spike_z * _FLOOR_SIGMA  # 2.12


def _feed(watch: DivergenceWatch, losses: list[float], start: int = 0) -> list[DivergenceEvent]:
    found: list[DivergenceEvent] = []
    for offset, loss in enumerate(losses):
        found += watch.update(start + offset, loss=loss)
    return found


def _kinds(events: list[DivergenceEvent] | tuple[DivergenceEvent, ...]) -> list[EventKind]:
    return [e.kind for e in events]


def test_spike_threshold_on_a_flat_history() -> None:
    below = DivergenceWatch(_SINGLE)
    assert _feed(below, [_LEVEL] * 20 + [_SPIKE_THRESHOLD - 1e-9]) == []
    above = DivergenceWatch(_SINGLE)
    (event,) = _feed(above, [_LEVEL] * 20 + [_SPIKE_THRESHOLD + 1e-6])
    assert (event.step, event.kind, event.metric) == (20, EventKind.LOSS_SPIKE, "loss")
    assert event.baseline == _LEVEL
    assert event.threshold == pytest.approx(_SPIKE_THRESHOLD)


def _mad_sigma(values: list[float]) -> float:
    """The documented noise: 1.4826 x the MAD of consecutive differences, over sqrt 2."""
    diffs = [b - a for a, b in itertools.pairwise(values)]
    centre = statistics.median(diffs)
    return 1.4826 * statistics.median(abs(d - centre) for d in diffs) / math.sqrt(2)


def test_spike_threshold_follows_the_mad_of_the_differences() -> None:
    # Irregular noise around 2.0: sigma from the differences' MAD (above the 0.02 floor).
    history = [2.0 + 0.1 * math.sin(1.7 * i) for i in range(20)]
    level = statistics.median(history[-_CONFIG.level_points :])
    threshold = level + _CONFIG.spike_z * _mad_sigma(history)
    assert _mad_sigma(history) > _FLOOR_SIGMA
    assert _feed(DivergenceWatch(_SINGLE), [*history, threshold - 1e-6]) == []
    (event,) = _feed(DivergenceWatch(_SINGLE), [*history, threshold + 1e-6])
    assert event.threshold == pytest.approx(threshold) and event.baseline == pytest.approx(level)


def test_a_falling_curve_is_not_noise() -> None:
    # Falling 0.05 per point with +-0.5% wiggles: the values' spread (about 0.5) would put the
    # threshold 3 loss units up; the differences' spread is the wiggle alone.
    falling = [10.0 - 0.05 * i + 0.05 * ((i * 7) % 3 - 1) for i in range(60)]
    jumped = [x * 1.6 if i >= 40 else x for i, x in enumerate(falling)]
    events = _feed(DivergenceWatch(WatchConfig()), jumped)
    assert _kinds(events)[:1] == [EventKind.LOSS_SPIKE]
    assert events[0].step == 40 and events[0].reported_step == 42
    assert events[0].threshold - events[0].baseline < 1.5
    assert _feed(DivergenceWatch(WatchConfig()), falling) == []


def test_one_bad_batch_is_not_a_spike_but_three_times_the_level_is() -> None:
    # Healthy per-step logs lift one point up to 1.93x and fall back (tests/data/training-curves).
    assert _feed(DivergenceWatch(_CONFIG), [_LEVEL] * 20 + [_LEVEL * 1.93] + [_LEVEL] * 20) == []
    (event,) = _feed(DivergenceWatch(_CONFIG), [_LEVEL] * 20 + [_LEVEL * 3.0] + [_LEVEL] * 5)
    assert (event.step, event.kind, event.reported_step) == (20, EventKind.LOSS_SPIKE, None)


def test_no_spike_during_warmup() -> None:
    watch = DivergenceWatch(_CONFIG)
    assert _feed(watch, [_LEVEL] * 9 + [100.0]) == []


def test_a_recovered_spike_is_not_a_divergence() -> None:
    watch = DivergenceWatch(_CONFIG)
    losses = [_LEVEL] * 20 + [5.0, 4.0, 3.0] + [_LEVEL] * 20
    assert _kinds(_feed(watch, losses)) == [EventKind.LOSS_SPIKE]


def test_sustained_excursion_is_a_divergence_after_k_points() -> None:
    watch = DivergenceWatch(_CONFIG)
    events = _feed(watch, [_LEVEL] * 20 + [5.0] * 30)
    assert _kinds(events) == [EventKind.LOSS_SPIKE, EventKind.DIVERGENCE]
    # The spike names the jump's first step, reported once it lasted spike_points points.
    assert (events[0].step, events[0].reported_step) == (20, 20 + _CONFIG.spike_points - 1)
    # The jump is point 1 of the excursion, so the K-th point above is K-1 steps later.
    assert events[1].step == 20 + _CONFIG.sustain_points - 1
    assert events[1].baseline == _LEVEL
    assert events[1].threshold == pytest.approx(_LEVEL + _CONFIG.sustain_z * _FLOOR_SIGMA)


def test_diverged_points_do_not_become_the_new_normal() -> None:
    watch = DivergenceWatch(_CONFIG)
    _feed(watch, [_LEVEL] * 20 + [5.0] * 100)
    # Back to normal, then a new jump: detected against the healthy level, not 5.0.
    events = _feed(watch, [_LEVEL] * 5 + [3.0] * 3, start=120)
    assert _kinds(events) == [EventKind.LOSS_SPIKE]
    assert events[0].baseline == _LEVEL and events[0].step == 125


def test_a_restart_ends_the_excursion() -> None:
    watch = DivergenceWatch(_CONFIG)
    _feed(watch, [_LEVEL] * 20 + [5.0, 5.0])
    # Rolled back to step 15: the old excursion is over; a healthy replay raises nothing.
    assert _feed(watch, [_LEVEL] * 30, start=15) == []


def test_nonfinite_loss_reported_once_per_run_of_nans() -> None:
    watch = DivergenceWatch(_CONFIG)
    events = _feed(watch, [_LEVEL, math.nan, math.nan, _LEVEL, math.inf])
    assert [(e.step, e.kind) for e in events] == [
        (1, EventKind.NONFINITE),
        (4, EventKind.NONFINITE),
    ]


def test_inf_grad_norm_is_normal_under_loss_scaling() -> None:
    watch = DivergenceWatch(_CONFIG)
    assert watch.update(1, loss=_LEVEL, grad_norm=math.inf, loss_scale=65536) == []
    (event,) = watch.update(2, loss=_LEVEL, grad_norm=math.inf)
    assert (event.kind, event.metric) == (EventKind.NONFINITE, "grad_norm")


def test_grad_norm_explosion_is_a_factor_over_the_median() -> None:
    watch = DivergenceWatch(_CONFIG)
    for step in range(20):
        assert watch.update(step, grad_norm=0.5) == []
    assert watch.update(20, grad_norm=0.5 * _CONFIG.grad_norm_factor) == []  # equal: not above
    (event,) = watch.update(21, grad_norm=0.5 * _CONFIG.grad_norm_factor * 1.01)
    assert event.kind is EventKind.GRAD_NORM_EXPLOSION
    assert event.baseline == pytest.approx(0.5)
    assert watch.update(22, grad_norm=100.0) == []  # same excursion: reported once


def test_loss_scale_collapse() -> None:
    watch = DivergenceWatch(_CONFIG)
    for step in range(20):
        assert watch.update(step, loss_scale=65536.0) == []
    # Halvings: 32768 .. 8192 are above 65536/16 = 4096; 4096 is the collapse.
    scales = [32768.0, 16384.0, 8192.0, 4096.0, 2048.0]
    found = [e for i, s in enumerate(scales) for e in watch.update(20 + i, loss_scale=s)]
    assert [(e.step, e.value, e.threshold) for e in found] == [(23, 4096.0, 4096.0)]


def test_loss_scale_at_the_minimum_collapses_even_early() -> None:
    (event,) = DivergenceWatch(_CONFIG).update(0, loss_scale=1.0)
    assert event.kind is EventKind.LOSS_SCALE_COLLAPSE


def test_action_stop_sets_should_stop(caplog: pytest.LogCaptureFixture) -> None:
    watch = DivergenceWatch(_CONFIG, action="stop")
    with caplog.at_level(logging.WARNING, logger="gpuyield.guard"):
        _feed(watch, [_LEVEL] * 20)
        assert not watch.should_stop
        _feed(watch, [10.0], start=20)
    assert watch.should_stop
    assert "loss_spike at step 20" in caplog.text


def test_action_raise() -> None:
    watch = DivergenceWatch(_CONFIG, action="raise")
    _feed(watch, [_LEVEL] * 20)
    with pytest.raises(DivergenceError) as caught:
        watch.update(20, loss=10.0)
    assert caught.value.event.step == 20 and caught.value.hint


def test_act_on_limits_the_kinds_acted_on() -> None:
    watch = DivergenceWatch(_CONFIG, action="raise", act_on=["divergence"])
    events = _feed(watch, [_LEVEL] * 20 + [10.0])  # a spike: recorded, not raised
    assert _kinds(events) == [EventKind.LOSS_SPIKE]
    with pytest.raises(DivergenceError):
        _feed(watch, [10.0] * 10, start=21)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"window": 0},
        {"warmup_points": 30, "window": 20},
        {"grad_norm_factor": 1.0},
        {"sustain_z": 7.0, "spike_z": 6.0},
        {"spike_z": -1.0},
        {"spike_points": 0},
        {"level_points": 0},
        {"immediate_factor": 1.0},
        {"spike_points": 30, "sustain_points": 25},
    ],
)
def test_config_validation(kwargs: dict[str, float]) -> None:
    with pytest.raises(InputError, match=r"watch\."):
        WatchConfig(**kwargs)  # type: ignore[arg-type]


def test_unknown_action() -> None:
    with pytest.raises(InputError, match="unknown watch action"):
        DivergenceWatch(action="panic")


def test_non_numeric_loss_is_an_input_error() -> None:
    with pytest.raises(InputError, match="loss must be a number"):
        DivergenceWatch().update(0, loss="high")  # type: ignore[arg-type]


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.floats(min_value=1e-3, max_value=1e3), min_size=1, max_size=300),
)
def test_a_non_increasing_loss_never_alarms(losses: list[float]) -> None:
    # Each point is <= every earlier point, hence <= the rolling median: no spike can fire.
    watch = DivergenceWatch(WatchConfig(warmup_points=0, window=16))
    assert _feed(watch, sorted(losses, reverse=True)) == []


@settings(max_examples=100, deadline=None)
@given(
    level=st.floats(min_value=0.1, max_value=100.0),
    jump=st.floats(min_value=0.0, max_value=1.0),
)
def test_flat_history_spike_rule(level: float, jump: float) -> None:
    # Flat history: fires iff loss > level * (1 + spike_z * rel_noise_floor).
    config = WatchConfig(warmup_points=5, window=8, spike_points=1)
    loss = level * (1 + jump)
    events = _feed(DivergenceWatch(config), [level] * 8 + [loss])
    threshold = level + config.spike_z * config.rel_noise_floor * level
    assume(abs(loss - threshold) > 1e-9 * level)  # the exact boundary is a rounding question
    assert bool(events) == (loss > threshold)


def test_slow_climb_without_a_spike_is_a_divergence() -> None:
    # +0.1% per point never jumps 10 sigmas above the rolling median, but the median itself
    # climbs: once it is drift_rel (20%) above the lowest full-window median, that is divergence.
    config = WatchConfig(warmup_points=10, window=20)
    losses = [_LEVEL] * 40 + [_LEVEL * 1.001**i for i in range(1, 400)]
    events = _feed(DivergenceWatch(config), losses)
    assert _kinds(events) == [EventKind.DIVERGENCE]
    (event,) = events
    assert event.metric == "loss_median" and event.baseline == _LEVEL
    # The median of the last 20 points is the climb ~10 points back; it passes 2.4 then.
    first_over = next(i for i, x in enumerate(losses) if x > _LEVEL * 1.2)
    assert first_over < event.step <= first_over + config.window // 2 + 1
