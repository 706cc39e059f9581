"""What the fit needed of the simulator: measured drop costs per run, the research jobs it draws,
and a host repair the ledger does not read as planned maintenance."""

from __future__ import annotations

import dataclasses
import statistics
from pathlib import Path

import pytest

from gpuyield import store
from gpuyield.ingest.slurm import SlurmInputs, ingest_slurm
from gpuyield.ledger import backend_for, compute_ledger
from gpuyield.simulate import (
    Policy,
    expected_research_jobs,
    load_scenario,
    simulate,
    write_outputs,
)
from gpuyield.simulate.scenario import SparesFor


def test_drop_costs_per_run_replace_detection_and_the_spare_swap() -> None:
    base = load_scenario("ledger-check")
    # Spares enough that a dropped replica always finds one free.
    run = dataclasses.replace(base.lineage[0], policy=Policy.DROP, replica_nodes=2, spare_nodes=12)

    def lost(**changes: object) -> int:
        sc = base.with_overrides(lineage=(dataclasses.replace(run, **changes),))
        result = simulate(sc).lineage[0]
        return result.tally.categories["released"] - result.productive_s * run.num_gpus

    swap_and_startup = lost()  # detection 120 s, then swap 30 s + start-up 120 s on a spare
    measured = lost(drop_stall_s=2.0, drop_rejoin_s=15.0)
    free = lost(drop_stall_s=0.0, drop_rejoin_s=0.0)
    for_restart_only = lost(drop_stall_s=2.0, drop_rejoin_s=15.0, spares_for=SparesFor.RESTART)
    assert swap_and_startup > 5 * measured > 0
    assert free <= 128 * 60  # nothing left but rounding
    # Without a spare the measured rejoin cannot apply: the replica waits for its node's repair.
    assert for_restart_only > 100 * measured
    with pytest.raises(Exception, match="drop_stall_s must be >= 0"):
        dataclasses.replace(run, drop_stall_s=-5.0)


def test_expected_research_jobs_is_what_the_simulator_draws_around() -> None:
    sc = load_scenario("ledger-check").with_overrides(
        days=1.0,
        research=dataclasses.replace(
            load_scenario("ledger-check").research, backfill_lineage_gaps=False
        ),
    )
    expected = expected_research_jobs(sc)
    counts = [
        [int((simulate(sc.with_overrides(seed=s)).jobs.cls == c).sum()) for s in range(8)]  # type: ignore[union-attr]
        for c in range(len(expected))
    ]
    for mean, drawn in zip(expected, counts, strict=True):
        # The mean of 8 Poisson counts lies within 4 standard errors of its expectation.
        assert abs(statistics.fmean(drawn) - mean) < 4 * (mean / 8) ** 0.5, (mean, drawn)


def test_a_host_repair_is_unplanned_down_time_in_truth_and_ledger(tmp_path: Path) -> None:
    base = load_scenario("ledger-check")
    failures = dataclasses.replace(
        base.failures, rate_scale=1.0, rates_per_1000_node_days=_only("host_unplanned", 400.0)
    )
    sc = base.with_overrides(failures=failures, maintenance=())
    truth = write_outputs(simulate(sc), tmp_path / "out")
    assert "repair: host unplanned work" in (tmp_path / "out" / "events.psv").read_text()
    db = tmp_path / "s.duckdb"
    ingest_slurm(db, SlurmInputs.from_dir(tmp_path / "out"), since_s=sc.start_s, until_s=sc.end_s)
    con = store.connect(db, read_only=True)
    try:
        ledger = compute_ledger(backend_for(con))
    finally:
        con.close()
    unplanned = truth.subcategories["down.unplanned"]
    assert unplanned > 0
    assert ledger.subcategories.get("down.planned", 0.0) == 0.0
    assert ledger.subcategories["down.unplanned"] == pytest.approx(unplanned, rel=1e-6)


def _only(cause: str, rate: float) -> dict[str, float]:
    from gpuyield.simulate import FAILURE_CAUSES

    return {c.id: (rate if c.id == cause else 0.0) for c in FAILURE_CAUSES}
