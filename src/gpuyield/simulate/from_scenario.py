"""The failure-only job model of a scenario: its failure process and its run's restart costs.

Sweeps take every rate and time from here (no hard-coded rate or restart time): the node failure
rate is the scenario's total over every cause (its failure table, Table 5 by default, times
``rate_scale``, lemons included by the model; a table's size law goes to the model, which applies
it at each swept size); restart costs and the spare-node policy come from its first lineage run.
"""

from __future__ import annotations

import dataclasses

from gpuyield.errors import InputError
from gpuyield.simulate.assumptions import mean_repair_s, uses_spares
from gpuyield.simulate.ettr import SECONDS_PER_DAY, JobModel
from gpuyield.simulate.scenario import LineageConfig, Scenario, SparesFor


def job_model(
    scenario: Scenario,
    *,
    num_nodes: int,
    duration_s: float,
    interval_s: float | None = None,
    write_s: float | None = None,
    spares_for: SparesFor | None = None,
) -> JobModel:
    """One job of ``num_nodes`` under ``scenario``'s failures, restarting as its first run does.

    ``interval_s`` and ``write_s`` replace the run's checkpoint interval and write stall;
    ``spares_for`` which remedies may take a replacement from the run's spare nodes.
    """
    run, cfg = first_run(scenario), scenario.failures
    if spares_for is not None:
        run = dataclasses.replace(run, spares_for=spares_for)
    exponent, reference_gpus = _size_law(scenario)
    rates = scenario.failure_rates(job_gpus=reference_gpus or None)
    per_node_day = sum(rates.values()) * SECONDS_PER_DAY
    spares_share = run.spare_nodes / max(scenario.run_nodes(run), 1)
    return JobModel(
        num_nodes=num_nodes,
        node_failures_per_day=per_node_day,
        duration_s=duration_s,
        interval_s=float(interval_s if interval_s is not None else run.checkpoint_interval_s),
        write_s=float(write_s if write_s is not None else run.checkpoint_write_s),
        restart_s=float(cfg.detection_s + run.requeue_wait_s + run.startup_s),
        spare_restart_s=float(cfg.detection_s + run.spare_swap_s + run.startup_s),
        detection_s=float(cfg.detection_s),
        # A dropped replica rejoins on a spare (swap, start-up) when it may use one, as a
        # restarted job does; else when its node is back from repair (the lineage simulation's
        # rules). Both remedies get the same spares unless the scenario says otherwise.
        rejoin_s=float(
            run.spare_swap_s + run.startup_s
            if uses_spares(run, drop=True)
            else cfg.down_s + mean_repair_s(scenario)
        ),
        replica_nodes=run.replica_nodes,
        spare_nodes=max(round(num_nodes * spares_share), 1 if run.spare_nodes else 0),
        manual_share=cfg.manual_share,
        manual_delay_s=float(cfg.manual_delay_s),
        recoverable_share=cfg.recoverable_share,
        # A restarted job starts on a spare in place of a node that needs a replacement part;
        # without spares it waits for the repair.
        replacement_s=0.0
        if uses_spares(run, drop=False)
        else float(cfg.down_s + cfg.repair_mean_s),
        rollbacks_per_day=cfg.rollbacks_per_day,
        rollback_s=float(cfg.rollback_s),
        lemon_share=cfg.lemon_share,
        lemon_factor=cfg.lemon_factor,
        # The table's size law: the rate above holds at its reference size and scales with the
        # job's, so a sweep over cluster sizes applies it.
        size_exponent=exponent,
        reference_nodes=reference_gpus / scenario.fleet.gpus_per_node,
    )


def first_run(scenario: Scenario) -> LineageConfig:
    """The lineage run whose costs a sweep takes (an error naming the scenario if it has none)."""
    if not scenario.lineage:
        raise InputError(
            f"scenario {scenario.name} has no [[lineage]] run to take restart costs from",
            hint="use a scenario with a lineage run, e.g. llama3-405b",
        )
    return scenario.lineage[0]


def _size_law(scenario: Scenario) -> tuple[float, float]:
    """The scenario's table's size exponent and reference GPUs (0, 0 without a size law)."""
    if not scenario.failures.table:
        return 0.0, 0.0
    from gpuyield.simulate.failure_tables import get_failure_table

    table = get_failure_table(scenario.failures.table)
    if not table.size_exponent:
        return 0.0, 0.0
    return table.size_exponent, float(table.reference_gpus)
