"""The simulator's ladder knob: rung-skipping research jobs fail more, and what enforcing saves."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from gpuyield.errors import InputError
from gpuyield.simulate.calibration import RSC1_END_STATES
from gpuyield.simulate.ladder import run_ladder_sweep
from gpuyield.simulate.research import (
    _OUTCOME_CODES,
    LADDER_BAD_OUTCOMES,
    draw_jobs,
    skip_end_states,
)
from gpuyield.simulate.research_layout import plan_layout
from gpuyield.simulate.scenario import FleetConfig, ResearchConfig, Scenario

OUTCOMES = list(RSC1_END_STATES)
PROBS = np.array([RSC1_END_STATES[o] for o in OUTCOMES]) / sum(RSC1_END_STATES.values())
BAD = np.array([o in LADDER_BAD_OUTCOMES for o in OUTCOMES])
BAD_CODES = [_OUTCOME_CODES[o] for o in LADDER_BAD_OUTCOMES]


def test_skip_end_states_scales_the_bad_outcomes() -> None:
    assert np.allclose(skip_end_states(OUTCOMES, PROBS, 1.0), PROBS)
    doubled = skip_end_states(OUTCOMES, PROBS, 2.0)
    assert doubled.sum() == pytest.approx(1.0)
    assert np.allclose(doubled[BAD], 2 * PROBS[BAD])
    # The other states keep their proportions among themselves.
    good = ~BAD
    assert np.allclose(doubled[good] / doubled[good].sum(), PROBS[good] / PROBS[good].sum())
    assert skip_end_states(OUTCOMES, PROBS, 100.0)[BAD].sum() == pytest.approx(0.99)


def _scenario(share: float, multiplier: float = 3.0) -> Scenario:
    research = ResearchConfig(
        enabled=True, ladder_skip_share=share, ladder_skip_failure_multiplier=multiplier
    )
    return Scenario(name="t", days=20, fleet=FleetConfig(num_nodes=400), research=research)


def _draw(scenario: Scenario):  # type: ignore[no-untyped-def]
    layouts = plan_layout(scenario, 0, scenario.fleet.num_nodes)
    return draw_jobs(scenario, layouts, np.random.default_rng(7), 1)


def test_the_knob_off_draws_what_the_simulator_always_drew() -> None:
    plain = _draw(Scenario(name="t", days=20, fleet=FleetConfig(num_nodes=400),
                           research=ResearchConfig(enabled=True)))  # fmt: skip
    off = _draw(_scenario(0.0))
    for name in ("cls", "submit_s", "run_s", "outcome"):
        assert np.array_equal(getattr(plain, name), getattr(off, name)), name


def test_skipping_jobs_above_the_smallest_class_fail_more() -> None:
    base, skipping = _draw(_scenario(0.0)), _draw(_scenario(0.5, multiplier=3.0))

    def bad_share(jobs, classes):  # type: ignore[no-untyped-def]
        chosen = np.isin(jobs.cls, classes)
        return float(np.isin(jobs.outcome[chosen], BAD_CODES).mean()), int(chosen.sum())

    p_bad = float(PROBS[BAD].sum())
    # The smallest class (index 0, one GPU) has no rung below it: untouched, same draws.
    assert bad_share(skipping, [0]) == bad_share(base, [0])
    share, n = bad_share(skipping, [1, 2, 3])
    expected = 0.5 * p_bad + 0.5 * 3 * p_bad
    assert n > 2000
    assert share == pytest.approx(expected, abs=4 * np.sqrt(expected * (1 - expected) / n))
    assert bad_share(base, [1, 2, 3])[0] < p_bad + 0.03


def test_the_ladder_sweep_adds_up() -> None:
    sweep = run_ladder_sweep(num_gpus=3200, days=10, skip_shares=(0.2, 0.6), seeds=2)
    assert sweep.enforced.skip_share == 0 and sweep.enforced.climb_gpu_s == 0
    low, high = sweep.points
    assert sweep.enforced.wasted_share < low.wasted_share < high.wasted_share
    assert 0 < low.climb_gpu_s < high.climb_gpu_s
    for p in sweep.points:
        assert p.saved_gpu_s == pytest.approx(
            p.wasted_gpu_s - sweep.enforced.wasted_gpu_s - p.climb_gpu_s
        )


def test_bad_knob_values_are_input_errors() -> None:
    with pytest.raises(InputError, match="ladder_skip_share"):
        ResearchConfig(ladder_skip_share=1.5)
    with pytest.raises(InputError, match="ladder_skip_failure_multiplier"):
        dataclasses.replace(ResearchConfig(), ladder_skip_failure_multiplier=-1.0)


def test_simulate_sweep_ladder_skip_share_cli(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "gpuyield", "simulate", "sweep", "--param", "ladder-skip-share",
         "--gpus", "1600", "--duration", "5d", "--seeds", "1", "--values", "0.5", "--json",
         "--out", str(tmp_path)],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data == json.loads((tmp_path / "ladder-sweep.json").read_text())
    assert data["param"] == "ladder-skip-share" and data["num_gpus"] == 1600
    assert [p["skip_share"] for p in data["points"]] == [0.5]
    assert data["points"][0]["wasted_share"] > data["enforced"]["wasted_share"]
    bad = subprocess.run(
        [sys.executable, "-m", "gpuyield", "simulate", "sweep", "--param", "ladder-skip-share",
         "--values", "1.5", "--out", str(tmp_path)],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert bad.returncode == 1 and "skip shares must be in (0, 1]" in bad.stderr
