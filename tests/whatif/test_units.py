"""The fit's building blocks: statistics, reason classes, size classes, remedy parsing, placement."""

from __future__ import annotations

import math

import numpy as np
import pytest

from gpuyield.errors import FieldError, InputError
from gpuyield.whatif.durations import fit_lognormal
from gpuyield.whatif.fit_lineage import poisson_quantile
from gpuyield.whatif.fit_research import size_class
from gpuyield.whatif.maintenance import maintenance_windows
from gpuyield.whatif.outages import UNRECOGNISED, UNRESPONSIVE, Outage, classify
from gpuyield.whatif.remedies import parse_count, parse_duration_s
from gpuyield.whatif.stats import (
    gamma_quantile,
    normal_cdf,
    poisson_rate,
    proportion,
    t_quantile,
)


def test_exact_intervals_match_published_tables() -> None:
    # Chi-square quantiles (Abramowitz & Stegun table 26.8): 2 Gamma(df/2) quantiles.
    assert 2 * gamma_quantile(0.975, 1.0) == pytest.approx(7.378, abs=1e-3)
    assert 2 * gamma_quantile(0.025, 5.0) == pytest.approx(3.247, abs=1e-3)
    assert 2 * gamma_quantile(0.975, 50.0) == pytest.approx(129.561, abs=1e-3)
    # No events: the upper bound is -ln(0.025) / exposure.
    none = poisson_rate(0, 100.0)
    assert none.low == 0 and none.high == pytest.approx(3.689 / 100, rel=1e-3)
    # Wilson's interval for 3 of 10 (Newcombe 1998, table I).
    share = proportion(3, 10)
    assert (share.low, share.high) == (
        pytest.approx(0.1078, abs=1e-4),
        pytest.approx(0.6032, abs=1e-4),
    )
    assert proportion(0, 50).low == 0.0 and proportion(50, 50).high == 1.0
    assert [round(t_quantile(df), 3) for df in (1, 2, 9, 29)] == [12.706, 4.303, 2.262, 2.045]
    z = np.array([-3.0, -1.96, 0.0, 1.0, 2.5])
    expected = [0.0013499, 0.0249979, 0.5, 0.8413447, 0.9937903]
    assert normal_cdf(z) == pytest.approx(expected, abs=1e-6)
    assert [poisson_quantile(0.999, m) for m in (0.0, 0.5, 4.0)] == [0, 4, 11]


def test_durations_recover_through_truncation_and_the_limit() -> None:
    rng = np.random.default_rng(7)
    full = np.clip(np.rint(np.exp(rng.normal(math.log(7200), 1.2, 4000))), 60, 86400)
    start = rng.uniform(0, 5 * 86400, full.size)
    room = 5 * 86400 - start
    seen = full < room  # a job still running at the window end is not seen to complete
    naive = float(np.median(full[seen]))
    fit = fit_lognormal(full[seen], room[seen], 86400)
    assert fit is not None
    assert abs(math.log(fit.median_s / 7200)) < 3 * fit.se_mu
    assert abs(math.log(fit.sigma / 1.2)) < 3 * fit.se_log_sigma
    assert naive < 7200 * 0.97  # what ignoring the truncation would have said
    assert fit_lognormal(full[:2], room[:2], 86400) is None


@pytest.mark.parametrize(
    ("reasons", "cause"),
    [
        (("GPU fell off the bus", "repair: faulty gpu"), "gpu"),
        (("Not responding", "repair: network switch/cable"), "network"),
        (("host pulled for unplanned repair", "repair: host unplanned work"), "host_unplanned"),
        (("Xid 79: GPU has fallen off the bus",), "gpu"),
        (("NHC: ECC DBE count 2",), "hbm3"),
        (("ib0 link down",), "network"),
        (("Not responding",), UNRESPONSIVE),
        (("Kill task failed",), UNRECOGNISED),
    ],
)
def test_reasons_name_their_cause(reasons: tuple[str, ...], cause: str) -> None:
    assert classify(reasons) == cause


def test_size_classes_are_what_the_simulator_can_lay_out() -> None:
    assert [size_class(g, 8) for g in (1, 2, 3, 4, 5, 8, 9, 16, 100)] == [
        1,
        2,
        4,
        4,
        8,
        8,
        16,
        16,
        104,
    ]


def test_durations_and_counts_parse_as_the_cli_grammar_says() -> None:
    assert parse_duration_s("20m", "f") == 1200 and parse_duration_s("90d", "f") == 90 * 86400
    assert parse_duration_s("45", "f") == 45 and parse_duration_s("1.5h", "f") == 5400
    assert parse_count("16k", "f") == 16000 and parse_count("1.5M", "f") == 1_500_000
    with pytest.raises(FieldError, match="duration like 20m"):
        parse_duration_s("soon", "whatif.horizon")
    with pytest.raises(FieldError):
        parse_duration_s("0m", "whatif.horizon")
    with pytest.raises(InputError):
        parse_count("many", "whatif.remedy.spares")


def _planned(node: str, start: int, hours: float) -> Outage:
    return Outage(
        node=node,
        start_s=start,
        down_s=0,
        repair_s=round(hours * 3600),
        open=False,
        cause="planned",
        reasons=("scheduled maintenance",),
        planned=True,
    )


def test_maintenance_windows_land_on_free_research_nodes() -> None:
    outages = [_planned(f"a{i}", 1000, 10) for i in range(6)]
    outages += [_planned(f"b{i}", 5000, 2) for i in range(4)]  # overlaps the first in time
    outages += [_planned(f"c{i}", 200_000, 1) for i in range(50)]  # wider than the research nodes
    plan = maintenance_windows(outages, 0, first_research=10, num_nodes=30)
    first, second, third = plan.windows
    assert (first.first_node, first.num_nodes) == (10, 6)
    assert (second.first_node, second.num_nodes) == (16, 4)  # after the first: no node in both
    assert third.num_nodes == 20 and any("narrowed to 20" in n for n in plan.notes)
