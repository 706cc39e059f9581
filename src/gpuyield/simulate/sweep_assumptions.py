"""What a sweep assumed: the scenario's failure rate and source, every recovery cost, the spares.

``sweep.json``, ``sweep.html`` and the terminal header state these beside the numbers; the costs a
point actually used (they scale with its size) are in ``sweep.json``'s ``costs``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gpuyield.simulate.assumptions import (
    FailureSource,
    duration,
    failure_source,
    mean_repair_s,
    spares_phrase,
)
from gpuyield.simulate.ft_costs import FtCalibration
from gpuyield.simulate.scenario import Scenario, SparesFor


@dataclass(frozen=True, kw_only=True, slots=True)
class SweepAssumptions:
    """The scenario behind a sweep, and what the command line changed."""

    scenario: str
    failures: FailureSource
    days: float
    checkpoint_interval_s: float
    checkpoint_write_s: float
    detection_s: float
    requeue_wait_s: float
    startup_s: float
    spare_swap_s: float
    down_s: float
    repair_mean_s: float
    recoverable_share: float
    spare_nodes: int
    job_nodes: int
    spares_for: SparesFor
    replica_nodes: int
    manual_share: float
    manual_delay_s: float
    lemon_share: float
    lemon_factor: float
    rollbacks_per_day: float
    rollback_s: float
    #: The measured recovery costs that replace the assumed ones (``--ft-calibration``).
    ft_calibration: FtCalibration | None = None
    #: An interval sweep: ``checkpoint_interval_s`` is the scenario's, the points use their own.
    interval_swept: bool = False

    def to_dict(self) -> dict[str, Any]:
        """The JSON shape (``sweep.json``'s ``assumptions``)."""
        data: dict[str, Any] = {
            "scenario": self.scenario,
            "days": self.days,
            "failures": {
                **self.failures.to_dict(),
                "lemon_share": self.lemon_share,
                "lemon_factor": self.lemon_factor,
                "manual_share": self.manual_share,
                "manual_delay_s": self.manual_delay_s,
                "recoverable_share": self.recoverable_share,
                "rollbacks_per_day": self.rollbacks_per_day,
                "rollback_s": self.rollback_s,
            },
            "checkpoint": {
                "interval_s": self.checkpoint_interval_s,
                "interval_swept": self.interval_swept,
                "write_s": self.checkpoint_write_s,
            },
            "detection_s": self.detection_s,
            "requeue_wait_s": self.requeue_wait_s,
            "startup_s": self.startup_s,
            "spare_swap_s": self.spare_swap_s,
            "repair": {"down_s": self.down_s, "mean_s": self.repair_mean_s},
            "spares": {
                "nodes": self.spare_nodes,
                "per_job_nodes": self.job_nodes,
                "for": self.spares_for.value if self.spare_nodes else None,
                "pool": "assumed never empty",
            },
            "replica_nodes": self.replica_nodes,
        }
        data["ft_calibration"] = (
            None if self.ft_calibration is None else self.ft_calibration.to_dict()
        )
        return data

    def lines(self) -> list[str]:
        """The terminal header: one line per concern, every figure with its unit."""
        f = self.failures
        rest = [
            f"failures: {f.per_1000_node_days:.3g} per 1,000 node-days ({f.source})",
            (
                f"checkpoint interval swept (the scenario's: "
                f"{duration(self.checkpoint_interval_s)}), "
                if self.interval_swept
                else f"checkpoint every {duration(self.checkpoint_interval_s)}, "
            )
            + f"write {duration(self.checkpoint_write_s)}",
            f"restart: detection {duration(self.detection_s)} + requeue "
            f"{duration(self.requeue_wait_s)} + start-up {duration(self.startup_s)} "
            f"(spares policy: swap {duration(self.spare_swap_s)} instead of the requeue)",
            f"drop: stall {duration(self.detection_s)} (detection); the replica rejoins on a "
            f"spare after swap + start-up, or when its node is back "
            f"(down {duration(self.down_s)} + repair, mean {duration(self.repair_mean_s)})",
            "spares: " + spares_phrase(self.spare_nodes, self.job_nodes, self.spares_for),
        ]
        cal = self.ft_calibration
        if cal is not None:
            rest.append(
                f"recovery costs measured ({cal.path}, {cal.measured_groups} replica groups): "
                f"drop stall {cal.stall_s:.3g} s per surviving group, heal {cal.heal_s:.3g} s, "
                f"restart {cal.restart_s:.3g} s, scaled to each point's size (its costs below and "
                "in sweep.json)"
            )
        return [f"scenario {self.scenario}, {self.days:g} days", *rest]


def sweep_assumptions(
    scenario: Scenario,
    *,
    days: float,
    interval_s: float,
    write_s: float,
    spares_for: SparesFor,
    ft_calibration: FtCalibration | None = None,
) -> SweepAssumptions:
    """What a sweep over ``scenario`` assumes (interval, write and spares as the sweep set them)."""
    from gpuyield.simulate.from_scenario import first_run

    run, cfg = first_run(scenario), scenario.failures
    return SweepAssumptions(
        scenario=scenario.name,
        failures=failure_source(scenario),
        days=days,
        checkpoint_interval_s=interval_s,
        checkpoint_write_s=write_s,
        detection_s=cfg.detection_s,
        requeue_wait_s=run.requeue_wait_s,
        startup_s=run.startup_s,
        spare_swap_s=run.spare_swap_s,
        down_s=cfg.down_s,
        repair_mean_s=mean_repair_s(scenario),
        recoverable_share=cfg.recoverable_share,
        spare_nodes=run.spare_nodes,
        job_nodes=scenario.run_nodes(run),
        spares_for=spares_for,
        replica_nodes=run.replica_nodes,
        manual_share=cfg.manual_share,
        manual_delay_s=cfg.manual_delay_s,
        lemon_share=cfg.lemon_share,
        lemon_factor=cfg.lemon_factor,
        rollbacks_per_day=cfg.rollbacks_per_day,
        rollback_s=cfg.rollback_s,
        ft_calibration=ft_calibration,
    )
