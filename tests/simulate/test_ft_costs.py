"""Measured recovery costs (python -m bench ft) in the sweep: loading, scaling, and their effect."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from gpuyield.errors import ParseError
from gpuyield.simulate.ft_costs import load_ft_calibration
from gpuyield.simulate.scenario import Policy
from gpuyield.simulate.sweep import SweepParam, SweepSpec, run_sweep

CALIBRATION = """
[measured]
replicas = 3
stall_s = 4.0
heal_s = 12.0
restart_s = 20.0
ratio_drop_to_restart = 0.3

[scale]
gpus_per_group = 128
replacement_s = 0.0
state_gb_per_gpu = 50.0
link_gbps = 400.0
checkpoint_load_s = 3.0
"""


def _file(tmp_path: Path, text: str = CALIBRATION) -> Path:
    path = tmp_path / "ft-costs.toml"
    path.write_text(text)
    return path


def test_costs_follow_the_documented_rules(tmp_path: Path) -> None:
    cal = load_ft_calibration(_file(tmp_path))
    costs = cal.costs_at(16384)  # 128 groups of 128 GPUs
    tree = math.log2(128) / math.log2(3)
    assert costs.detection_s == pytest.approx(4.0 * tree)
    assert costs.restart_s == pytest.approx(20.0 * tree + 3.0)
    assert costs.rejoin_s == pytest.approx(12.0 + 50.0 * 8 / 400.0)  # no growth with groups
    bigger = cal.costs_at(98304)
    assert bigger.restart_s > costs.restart_s and bigger.rejoin_s == costs.rejoin_s


def test_a_bad_field_is_named(tmp_path: Path) -> None:
    with pytest.raises(ParseError, match=r"measured\.heal_s"):
        load_ft_calibration(_file(tmp_path, CALIBRATION.replace("heal_s = 12.0", "heal_s = -1")))


def test_the_sweep_uses_measured_costs_and_says_so(tmp_path: Path) -> None:
    cal = load_ft_calibration(_file(tmp_path))
    spec = SweepSpec(
        param=SweepParam.CLUSTER_GPUS,
        values=(16384.0, 98304.0),
        policies=(Policy.RESTART, Policy.DROP),
        seeds=2,
        costs=cal,
    )
    assert spec.model(Policy.DROP, 16384.0).rejoin_s == pytest.approx(cal.costs_at(16384).rejoin_s)
    result = run_sweep(spec)
    by = {(p.policy, p.value): p.yield_mean for p in result.points}
    for gpus in (16384.0, 98304.0):
        assert by[(Policy.DROP, gpus)] > by[(Policy.RESTART, gpus)]
    summary = result.to_dict()
    assert summary["assumptions"]["ft_calibration"]["path"].endswith("ft-costs.toml")
    assert set(summary["costs"]) == {"16384", "98304"}
    assert summary["costs"]["16384"]["rejoin_s"] == pytest.approx(cal.costs_at(16384).rejoin_s)
