"""The replay check: it passes on a fit of the cluster itself and fails on a wrong scenario."""

from __future__ import annotations

import dataclasses
import time

import pytest

from gpuyield.whatif import fit_cluster, replay_check
from tests.whatif.conftest import Simulated


def test_a_fit_of_the_cluster_replays_it(base_cluster: Simulated) -> None:
    fit = fit_cluster(base_cluster.db)
    check = replay_check(fit, seeds=4)
    assert check.passed, check.reasons
    for category in check.categories:
        assert abs(category.real - category.replay_mean) <= category.allowed
    # The replay is close where the cluster is steady: released and overhead within 2 points.
    by = {c.category: c for c in check.categories}
    assert abs(by["released"].real - by["released"].replay_mean) < 0.02


def test_a_wrong_scenario_misses_and_says_where(base_cluster: Simulated) -> None:
    fit = fit_cluster(base_cluster.db)
    # A third of the research arrivals: the replay's cluster sits idle where the real one worked.
    wrong = tuple(
        dataclasses.replace(p, value=p.value / 3) if p.key.startswith("research.arrivals.") else p
        for p in fit.parameters
    )
    check = replay_check(dataclasses.replace(fit, parameters=wrong), seeds=3)
    assert not check.passed
    assert any(m.startswith("idle:") for m in check.misses), check.misses
    assert all(r.startswith("replay missed") for r in check.reasons)


def test_a_window_that_ends_after_the_clock_replays(base_cluster: Simulated) -> None:
    # A store whose window ends in the future (a generated cluster, a clock behind the
    # scheduler's): the replay's own capture was taken at its end, which the ingest of its files
    # must take as the present (it refused the window as covering the future).
    fit = fit_cluster(base_cluster.db)
    later = 20 * 365 * 86400  # whole days: the same weekdays and hours
    future = dataclasses.replace(fit, start_s=fit.start_s + later, end_s=fit.end_s + later)
    assert future.end_s > time.time()
    shifted, now = replay_check(future, seeds=1), replay_check(fit, seeds=1)
    assert [c.replay_mean for c in shifted.categories] == pytest.approx(
        [c.replay_mean for c in now.categories], abs=1e-9
    )
