"""Issue 30: `gpuyield plan` — the estimate, then the run simulated; its days are what
`gpuyield simulate run` of the same scenario gives, its HTML shows the JSON's numbers."""

from __future__ import annotations

import csv
import json
import re
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from gpuyield.cli import app
from gpuyield.report.plan_page import render_plan_html
from gpuyield.simulate.plan import PlanSpec, plan
from gpuyield.simulate.scenario import Policy

runner = CliRunner()
# A small run (512 H100, 8B parameters, 1T tokens: about 1.4 days), so the tests stay quick.
SMALL = ["--params", "8B", "--tokens", "1T", "--gpus", "512", "--accelerator", "h100-sxm"]


# A base scenario whose failures come 300x as often as Meta's, so the small run meets dozens.
FAILING_BASE = """
[scenario]
name = "failing"
[fleet]
num_nodes = 66
[failures]
table = "meta-h100"
rate_scale = 300
repair_mean_s = 7200
[[lineage]]
name = "t"
release = "t"
num_gpus = 512
checkpoint_interval_s = 1800
checkpoint_write_s = 10
startup_s = 120
requeue_wait_s = 60
spare_nodes = 2
"""


@pytest.fixture(scope="module")
def small_plan(tmp_path_factory: pytest.TempPathFactory) -> Any:
    base = tmp_path_factory.mktemp("base") / "failing.toml"
    base.write_text(FAILING_BASE, encoding="utf-8")
    spec = PlanSpec(
        params="8B", tokens="1T", gpus=512, accelerator="h100-sxm", seeds=4, seed=3, base=str(base)
    )
    return plan(spec)


def test_plan_has_the_estimate_three_variants_and_intervals(small_plan: Any) -> None:
    data = small_plan.to_dict()
    est = data["estimate"]
    low, high = est["gpu_hours_interval"]
    assert low < est["gpu_hours_expected"] < high and est["interval_coverage"] == 0.8
    names = [v["name"] for v in data["variants"]]
    assert names == ["as planned", "policy drop", "restart, Daly interval"]
    ideal_days = 6 * 8e9 * 1e12 / (512 * 989.4e12 * 0.4) / 86400
    for v in data["variants"]:
        d = v["wall_days"]
        assert d["interval"][0] <= d["median"] <= d["interval"][1]
        assert len(v["wall_days_by_seed"]) == 4
        # Failures, start-up and checkpoint stalls only add time; the run still finishes.
        assert ideal_days < d["median"] < 3 * ideal_days
        assert v["interruptions_mean"] >= 10
        assert 0 < v["yield"]["median"] < 1
        held = v["gpu_hours"]["median"]
        assert held == pytest.approx(d["median"] * 24 * (512 + 16), rel=1e-9)
    assert set(data["days_saved_vs_plan"]) == set(names[1:])
    fm = data["failure_model"]
    assert fm["table"] == "meta-h100" and fm["rate_scale"] == 300
    assert fm["mtbf_minutes"] == pytest.approx(60 / (fm["rate_per_gpu_hour"] * 512))
    # Under 300x Meta's rate, restarting with Daly's interval beats the planned 30 minutes.
    assert data["days_saved_vs_plan"]["restart, Daly interval"] > 0


def test_plan_days_equal_simulate_run_of_its_scenario(small_plan: Any, tmp_path: Path) -> None:
    toml_path = tmp_path / "plan.toml"
    toml_path.write_text(small_plan.scenario_toml(), encoding="utf-8")
    seed_index = 1  # the plan's seeds are 3, 4, 5, 6
    out = tmp_path / "run"
    result = runner.invoke(
        app, ["simulate", "run", str(toml_path), "--out", str(out), "--seed", str(3 + seed_index)]
    )
    assert result.exit_code == 0, result.output
    start = datetime.fromisoformat("2026-01-01T00:00:00")
    with (out / "sacct.psv").open(encoding="utf-8") as fh:
        rows = [r for r in csv.DictReader(fh, delimiter="|") if r["Comment"] == "run=plan"]
    done = [r for r in rows if r["State"] == "COMPLETED"]
    assert len(done) == 1
    days = (datetime.fromisoformat(done[0]["End"]) - start).total_seconds() / 86400
    assert days == pytest.approx(small_plan.planned.days_by_seed[seed_index], abs=1 / 86400)


def test_html_shows_exactly_the_json_numbers(small_plan: Any) -> None:
    html = render_plan_html(small_plan)
    data = small_plan.to_dict()
    pairs = re.findall(r'data-key="([^"]+)" data-value="([^"]+)"', html)
    assert len(pairs) >= 30
    for key, raw in pairs:
        value: Any = data
        for part in key.split("."):
            value = (
                value[int(part)] if isinstance(value, list) else value[part.replace("&#x27;", "'")]
            )
        assert json.loads(raw.replace("&quot;", '"')) == value, key
    assert "<script" not in html and "http://" not in html.replace("https://", "")


def test_drop_is_the_planned_policy_when_asked() -> None:
    spec = PlanSpec(
        params="8B", tokens="200B", gpus=512, accelerator="h100-sxm", seeds=2, policy=Policy.DROP
    )
    result = plan(spec)
    assert [v.policy for v in result.variants] == [Policy.DROP, Policy.RESTART, Policy.RESTART]


def test_cli_plan_json_and_errors(tmp_path: Path) -> None:
    out = runner.invoke(
        app, ["plan", *SMALL, "--seeds", "2", "--checkpoint-interval", "20m", "--json"]
    )
    assert out.exit_code == 0, out.output
    data = json.loads(out.output)
    assert data["variants"][0]["checkpoint_interval_s"] == 1200
    assert data["inputs"]["seeds"] == 2
    bad = runner.invoke(app, ["plan", *SMALL[:4], "--gpus", "1001", *SMALL[6:]])
    assert bad.exit_code == 1 and "--gpus must be a positive multiple of 8" in bad.output
    # An unknown word and a value that does not parse are usage errors (docs/cli.md): exit 2.
    bad = runner.invoke(app, ["plan", *SMALL, "--policy", "spares"])
    assert bad.exit_code == 2 and "--policy" in bad.output
    bad = runner.invoke(app, ["plan", *SMALL, "--checkpoint-interval", "30x"])
    assert bad.exit_code == 2 and "--checkpoint-interval" in bad.output
    page = tmp_path / "plan.html"
    ok = runner.invoke(app, ["plan", *SMALL, "--seeds", "2", "--html", str(page)])
    assert ok.exit_code == 0, ok.output
    assert page.read_text(encoding="utf-8").startswith("<!DOCTYPE html>")
