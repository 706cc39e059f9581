"""Scenario files: typed configuration of one simulation, read from TOML.

A scenario names a fleet, a failure process, release-lineage runs and a research workload. Bundled
scenarios live in ``gpuyield/data/scenarios/sim/<name>.toml``; users pass a path to their own.
Every field is validated with its dotted name (each table in ``scenario_tables``, the checks across
tables here), so a typo in a file says where.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from gpuyield import parsing, tomlfile
from gpuyield.errors import FieldError, InputError, ParseError
from gpuyield.simulate.calibration import CAUSES_BY_ID
from gpuyield.simulate.fleet_types import check_typed
from gpuyield.simulate.policies import Policy, SparesFor
from gpuyield.simulate.scenario_tables import (
    FailureConfig,
    FleetConfig,
    JobClass,
    LineageConfig,
    MaintenanceWindow,
    ResearchConfig,
    check_maintenance_overlap,
    non_negative,
    positive,
)
from gpuyield.simulate.scenario_types import check_array, check_table

# Bundled scenarios: gpuyield/data/scenarios/sim/<name>.toml.
_FOLDER = "scenarios/sim"


# The longest scenario simulated: a century (the 100k-GPU year is the benchmark).
MAX_DAYS = 36_500


@dataclass(frozen=True, kw_only=True, slots=True)
class Scenario:
    """A whole simulation: fleet, failures, workload, window."""

    name: str
    description: str = ""
    #: Window start, UTC.
    start: datetime = datetime(2026, 1, 1, tzinfo=UTC)
    days: float = 30.0
    seed: int = 0
    cluster: str = "sim"
    fleet: FleetConfig
    failures: FailureConfig = field(default_factory=FailureConfig)
    lineage: tuple[LineageConfig, ...] = ()
    research: ResearchConfig = field(default_factory=ResearchConfig)
    maintenance: tuple[MaintenanceWindow, ...] = ()

    def __post_init__(self) -> None:
        positive(self.days, "scenario.days")
        if self.days > MAX_DAYS:  # a century of events is already more than any file holds
            raise InputError(
                f"scenario.days must be at most {MAX_DAYS:,}, got {self.days!r}",
                hint="fix the scenario file",
            )
        non_negative(self.seed, "scenario.seed")
        names = [run.name for run in self.lineage]
        if len(set(names)) != len(names):
            raise InputError("lineage run names must be unique", hint=f"names: {names}")
        if self.group_nodes_total() > self.fleet.num_nodes:
            raise InputError(
                f"lineage groups need {self.group_nodes_total()} nodes but fleet.num_nodes is "
                f"{self.fleet.num_nodes}",
                hint="raise fleet.num_nodes or shrink the lineage runs",
            )
        self._check_maintenance()
        check_typed(self.fleet, backfill=self.research.backfill_lineage_gaps and bool(self.lineage))
        for run in self.lineage:
            if run.num_gpus % self.fleet.gpus_per_node:
                raise InputError(
                    f"lineage.{run.name}.num_gpus must be a multiple of fleet.gpus_per_node",
                    hint=f"use a multiple of {self.fleet.gpus_per_node}",
                )

    def _check_maintenance(self) -> None:
        """Maintenance drains research nodes only, one window per node at a time."""
        for window in self.maintenance:
            if window.first_node < self.group_nodes_total() or (
                window.first_node + window.num_nodes > self.fleet.num_nodes
            ):
                raise InputError(
                    f"maintenance nodes {window.first_node}..{window.first_node + window.num_nodes - 1}"
                    f" must be research nodes ({self.group_nodes_total()}..{self.fleet.num_nodes - 1})",
                    hint="lineage groups take the first nodes; move maintenance.first_node up",
                )
        check_maintenance_overlap(self.maintenance)

    @property
    def start_s(self) -> int:
        """Window start, epoch seconds."""
        return int(self.start.timestamp())

    @property
    def end_s(self) -> int:
        """Window end, epoch seconds."""
        return self.start_s + round(self.days * 86400)

    def run_nodes(self, run: LineageConfig) -> int:
        """Nodes the job of ``run`` runs on (spares not included)."""
        return run.num_gpus // self.fleet.gpus_per_node

    def work_s(self, run: LineageConfig) -> int | None:
        """Productive seconds ``run`` needs (None: it trains until the window ends)."""
        if run.work_days > 0:
            return round(run.work_days * 86400)
        if run.tokens <= 0:
            return None
        peak = run.peak_tflops or _catalog_peak(self.fleet.accelerator, run.name)
        flops = 6.0 * run.active_params_b * 1e9 * run.tokens
        return round(flops / (run.num_gpus * peak * 1e12 * run.mfu))

    def group_nodes_total(self) -> int:
        """Nodes held by all lineage groups (jobs plus their spares)."""
        return sum(self.run_nodes(r) + r.spare_nodes for r in self.lineage)

    def failure_rates(self, *, job_gpus: float | None = None) -> dict[str, float]:
        """Rate per node-second by cause, after defaults, the table's size law and ``rate_scale``.

        A table with a size law (``size_exponent``) describes a job of ``job_gpus`` GPUs; by
        default the largest lineage run's (every node of the fleet fails at that job's rate, which
        is exact for a fleet holding one job and first-order for a mixed one), else the fleet's.
        """
        from gpuyield.simulate.calibration import llama3_rate_per_1000_node_days

        rates = {c.id: llama3_rate_per_1000_node_days(c) for c in CAUSES_BY_ID.values()}
        if self.failures.table:
            from gpuyield.simulate.failure_tables import get_failure_table

            # The table sets the total; Table 5 (the only per-cause table published) the mix.
            table = get_failure_table(self.failures.table)
            total = table.rate_at(self.job_gpus() if job_gpus is None else job_gpus)
            share = total / sum(rates.values())
            rates = {cause: rate * share for cause, rate in rates.items()}
        rates.update(self.failures.rates_per_1000_node_days)
        scale = self.failures.rate_scale / 1000.0 / 86400.0
        return {cause: rate * scale for cause, rate in rates.items()}

    def job_gpus(self) -> int:
        """GPUs of the largest lineage run (the fleet's without one): the size a table's law uses."""
        return max((run.num_gpus for run in self.lineage), default=self.fleet.num_gpus)

    def with_overrides(self, **changes: Any) -> Scenario:
        """A copy with top-level fields replaced (``days``, ``seed``, ``fleet``, ...)."""
        return dataclasses.replace(self, **changes)


def _catalog_peak(accelerator: str, run: str) -> float:
    """Dense BF16 peak from the estimator's catalog; only used when a run gives tokens."""
    try:
        from gpuyield.estimate.catalog import get_accelerator
    except ImportError as error:  # the catalog is another part of gpuyield; say how to do without
        raise InputError(
            f"lineage.{run}.peak_tflops is needed: no accelerator catalog to look up {accelerator!r}",
            hint="set peak_tflops in the lineage table",
        ) from error
    return float(get_accelerator(accelerator).peak_tflops_bf16)


def bundled_names() -> list[str]:
    """Names of the scenarios shipped with gpuyield."""
    return tomlfile.bundled_names(_FOLDER)


def load_scenario(name_or_path: str | Path) -> Scenario:
    """Load a bundled scenario by name, or a scenario TOML file by path."""
    doc = tomlfile.load(name_or_path, folder=_FOLDER, kind="scenario")
    return scenario_from_dict(doc.data, origin=doc.origin)


def scenario_from_dict(data: dict[str, Any], *, origin: str = "<dict>") -> Scenario:
    """Build a ``Scenario`` from parsed TOML (tables ``scenario``, ``fleet``, ``failures``, ...)."""
    _check_known_tables(data, origin)
    try:
        head = dict(_checked(Scenario, data.get("scenario", {}), "scenario", origin))
        if "start" in head:
            head["start"] = _parse_start(head["start"])
        fleet = FleetConfig(**_checked(FleetConfig, data["fleet"], "fleet", origin))
        failures = FailureConfig(
            **_checked(FailureConfig, data.get("failures", {}), "failures", origin)
        )
        lineage = tuple(
            LineageConfig.from_dict(_checked(LineageConfig, d, f"lineage[{i}]", origin))
            for i, d in enumerate(check_array(data.get("lineage", []), "lineage", origin))
        )
        research = ResearchConfig.from_dict(
            _checked(ResearchConfig, data.get("research", {}), "research", origin), origin=origin
        )
        maintenance = tuple(
            MaintenanceWindow(**_checked(MaintenanceWindow, m, f"maintenance[{i}]", origin))
            for i, m in enumerate(check_array(data.get("maintenance", []), "maintenance", origin))
        )
        return Scenario(
            **head,
            fleet=fleet,
            failures=failures,
            lineage=lineage,
            research=research,
            maintenance=maintenance,
        )
    except KeyError as error:
        raise ParseError(
            f"missing {error.args[0]!r}",
            path=origin,
            field=str(error.args[0]),
            hint="see docs/simulate.md for the scenario format",
        ) from error
    except TypeError as error:
        # dataclass __init__ names the unexpected or missing keyword; pass that on as a parse error.
        raise ParseError(str(error), path=origin, hint="see docs/simulate.md") from error


def _check_known_tables(tables: Iterable[str], origin: str) -> None:
    """A misspelt table would be ignored, and every setting in it silently not applied."""
    known = {"scenario", "fleet", "failures", "lineage", "research", "maintenance"}
    for key in tables:
        if key not in known:
            raise ParseError(
                f"unknown table [{key}]",
                path=origin,
                field=key,
                hint=f"known tables: {', '.join(sorted(known))}",
            )


def _parse_start(value: Any) -> datetime:
    if isinstance(value, datetime):
        parsed = value
    else:
        try:  # the CLI's grammar of times (gpuyield.parsing)
            parsed = parsing.read_instant(str(value), field="scenario.start")
        except FieldError as error:
            raise InputError(
                f"scenario.start {error.problem}", hint="write e.g. 2026-01-01T00:00:00"
            ) from None
    return parsed.replace(tzinfo=UTC) if parsed.tzinfo is None else parsed.astimezone(UTC)


def _checked(cls: type, data: Any, where: str, origin: str) -> dict[str, Any]:
    """The TOML table ``data``, once its keys and value types fit ``cls``."""
    check_table(cls, data, where, origin)
    return data


# The tables are re-exported: callers build a Scenario from this module alone.
__all__ = [
    "MAX_DAYS",
    "FailureConfig",
    "FleetConfig",
    "JobClass",
    "LineageConfig",
    "MaintenanceWindow",
    "Policy",
    "ResearchConfig",
    "Scenario",
    "SparesFor",
    "bundled_names",
    "load_scenario",
    "scenario_from_dict",
]
