"""``gpuyield lake size``: the cores a fleet-year needs, from fitted lines (here: given ones)."""

from __future__ import annotations

import pytest

from gpuyield.errors import FieldError
from gpuyield.lake.sizing import SECONDS_PER_YEAR, LakeCosts, Line, size_fleets


def _costs(spark_fixed_s: float = 60.0) -> LakeCosts:
    def line(fixed_s: float, per_million: float, mb: float) -> Line:
        return Line(fixed_s=fixed_s, s_per_million_per_core=per_million, peak_mb_per_million=mb)

    return LakeCosts(
        measured_on="2026-12-02T00:00:00Z",
        machine="test",
        jobs={
            "store": line(1, 1, 200),
            "duckdb_lake": line(2, 2, 200),
            "spark": line(spark_fixed_s, 10, 500),
        },
        samples={
            "store": line(0, 0.1, 20),
            "duckdb_lake": line(0, 0.2, 20),
            "spark": line(0, 1, 50),
        },
    )


def test_cores_follow_the_lines() -> None:
    sizing = size_fleets(
        [100_000], minutes=10, sample_every_s=60, jobs_per_gpu_year=120, costs=_costs()
    )
    (fleet,) = sizing.fleets
    assert fleet.jobs == 12_000_000
    assert fleet.samples == 100_000 * SECONDS_PER_YEAR // 60
    # Spark: (10 s x 12 + 1 s x 52,560) per core over the 540 s left after its fixed minute.
    work = 10 * 12 + 1 * fleet.samples / 1e6
    assert fleet.spark_cores == -(-work // 540)
    duck_work = 2 * 12 + 0.2 * fleet.samples / 1e6
    assert fleet.duckdb_cores == -(-duck_work // 598)
    assert fleet.duckdb_memory_gb == pytest.approx((200 * 12 + 20 * fleet.samples / 1e6) / 1024)
    assert fleet.one_machine is False  # a TB of memory: more than the 512 GB asked about


def test_a_small_fleet_fits_one_machine_and_a_fixed_part_over_the_budget_is_said() -> None:
    small = size_fleets([1000], sample_every_s=3600, costs=_costs()).fleets[0]
    assert small.one_machine is True and small.duckdb_cores == 1
    over = size_fleets([1000], minutes=0.5, costs=_costs(spark_fixed_s=60)).fleets[0]
    assert over.spark_cores is None


def test_bad_values_name_their_field() -> None:
    with pytest.raises(FieldError, match=r"lake_size\.gpus"):
        size_fleets([0], costs=_costs())
    with pytest.raises(FieldError, match=r"lake_size\.minutes"):
        size_fleets([1], minutes=0, costs=_costs())


def test_the_bundled_costs_are_the_benchmarks_lines_for_every_engine() -> None:
    """``python -m bench lake`` wrote them (bench/lake.py ``write_costs``); ``lake size`` reads them."""
    from gpuyield.lake.sizing import ENGINES, load_costs

    costs = load_costs()
    assert costs.measured_on and costs.machine
    for lines in (costs.jobs, costs.samples):
        assert set(lines) == set(ENGINES)
        assert all(line.fixed_s >= 0 and line.s_per_million_per_core > 0 for line in lines.values())
        assert all(line.peak_mb_per_million > 0 for line in lines.values())
