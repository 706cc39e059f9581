"""Remedies: changes to the fitted scenario a lab could make, each with the costs it assumes.

A remedy is written ``name`` or ``name=value`` (``drop-replicas``, ``checkpoint=20m``,
``checkpoint=optimal``, ``fill-idle``, ``ladder``, ``repair=12h``, ``spares=4``); several joined
with ``+`` are applied together. Durations read as ``30s``, ``20m``, ``12h``, ``2d`` (or plain
seconds), counts as ``4``, ``16k``. Each remedy changes the simulator's scenario and states
what it assumes; the costs of dropping failed replicas are the ones ``python -m bench ft``
measured on real drop and restart runs (``gpuyield/data/calibration/ft-costs.toml``), scaled to
each run's size by the rules in docs/simulate.md.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from gpuyield.errors import FieldError, InputError
from gpuyield.simulate import Scenario
from gpuyield.simulate.ft_costs import load_ft_calibration
from gpuyield.simulate.scenario import LineageConfig, Policy
from gpuyield.whatif.model import ClusterFit

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
_COUNT_UNITS = {"": 1, "k": 1_000, "m": 1_000_000}
#: What ``gpuyield whatif`` projects when no ``--remedy`` is given.
DEFAULT_REMEDIES = ("drop-replicas", "checkpoint=optimal", "fill-idle", "ladder")


@dataclass(frozen=True, kw_only=True, slots=True)
class Remedy:
    """One remedy (or several applied together) and what it assumes."""

    name: str
    """As written (``drop-replicas+checkpoint=20m``)."""
    parts: tuple[str, ...]
    """Each remedy it combines."""
    assumptions: tuple[str, ...]
    """What each part takes as given, in words (stated in every output)."""
    not_applicable: tuple[str, ...]
    """Why a part changes nothing on this cluster (empty when every part applies)."""

    def to_dict(self) -> dict[str, Any]:
        """JSON shape."""
        return {
            "name": self.name,
            "parts": list(self.parts),
            "assumptions": list(self.assumptions),
            "not_applicable": list(self.not_applicable),
        }


@dataclass(frozen=True, kw_only=True, slots=True)
class Edit:
    """A scenario with one remedy applied, and what the remedy assumed, in words."""

    scenario: Scenario
    said: str


Editor = Callable[[Scenario, ClusterFit, str], Edit]
"""Applies a remedy with its value to a scenario (validated as a file would be)."""


def parse_duration_s(text: str, field: str) -> float:
    """``30s``, ``20m``, ``12h``, ``2d`` or plain seconds."""
    found = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smhd]?)\s*", text)
    if not found or float(found.group(1)) <= 0:
        raise FieldError(
            field, f"must be a duration like 20m, 12h or 2d, not {text!r}", example="20m"
        )
    return float(found.group(1)) * _UNITS.get(found.group(2) or "s", 1)


def parse_count(text: str, field: str) -> int:
    """``4``, ``16k``, ``1.5M``."""
    found = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([kKmM]?)\s*", text)
    if not found:
        raise FieldError(field, f"must be a count like 4 or 16k, not {text!r}", example="4")
    return round(float(found.group(1)) * _COUNT_UNITS[found.group(2).lower()])


# What each remedy's value must be, checked before any fit (a typo costs no minutes of fitting).
_VALUE_CHECKS = {
    "checkpoint": lambda v: v == "optimal" or parse_duration_s(v, "whatif.remedy.checkpoint"),
    "repair": lambda v: parse_duration_s(v, "whatif.remedy.repair"),
    "spares": lambda v: parse_count(v, "whatif.remedy.spares"),
}


def check_remedy(text: str) -> None:
    """Refuse a remedy that is not written as one (unknown name, bad value) without a fit."""
    parts = [p.strip() for p in text.split("+") if p.strip()]
    if not parts:
        raise FieldError("whatif.remedy", "must name a remedy", example="drop-replicas")
    for part in parts:
        name, _, value = part.partition("=")
        if name not in EDITORS:
            raise InputError(
                f"unknown remedy {name!r}",
                hint=f"remedies: {', '.join(sorted(EDITORS))} (docs/whatif.md)",
            )
        if name in _VALUE_CHECKS:
            _VALUE_CHECKS[name](value)


def parse_remedy(text: str, fit: ClusterFit, base: Scenario) -> Remedy:
    """A remedy as written, checked against what the fit can change; ``base`` is the fitted
    scenario (the remedy is applied to it to say what it assumes)."""
    parts = tuple(p.strip() for p in text.split("+") if p.strip())
    if not parts:
        raise FieldError("whatif.remedy", "must name a remedy", example="drop-replicas")
    assumptions: list[str] = []
    missing: list[str] = []
    probe = base
    for part in parts:
        name, _, value = part.partition("=")
        if name not in EDITORS:
            raise InputError(
                f"unknown remedy {name!r}",
                hint=f"remedies: {', '.join(sorted(EDITORS))} (docs/whatif.md)",
            )
        reason = applicable(name, fit)
        if reason:
            missing.append(f"{part}: {reason}")
            continue
        edit = EDITORS[name](probe, fit, value)
        probe = edit.scenario
        assumptions.append(f"{part}: {edit.said}")
    return Remedy(
        name=text, parts=parts, assumptions=tuple(assumptions), not_applicable=tuple(missing)
    )


def apply_remedy(remedy: Remedy, scenario: Scenario, fit: ClusterFit) -> Scenario:
    """``scenario`` with the remedy applied (parts that do not apply change nothing)."""
    for part in remedy.parts:
        name, _, value = part.partition("=")
        if not applicable(name, fit):
            scenario = EDITORS[name](scenario, fit, value).scenario
    return scenario


def applicable(name: str, fit: ClusterFit) -> str:
    """Why remedy ``name`` changes nothing on this cluster ("" when it applies)."""
    if name in ("drop-replicas", "checkpoint", "spares") and not fit.lineage:
        return "no release-lineage run in the window"
    if name == "fill-idle" and not (fit.lineage and fit.research_classes):
        return "needs lineage runs and research jobs (research fills the lineage nodes' gaps)"
    if name == "fill-idle" and fit.backfill:
        return "research already runs on the lineage nodes outside their runs"
    if name == "ladder":
        return (
            "the records cannot show which jobs skipped a rung of the scaling ladder (declare "
            "[[families]] in the manifest: docs/ladder.md); gpuyield simulate sweep --param "
            "ladder-skip-share prices it on assumed shares"
        )
    return ""


def _drop(scenario: Scenario, fit: ClusterFit, value: str) -> Edit:
    del value
    cal = load_ft_calibration()
    said = []
    runs = []
    for run in scenario.lineage:
        costs = cal.costs_at(run.num_gpus)
        runs.append(
            dataclasses.replace(
                run,
                policy=Policy.DROP,
                replica_nodes=max(cal.gpus_per_group // fit.gpus_per_node, 1),
                drop_stall_s=round(costs.detection_s, 3),
                drop_rejoin_s=round(costs.rejoin_s, 3),
            )
        )
        said.append(
            f"{run.name} drops a failed {cal.gpus_per_group}-GPU replica: survivors stall "
            f"{costs.detection_s:.1f} s, it rejoins after {costs.rejoin_s:.1f} s on a free spare "
            f"(the run keeps {run.spare_nodes}; with none free it waits for its node's "
            "repair)"
        )
    return Edit(
        scenario=dataclasses.replace(scenario, lineage=tuple(runs)),
        said="; ".join(said)
        + f" (measured in {cal.path} by python -m bench ft and scaled to each run's replica "
        f"groups; the spare is hot: replacement_s = {cal.replacement_s:g})",
    )


def _checkpoint(scenario: Scenario, fit: ClusterFit, value: str) -> Edit:
    if value == "optimal":
        return _optimal_checkpoint(scenario, fit)
    interval = round(parse_duration_s(value, "whatif.remedy.checkpoint"))
    runs = tuple(_with_interval(run, interval) for run in scenario.lineage)
    return Edit(
        scenario=dataclasses.replace(scenario, lineage=runs),
        said=f"every lineage run checkpoints every {interval} s; each write stalls as fitted",
    )


def _with_interval(run: LineageConfig, interval: int) -> LineageConfig:
    # An interval must hold the start-up and a write (the simulator's rule).
    floor = run.startup_s + run.checkpoint_write_s + 1
    return dataclasses.replace(run, checkpoint_interval_s=max(interval, floor))


def _optimal_checkpoint(scenario: Scenario, fit: ClusterFit) -> Edit:
    """Young's interval sqrt(2 delta M) for each run, with M the run's fitted mean time between
    failures (hardware and software rates times its nodes)."""
    values = fit.values()
    per_node_s = (
        values.get("failures.hardware_total", 0.0) + values.get("failures.rate.software", 0.0)
    ) / (1000 * 86400)
    said = []
    runs = []
    for run, shape in zip(scenario.lineage, fit.lineage, strict=True):
        nodes = shape.num_gpus // fit.gpus_per_node
        mtbf = 1 / (per_node_s * nodes) if per_node_s > 0 else math.inf
        delta = max(run.checkpoint_write_s, 1)
        interval = round(math.sqrt(2 * delta * mtbf)) if math.isfinite(mtbf) else 86400
        runs.append(_with_interval(run, interval))
        said.append(f"{shape.name} every {runs[-1].checkpoint_interval_s} s")
    return Edit(
        scenario=dataclasses.replace(scenario, lineage=tuple(runs)),
        said="Young's interval sqrt(2 x write x mean time between failures): " + ", ".join(said),
    )


def _fill_idle(scenario: Scenario, fit: ClusterFit, value: str) -> Edit:
    del fit, value
    research = scenario.research
    if research.enabled:
        research = dataclasses.replace(research, backfill_lineage_gaps=True)
    return Edit(
        scenario=dataclasses.replace(scenario, research=research),
        said="research jobs run on lineage nodes while no lineage run holds them and are "
        "preempted (requeued) when the run takes the nodes back; the research demand is as "
        "fitted",
    )


def _ladder(scenario: Scenario, fit: ClusterFit, value: str) -> Edit:
    del fit, value
    research = scenario.research
    if research.enabled:
        research = dataclasses.replace(research, ladder_skip_share=0.0)
    return Edit(
        scenario=dataclasses.replace(scenario, research=research),
        said="every job climbs the scaling ladder: none skips its lower rung",
    )


def _repair(scenario: Scenario, fit: ClusterFit, value: str) -> Edit:
    del fit
    mean = round(parse_duration_s(value, "whatif.remedy.repair"))
    failures = dataclasses.replace(scenario.failures, repair_mean_s=mean)
    return Edit(
        scenario=dataclasses.replace(scenario, failures=failures),
        said=f"failed nodes are back in {mean} s on average (exponential), faster parts or staff",
    )


def _spares(scenario: Scenario, fit: ClusterFit, value: str) -> Edit:
    count = parse_count(value, "whatif.remedy.spares")
    added = sum(max(count - run.spare_nodes, 0) for run in scenario.lineage)
    runs = tuple(
        dataclasses.replace(run, policy=Policy.SPARES, spare_nodes=max(run.spare_nodes, count))
        for run in scenario.lineage
    )
    # The spares come from the research nodes: maintenance windows move up with them (and a
    # window left with no node is dropped).
    kept = []
    for window in scenario.maintenance:
        first = window.first_node + added
        num = min(window.num_nodes, fit.num_nodes - first)
        if num > 0:
            kept.append(dataclasses.replace(window, first_node=first, num_nodes=num))
    return Edit(
        scenario=dataclasses.replace(scenario, lineage=runs, maintenance=tuple(kept)),
        said=f"each lineage run keeps {count} hot spare nodes (taken from research) and restarts "
        f"on one after the simulator's spare_swap_s (30 s); {fit.gpus_per_node * count} GPUs "
        "each",
    )


EDITORS: dict[str, Editor] = {
    "drop-replicas": _drop,
    "checkpoint": _checkpoint,
    "fill-idle": _fill_idle,
    "ladder": _ladder,
    "repair": _repair,
    "spares": _spares,
}
