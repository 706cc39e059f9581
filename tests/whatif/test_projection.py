"""Projections against the truth: each remedy's projected yield matches simulating the true
scenario with that remedy, within 2 points of yield."""

from __future__ import annotations

import copy
import statistics

import pytest

from gpuyield.simulate import scenario_from_dict
from gpuyield.whatif import ReplayCheck, fit_cluster, parse_remedy, project, scenario_file
from gpuyield.whatif.project import simulated_categories
from gpuyield.whatif.remedies import apply_remedy
from tests.whatif.conftest import Simulated

REMEDIES = (
    "drop-replicas",
    "checkpoint=optimal",
    "checkpoint=5m",
    "fill-idle",
    "repair=2h",
    "drop-replicas+repair=2h",
)
SEEDS = 4
NO_CHECK = ReplayCheck(seeds=0, tolerance=0.02, categories=(), refusals=())


def _true_yield(data: dict, remedy: object, fit: object) -> float:
    yields = []
    for seed in range(SEEDS):
        changed = copy.deepcopy(data)
        changed["scenario"]["seed"] = 500 + seed
        scenario = scenario_from_dict(changed, origin="<true scenario>")
        if remedy is not None:
            scenario = apply_remedy(remedy, scenario, fit)  # type: ignore[arg-type]
        simulated = simulated_categories(scenario)
        yields.append(simulated.categories["released"] / simulated.installed_gpu_seconds)
    return statistics.fmean(yields)


def test_each_remedy_projects_within_two_points_of_the_truth(base_cluster: Simulated) -> None:
    fit = fit_cluster(base_cluster.db)
    base = scenario_file(fit).scenario()
    remedies = [parse_remedy(name, fit, base) for name in REMEDIES]
    projection = project(fit, remedies, NO_CHECK, horizon_days=fit.days, seeds=SEEDS)
    true_base = _true_yield(base_cluster.data, None, fit)
    assert projection.baseline.yield_.mean == pytest.approx(true_base, abs=0.02)
    for projected in projection.remedies:
        truth = _true_yield(base_cluster.data, projected.remedy, fit)
        assert projected.outcome.yield_.mean == pytest.approx(truth, abs=0.02), projected.remedy
        gain = truth - true_base
        assert projected.yield_gain.mean == pytest.approx(gain, abs=0.02), projected.remedy


def test_remedies_move_time_between_categories_and_conserve_it(base_cluster: Simulated) -> None:
    fit = fit_cluster(base_cluster.db)
    remedies = [
        parse_remedy(n, fit, scenario_file(fit).scenario()) for n in ("fill-idle", "checkpoint=5m")
    ]
    projection = project(fit, remedies, NO_CHECK, horizon_days=fit.days, seeds=2)
    for r in projection.remedies:
        moved = sum(band.mean for band in r.outcome.gpu_hours.values())
        assert moved == pytest.approx(0.0, abs=1e-6 * projection.installed_gpu_hours)
    by_name = {r.remedy.name: r for r in projection.remedies}
    # Filling the lineage nodes' idle days with research moves idle time to research, not yield.
    idle = by_name["fill-idle"].outcome.gpu_hours
    assert idle["idle"].mean < 0 and idle["released"].mean == 0
    # Checkpointing every 5 minutes stalls training more often: overhead grows, yield drops.
    ckpt = by_name["checkpoint=5m"].outcome.gpu_hours
    assert ckpt["overhead"].mean > 0 and by_name["checkpoint=5m"].yield_gain.mean < 0
    assert projection.ranking[-1] == "checkpoint=5m"


def test_the_html_section_shows_the_json_figures(base_cluster: Simulated) -> None:
    import json
    from html.parser import HTMLParser

    from gpuyield.whatif.html import SECTION_TITLE, render_whatif

    fit = fit_cluster(base_cluster.db)
    remedies = [
        parse_remedy(n, fit, scenario_file(fit).scenario()) for n in ("repair=2h", "ladder")
    ]
    projection = project(fit, remedies, NO_CHECK, horizon_days=3, seeds=2, price_per_gpu_hour=3.0)
    page = render_whatif(projection)
    data = projection.to_dict()
    keyed: dict[str, object] = {}

    class Collect(HTMLParser):
        def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
            found = dict(attrs)
            if found.get("data-key"):
                keyed[str(found["data-key"])] = json.loads(str(found["data-value"]))

    Collect().feed(page)
    assert SECTION_TITLE in page and "ladder does not apply" in page
    assert keyed["baseline.yield"] == data["baseline"]["yield"]
    for name, remedy in data["remedies"].items():
        for field in ("yield", "yield_gain", "gpu_hours_gained", "dollars_gained"):
            assert keyed[f"remedies.{name}.{field}"] == remedy[field], (name, field)
    assert len(keyed) > 20
