"""The fitted scenario: a simulator scenario file built from a fit's parameter values.

``scenario_file(fit)`` builds it from the fitted values; projections build it again from values
drawn from the parameters' uncertainty, and for a horizon other than the window (``days``): the
lineage schedule is stretched to the horizon (a run that held the cluster from day 5 of a 30-day
window starts on day 15 of a 90-day horizon) and maintenance windows recur with the window's
period. The research queue's load and class shares are solved with the simulator's own count of
the jobs it would draw (``simulate.expected_research_jobs``), so the fitted scenario draws the
arrivals the window saw.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import tomli_w

from gpuyield.simulate import Scenario, expected_research_jobs, scenario_from_dict
from gpuyield.whatif.fit_failures import split_rates
from gpuyield.whatif.fit_lineage import LineageShape
from gpuyield.whatif.maintenance import MaintenanceShape
from gpuyield.whatif.model import ClusterFit

# Rounds of the share/load solve: the node layout rounds shares to whole nodes, so a few
# fixed-point steps settle it.
_SOLVE_ROUNDS = 4
# The largest research load the solve writes. When the scenario leaves research (almost) no nodes
# (the lineage runs' whole nodes fill a small fleet) no load draws the window's arrivals and the
# solve would run off to 1e40; any load above 1 already grows the queue without bound, so a
# hundred times saturation is as much as a load can say. The replay check names what it misses.
MAX_RESEARCH_LOAD = 100.0


@dataclass(frozen=True, kw_only=True, slots=True)
class FittedFailures:
    """``[failures]``: rates per cause and the times a failure takes, as fitted."""

    rates_per_1000_node_days: dict[str, float]
    detection_s: int
    software_detection_s: int
    down_s: int
    repair_mean_s: int
    manual_share: float
    manual_delay_s: int
    rollbacks_per_day: float

    def to_dict(self) -> dict[str, Any]:
        """The TOML table."""
        return {
            "rates_per_1000_node_days": self.rates_per_1000_node_days,
            "detection_s": self.detection_s,
            "software_detection_s": self.software_detection_s,
            "down_s": self.down_s,
            "repair_mean_s": self.repair_mean_s,
            "manual_share": self.manual_share,
            "manual_delay_s": self.manual_delay_s,
            "rollbacks_per_day": self.rollbacks_per_day,
        }


@dataclass(frozen=True, kw_only=True, slots=True)
class FittedRun:
    """One ``[[lineage]]`` run: its shape, stretched to the horizon, and its fitted times."""

    name: str
    release: str
    num_gpus: int
    start_day: float
    work_days: float
    checkpoint_interval_s: int
    checkpoint_write_s: int
    startup_s: int
    requeue_wait_s: int
    spare_nodes: int
    policy: str
    planned_stops_per_day: float
    planned_pause_s: int
    telemetry: bool

    def to_dict(self) -> dict[str, Any]:
        """The TOML table."""
        return {name: getattr(self, name) for name in self.__slots__}

    def wall_s(self) -> float:
        """A finishing run's wall time, roughly: its work plus a checkpoint write per interval."""
        compute = self.checkpoint_interval_s - self.checkpoint_write_s
        return (
            self.work_days * 86400 * self.checkpoint_interval_s / max(compute, 1) + self.startup_s
        )


@dataclass(frozen=True, kw_only=True, slots=True)
class FittedClass:
    """One ``[[research.classes]]`` size class."""

    num_gpus: int
    gpu_time_share: float
    median_duration_s: int
    duration_sigma: float
    time_limit_s: int

    def to_dict(self) -> dict[str, Any]:
        """The TOML table."""
        return {name: getattr(self, name) for name in self.__slots__}


@dataclass(frozen=True, kw_only=True, slots=True)
class FittedResearch:
    """``[research]``: the queue's load and classes, solved to draw the fitted arrivals."""

    load: float
    classes: tuple[FittedClass, ...]
    end_states: dict[str, float]
    diverged_share: float
    backfill_lineage_gaps: bool

    def to_dict(self) -> dict[str, Any]:
        """The TOML table (always enabled: a fit without research jobs has no table)."""
        return {
            "enabled": True,
            "load": self.load,
            "classes": [c.to_dict() for c in self.classes],
            "end_states": self.end_states,
            "diverged_share": self.diverged_share,
            "backfill_lineage_gaps": self.backfill_lineage_gaps,
        }


@dataclass(frozen=True, kw_only=True, slots=True)
class ScenarioFile:
    """A fitted simulator scenario, ready to write as TOML or to simulate."""

    name: str
    description: str
    start: datetime
    """Window start, naive UTC (as TOML writes a local date-time)."""
    days: float
    seed: int
    cluster: str
    num_nodes: int
    gpus_per_node: int
    failures: FittedFailures
    lineage: tuple[FittedRun, ...]
    maintenance: tuple[MaintenanceShape, ...]
    research: FittedResearch | None
    """None when the window had no research jobs."""
    origin: str

    def to_dict(self) -> dict[str, Any]:
        """The TOML tables."""
        data: dict[str, Any] = {
            "scenario": {
                "name": self.name,
                "description": self.description,
                "start": self.start,
                "days": self.days,
                "seed": self.seed,
                "cluster": self.cluster,
            },
            "fleet": {"num_nodes": self.num_nodes, "gpus_per_node": self.gpus_per_node},
            "failures": self.failures.to_dict(),
            "lineage": [run.to_dict() for run in self.lineage],
            "maintenance": [m.to_dict() for m in self.maintenance],
        }
        if self.research is not None:
            data["research"] = self.research.to_dict()
        return data

    def scenario(self) -> Scenario:
        """The simulator's ``Scenario`` (validated as a file would be)."""
        return scenario_from_dict(self.to_dict(), origin=self.origin)

    def write(self, path: Path, header: str) -> None:
        """Write the file: ``header`` as comment lines, then the tables (tomli-w)."""
        comments = "".join(f"# {line}\n" if line else "#\n" for line in header.splitlines())
        path.write_text(comments + "\n" + tomli_w.dumps(self.to_dict()), encoding="utf-8")


def scenario_file(
    fit: ClusterFit,
    values: Mapping[str, float] | None = None,
    *,
    days: float | None = None,
    seed: int = 0,
) -> ScenarioFile:
    """The scenario of ``fit`` with ``values`` (default: the fitted ones) over ``days``."""
    v = dict(fit.values() if values is None else values)
    days = fit.days if days is None else days
    stretch = days / fit.days
    file = ScenarioFile(
        name=f"fit-{fit.cluster}",
        description=f"fitted by gpuyield whatif fit from {fit.db}",
        start=datetime.fromtimestamp(fit.start_s, UTC).replace(tzinfo=None),
        days=days,
        seed=seed,
        cluster=fit.cluster,
        num_nodes=fit.num_nodes,
        gpus_per_node=fit.gpus_per_node,
        failures=_failures(v),
        lineage=tuple(_lineage(s, v, stretch) for s in fit.lineage),
        maintenance=tuple(_tiled(fit.maintenance, fit.days, days)),
        research=None,
        origin=f"<fit of {fit.db}>",
    )
    if not fit.research_classes:
        return file
    return dataclasses.replace(file, research=_research(fit, v, file, days))


def _failures(v: Mapping[str, float]) -> FittedFailures:
    return FittedFailures(
        rates_per_1000_node_days=split_rates(dict(v)),
        detection_s=round(v["failures.detection_s"]),
        software_detection_s=round(v["failures.software_detection_s"]),
        down_s=round(v["failures.down_s"]),
        repair_mean_s=max(round(v["failures.repair_mean_s"]), 1),
        manual_share=min(max(v["failures.manual_share"], 0.0), 1.0),
        manual_delay_s=round(v["failures.manual_delay_s"]),
        rollbacks_per_day=max(v["failures.rollbacks_per_day"], 0.0),
    )


def _lineage(shape: LineageShape, v: Mapping[str, float], stretch: float) -> FittedRun:
    key = f"lineage.{shape.name}"
    interval = max(round(v[f"{key}.checkpoint_interval_s"]), 2)
    # The simulator needs start-up and the write to fit in an interval (a draw may not).
    write = min(round(v[f"{key}.checkpoint_write_s"]), interval - 1)
    startup = min(round(v[f"{key}.startup_s"]), interval - write - 1)
    return FittedRun(
        name=shape.name,
        release=shape.release,
        num_gpus=shape.num_gpus,
        start_day=shape.start_day * stretch,
        work_days=shape.work_days * stretch,
        checkpoint_interval_s=interval,
        checkpoint_write_s=write,
        startup_s=startup,
        requeue_wait_s=round(v[f"{key}.requeue_wait_s"]),
        spare_nodes=shape.spare_nodes,
        policy="drop" if shape.drop else "restart",
        planned_stops_per_day=max(v[f"{key}.planned_stops_per_day"], 0.0),
        planned_pause_s=round(v[f"{key}.planned_pause_s"]),
        telemetry=shape.telemetry,
    )


def _tiled(
    windows: tuple[MaintenanceShape, ...], period_days: float, days: float
) -> list[MaintenanceShape]:
    """The window's maintenance repeated every ``period_days`` up to ``days``."""
    tiled = []
    for repeat in range(math.ceil(days / period_days)):
        for window in windows:
            start = window.start_day + repeat * period_days
            if start < days:
                tiled.append(dataclasses.replace(window, start_day=start))
    return tiled


def _research(
    fit: ClusterFit, v: Mapping[str, float], file: ScenarioFile, days: float
) -> FittedResearch:
    """Research whose load and class shares draw the fitted arrivals per class."""
    classes = [
        FittedClass(
            num_gpus=cls,
            gpu_time_share=1.0,
            median_duration_s=max(round(v[f"research.classes.{cls}.median_duration_s"]), 1),
            duration_sigma=max(v[f"research.classes.{cls}.duration_sigma"], 0.0),
            time_limit_s=max(round(v[f"research.classes.{cls}.time_limit_s"]), 1),
        )
        for cls in fit.research_classes
    ]
    states = {
        s.removeprefix("research.end_states."): max(value, 0.0)
        for s, value in v.items()
        if s.startswith("research.end_states.")
    }
    if sum(states.values()) <= 0:
        states = {"completed": 1.0}
    research = FittedResearch(
        load=1.0,
        classes=tuple(classes),
        end_states=states,
        diverged_share=min(max(v["research.diverged_share"], 0.0), 1.0),
        backfill_lineage_gaps=fit.backfill,
    )
    wanted = [max(v[f"research.arrivals.{cls}"], 0.0) * days for cls in fit.research_classes]
    lent = _lent_node_s(fit, file, days)
    for _ in range(_SOLVE_ROUNDS):
        trial = dataclasses.replace(file, research=research).scenario()
        expected = expected_research_jobs(trial, lent)
        solved = tuple(
            dataclasses.replace(
                c, gpu_time_share=max(c.gpu_time_share * (want / got if got else 1.0), 1e-6)
            )
            for c, want, got in zip(research.classes, wanted, expected, strict=True)
        )
        load = research.load * sum(wanted) / max(sum(expected), 1e-9)
        research = dataclasses.replace(research, classes=solved, load=min(load, MAX_RESEARCH_LOAD))
    total = sum(c.gpu_time_share for c in research.classes)
    shares = tuple(
        dataclasses.replace(c, gpu_time_share=c.gpu_time_share / total) for c in research.classes
    )
    return dataclasses.replace(research, classes=shares)


def _lent_node_s(fit: ClusterFit, file: ScenarioFile, days: float) -> int:
    """Node-seconds lineage groups lend research outside their runs (``backfill``), as the
    simulator counts them: the window less each run's time from submit to completion."""
    if not fit.backfill:
        return 0
    span = days * 86400
    lent = 0.0
    for run, shape in zip(file.lineage, fit.lineage, strict=True):
        nodes = run.num_gpus // fit.gpus_per_node + shape.spare_nodes
        held_from = min(run.start_day * 86400, span)
        held_to = span if run.work_days <= 0 else min(span, held_from + run.wall_s())
        lent += nodes * (span - (held_to - held_from))
    return round(lent)
