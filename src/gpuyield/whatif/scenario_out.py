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
class ScenarioFile:
    """A simulator scenario as TOML tables (``data``), ready to write or to simulate."""

    data: dict[str, Any]
    origin: str

    def to_dict(self) -> dict[str, Any]:
        """The TOML tables."""
        return self.data

    def scenario(self) -> Scenario:
        """The simulator's ``Scenario`` (validated as a file would be)."""
        return scenario_from_dict(self.data, origin=self.origin)

    def write(self, path: Path, header: str) -> None:
        """Write the file: ``header`` as comment lines, then the tables (tomli-w)."""
        comments = "".join(f"# {line}\n" if line else "#\n" for line in header.splitlines())
        path.write_text(comments + "\n" + tomli_w.dumps(self.data), encoding="utf-8")


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
    data: dict[str, Any] = {
        "scenario": {
            "name": f"fit-{fit.cluster}",
            "description": f"fitted by gpuyield whatif fit from {fit.db}",
            "start": datetime.fromtimestamp(fit.start_s, UTC).replace(tzinfo=None),
            "days": days,
            "seed": seed,
            "cluster": fit.cluster,
        },
        "fleet": {"num_nodes": fit.num_nodes, "gpus_per_node": fit.gpus_per_node},
        "failures": _failures(v),
        "lineage": [_lineage(s, v, stretch) for s in fit.lineage],
        "maintenance": [m.to_dict() for m in _tiled(fit.maintenance, fit.days, days)],
    }
    if fit.research_classes:
        data["research"] = _research(fit, v, data, days)
    return ScenarioFile(data=data, origin=f"<fit of {fit.db}>")


def _failures(v: Mapping[str, float]) -> dict[str, Any]:
    return {
        "rates_per_1000_node_days": split_rates(dict(v)),
        "detection_s": round(v["failures.detection_s"]),
        "software_detection_s": round(v["failures.software_detection_s"]),
        "down_s": round(v["failures.down_s"]),
        "repair_mean_s": max(round(v["failures.repair_mean_s"]), 1),
        "manual_share": min(max(v["failures.manual_share"], 0.0), 1.0),
        "manual_delay_s": round(v["failures.manual_delay_s"]),
        "rollbacks_per_day": max(v["failures.rollbacks_per_day"], 0.0),
    }


def _lineage(shape: LineageShape, v: Mapping[str, float], stretch: float) -> dict[str, Any]:
    key = f"lineage.{shape.name}"
    interval = max(round(v[f"{key}.checkpoint_interval_s"]), 2)
    # The simulator needs start-up and the write to fit in an interval (a draw may not).
    write = min(round(v[f"{key}.checkpoint_write_s"]), interval - 1)
    startup = min(round(v[f"{key}.startup_s"]), interval - write - 1)
    return {
        "name": shape.name,
        "release": shape.release,
        "num_gpus": shape.num_gpus,
        "start_day": shape.start_day * stretch,
        "work_days": shape.work_days * stretch,
        "checkpoint_interval_s": interval,
        "checkpoint_write_s": write,
        "startup_s": startup,
        "requeue_wait_s": round(v[f"{key}.requeue_wait_s"]),
        "spare_nodes": shape.spare_nodes,
        "policy": "drop" if shape.drop else "restart",
        "planned_stops_per_day": max(v[f"{key}.planned_stops_per_day"], 0.0),
        "planned_pause_s": round(v[f"{key}.planned_pause_s"]),
        "telemetry": shape.telemetry,
    }


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
    fit: ClusterFit, v: Mapping[str, float], data: dict[str, Any], days: float
) -> dict[str, Any]:
    """Research tables whose load and shares draw the fitted arrivals per class."""
    classes = [
        {
            "num_gpus": cls,
            "gpu_time_share": 1.0,
            "median_duration_s": max(round(v[f"research.classes.{cls}.median_duration_s"]), 1),
            "duration_sigma": max(v[f"research.classes.{cls}.duration_sigma"], 0.0),
            "time_limit_s": max(round(v[f"research.classes.{cls}.time_limit_s"]), 1),
        }
        for cls in fit.research_classes
    ]
    states = {
        s.removeprefix("research.end_states."): max(value, 0.0)
        for s, value in v.items()
        if s.startswith("research.end_states.")
    }
    if sum(states.values()) <= 0:
        states = {"completed": 1.0}
    research: dict[str, Any] = {
        "enabled": True,
        "load": 1.0,
        "classes": classes,
        "end_states": states,
        "diverged_share": min(max(v["research.diverged_share"], 0.0), 1.0),
        "backfill_lineage_gaps": fit.backfill,
    }
    wanted = [max(v[f"research.arrivals.{cls}"], 0.0) * days for cls in fit.research_classes]
    lent = _lent_node_s(fit, data, days)
    for _ in range(_SOLVE_ROUNDS):
        trial = scenario_from_dict({**data, "research": research}, origin="<fit>")
        expected = expected_research_jobs(trial, lent)
        for cls, want, got in zip(classes, wanted, expected, strict=True):
            cls["gpu_time_share"] = max(cls["gpu_time_share"] * (want / got if got else 1.0), 1e-6)
        load = research["load"] * sum(wanted) / max(sum(expected), 1e-9)
        research["load"] = min(load, MAX_RESEARCH_LOAD)
    total = sum(c["gpu_time_share"] for c in classes)
    for cls in classes:
        cls["gpu_time_share"] /= total
    return research


def _lent_node_s(fit: ClusterFit, data: dict[str, Any], days: float) -> int:
    """Node-seconds lineage groups lend research outside their runs (``backfill``), as the
    simulator counts them: the window less each run's time from submit to completion."""
    if not fit.backfill:
        return 0
    span = days * 86400
    lent = 0.0
    for run, shape in zip(data["lineage"], fit.lineage, strict=True):
        nodes = run["num_gpus"] // fit.gpus_per_node + shape.spare_nodes
        held_from = min(run["start_day"] * 86400, span)
        held_to = span if run["work_days"] <= 0 else min(span, held_from + _wall_s(run))
        lent += nodes * (span - (held_to - held_from))
    return round(lent)


def _wall_s(run: Mapping[str, Any]) -> float:
    """A finishing run's wall time, roughly: its work plus a checkpoint write per interval."""
    interval = run["checkpoint_interval_s"]
    compute = interval - run["checkpoint_write_s"]
    return run["work_days"] * 86400 * interval / max(compute, 1) + run["startup_s"]
