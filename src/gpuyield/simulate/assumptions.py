"""What shaped a simulation: every cost and policy, stated on its outputs.

A simulated yield is only as good as the costs behind it (a checkpoint interval, a restart time,
who may use the spare nodes), and those are assumptions, not measurements. ``simulate run`` and
``simulate sweep`` carry them in their terminal header, their JSON and their HTML, so a figure is
never read without them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gpuyield.simulate.calibration import LLAMA3_CAUSES, llama3_rate_per_1000_node_days
from gpuyield.simulate.scenario import LineageConfig, Scenario, SparesFor

#: Where the default rates come from (the cause mix of every table, too).
TABLE5 = "Table 5 of 'The Llama 3 Herd of Models' (arXiv 2407.21783): 419 interruptions, 2,048 nodes, 54 days"


@dataclass(frozen=True, kw_only=True, slots=True)
class FailureSource:
    """The node failure rate a scenario uses, and where it comes from."""

    #: Failure table id (``gpuyield/data/failures/tables.toml``); empty: Table 5's own rates.
    table: str
    #: Interruptions per 1,000 node-days over every cause, after ``rate_scale`` (lemons aside).
    per_1000_node_days: float
    #: The citation, and what was changed from it.
    source: str

    def to_dict(self) -> dict[str, Any]:
        """The JSON shape."""
        return {
            "table": self.table or None,
            "per_1000_node_days": self.per_1000_node_days,
            "source": self.source,
        }


def failure_source(scenario: Scenario) -> FailureSource:
    """The scenario's failure rate and its citation."""
    cfg = scenario.failures
    total = sum(scenario.failure_rates().values()) * 1000.0 * 86400.0
    if cfg.table:
        from gpuyield.simulate.failure_tables import get_failure_table

        table = get_failure_table(cfg.table)
        source = f"table {table.id}, {table.name} ({table.url}); cause mix of {TABLE5}"
        if table.size_exponent:
            source += (
                f"; a job of G GPUs at {table.rate_per_1000_node_days:.3g} x "
                f"(G / {table.reference_gpus:,})^{table.size_exponent:g}, here "
                f"{scenario.job_gpus():,} GPUs"
            )
    else:
        source = TABLE5
    changed = sorted(cfg.rates_per_1000_node_days)
    if changed:
        source += f"; the scenario's own rates for {', '.join(changed)}"
    if cfg.rate_scale != 1:
        source += f"; every rate x {cfg.rate_scale:g}"
    return FailureSource(table=cfg.table, per_1000_node_days=total, source=source)


def table5_total() -> float:
    """Table 5's interruptions per 1,000 node-days over every cause (3.79)."""
    return sum(llama3_rate_per_1000_node_days(c) for c in LLAMA3_CAUSES)


def uses_spares(run: LineageConfig, *, drop: bool) -> bool:
    """Whether a remedy (drop, or else restart) takes replacement nodes from the run's spares."""
    if run.spare_nodes <= 0:
        return False
    return not drop or run.spares_for is SparesFor.ALL


def spares_phrase(spare_nodes: int, job_nodes: int, spares_for: SparesFor) -> str:
    """``32 spare nodes per 2,048 (1.6%), for restart and drop``: who may use them, in words."""
    if spare_nodes <= 0:
        return "no spare nodes: every remedy waits for a failed node's repair"
    who = (
        "for restart and drop (a dropped replica rejoins on a spare)"
        if spares_for is SparesFor.ALL
        else "for restart only (a dropped replica waits for its node's repair)"
    )
    share = spare_nodes / max(job_nodes, 1)
    return f"{spare_nodes:,} spare nodes per {job_nodes:,} job nodes ({share:.1%}), {who}"


def duration(seconds: float) -> str:
    """``172800`` -> ``2 d``; ``420`` -> ``420 s``: the unit a reader thinks in."""
    if seconds >= 86400 and seconds % 3600 == 0:
        return f"{seconds / 86400:g} d"
    if seconds >= 3600 and seconds % 60 == 0:
        return f"{seconds / 3600:g} h"
    return f"{seconds:g} s"


@dataclass(frozen=True, kw_only=True, slots=True)
class RunCosts:
    """One lineage run's recovery policy and costs."""

    run: str
    policy: str
    num_gpus: int
    checkpoint_interval_s: int
    checkpoint_write_s: int
    startup_s: int
    requeue_wait_s: int
    spare_swap_s: int
    spare_nodes: int
    job_nodes: int
    spares_for: SparesFor
    replica_nodes: int
    planned_stops_per_day: float
    planned_pause_s: int

    def to_dict(self) -> dict[str, Any]:
        """The JSON shape."""
        return {
            "run": self.run,
            "policy": self.policy,
            "num_gpus": self.num_gpus,
            "checkpoint": {
                "interval_s": self.checkpoint_interval_s,
                "write_s": self.checkpoint_write_s,
            },
            "startup_s": self.startup_s,
            "requeue_wait_s": self.requeue_wait_s,
            "spare_swap_s": self.spare_swap_s,
            "spares": {
                "nodes": self.spare_nodes,
                "per_job_nodes": self.job_nodes,
                "for": self.spares_for.value if self.spare_nodes else None,
            },
            "replica_nodes": self.replica_nodes,
            "planned_stops_per_day": self.planned_stops_per_day,
            "planned_pause_s": self.planned_pause_s,
        }

    def line(self) -> str:
        """One line of the terminal header."""
        text = (
            f"{self.run}: {self.policy} on {self.num_gpus:,} GPUs; checkpoint every "
            f"{duration(self.checkpoint_interval_s)}, write {duration(self.checkpoint_write_s)}; "
            f"start-up {duration(self.startup_s)}, requeue {duration(self.requeue_wait_s)}, "
            f"spare swap {duration(self.spare_swap_s)}; "
            + spares_phrase(self.spare_nodes, self.job_nodes, self.spares_for)
        )
        if self.planned_stops_per_day:
            text += (
                f"; {self.planned_stops_per_day:g} planned stops a day "
                f"(pause {duration(self.planned_pause_s)})"
            )
        return text


@dataclass(frozen=True, kw_only=True, slots=True)
class RunAssumptions:
    """Every cost and policy behind ``simulate run``: its header, and ``truth.json``'s
    ``assumptions``."""

    scenario: str
    days: float
    seed: int
    failures: FailureSource
    detection_s: int
    software_detection_s: int
    down_s: int
    repair_mean_s: float
    recoverable_share: float
    recoverable_repair_mean_s: int
    runs: tuple[RunCosts, ...]
    maintenance_windows: int
    research: str

    def to_dict(self) -> dict[str, Any]:
        """The JSON shape."""
        return {
            "scenario": self.scenario,
            "days": self.days,
            "seed": self.seed,
            "failures": {
                **self.failures.to_dict(),
                "detection_s": self.detection_s,
                "software_detection_s": self.software_detection_s,
                "repair": {
                    "down_s": self.down_s,
                    "mean_s": self.repair_mean_s,
                    "recoverable_share": self.recoverable_share,
                    "recoverable_mean_s": self.recoverable_repair_mean_s,
                },
            },
            "runs": [r.to_dict() for r in self.runs],
            "maintenance_windows": self.maintenance_windows,
            "research": self.research,
        }

    def lines(self) -> list[str]:
        """The terminal header."""
        f = self.failures
        return [
            f"{self.scenario}: {self.days:g} days, seed {self.seed}",
            f"failures: {f.per_1000_node_days:.3g} per 1,000 node-days ({f.source}); detection "
            f"{duration(self.detection_s)} (software {duration(self.software_detection_s)}), "
            f"down {duration(self.down_s)}, repair mean {duration(self.repair_mean_s)}",
            *(r.line() for r in self.runs),
            f"maintenance windows: {self.maintenance_windows}; research: {self.research}",
        ]


def mean_repair_s(scenario: Scenario) -> float:
    """Mean time from detection to a failed node's return (reboots and part replacements)."""
    cfg = scenario.failures
    share = cfg.recoverable_share
    return share * cfg.recoverable_repair_mean_s + (1 - share) * cfg.repair_mean_s


def run_assumptions(scenario: Scenario) -> RunAssumptions:
    """What ``scenario`` assumes, as ``simulate run`` states it."""
    cfg, research = scenario.failures, scenario.research
    return RunAssumptions(
        scenario=scenario.name,
        days=scenario.days,
        seed=scenario.seed,
        failures=failure_source(scenario),
        detection_s=cfg.detection_s,
        software_detection_s=cfg.software_detection_s,
        down_s=cfg.down_s,
        repair_mean_s=mean_repair_s(scenario),
        recoverable_share=cfg.recoverable_share,
        recoverable_repair_mean_s=cfg.recoverable_repair_mean_s,
        runs=tuple(_run_costs(scenario, run) for run in scenario.lineage),
        maintenance_windows=len(scenario.maintenance),
        research=(
            f"load {research.load:g}, end states RSC-1 (Kokolis et al., arXiv 2410.21680) "
            "unless the scenario gives its own"
            if research.enabled
            else "none"
        ),
    )


def _run_costs(scenario: Scenario, run: LineageConfig) -> RunCosts:
    return RunCosts(
        run=run.name,
        policy=run.policy.value,
        num_gpus=run.num_gpus,
        checkpoint_interval_s=run.checkpoint_interval_s,
        checkpoint_write_s=run.checkpoint_write_s,
        startup_s=run.startup_s,
        requeue_wait_s=run.requeue_wait_s,
        spare_swap_s=run.spare_swap_s,
        spare_nodes=run.spare_nodes,
        job_nodes=scenario.run_nodes(run),
        spares_for=run.spares_for,
        replica_nodes=run.replica_nodes,
        planned_stops_per_day=run.planned_stops_per_day,
        planned_pause_s=run.planned_pause_s,
    )
