"""Sweeps: vary cluster size or checkpoint interval across policies and seeds, in parallel processes.

Each point is the failure-only model (``ettr.py``) of one job holding the whole cluster, so a sweep
from 1k to 1M GPUs takes seconds. Results go to ``sweep.csv``, ``sweep.json`` and, with matplotlib
(extra ``html``), ``sweep.png`` plus a self-contained ``sweep.html``.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

import numpy as np

from gpuyield.errors import FieldError
from gpuyield.simulate.ettr import (
    JobModel,
    daly_interval_s,
    draw,
    run_drawn,
    young_interval_s,
)
from gpuyield.simulate.ft_costs import FtCalibration
from gpuyield.simulate.scenario import Policy, SparesFor
from gpuyield.simulate.sweep_assumptions import SweepAssumptions

#: Where a sweep takes its failure model and restart costs unless told otherwise.
DEFAULT_SCENARIO = "llama3-405b"


def _scenario_base(name: str, *, gpus: int = 16384, days: float = 30.0) -> JobModel:
    from gpuyield.simulate.from_scenario import job_model
    from gpuyield.simulate.scenario import load_scenario

    scenario = load_scenario(name)
    nodes = max(gpus // scenario.fleet.gpus_per_node, 1)
    return job_model(scenario, num_nodes=nodes, duration_s=days * 86400.0)


class SweepParam(StrEnum):
    """What a sweep varies."""

    CLUSTER_GPUS = "cluster-gpus"
    INTERVAL_S = "interval-s"


@dataclass(frozen=True, kw_only=True, slots=True)
class SweepSpec:
    """A sweep: one parameter's values x policies x seeds, around a base job model."""

    param: SweepParam
    values: tuple[float, ...]
    policies: tuple[Policy, ...] = (Policy.RESTART, Policy.DROP, Policy.SPARES)
    seeds: int = 3
    #: The model every point starts from; the swept field replaces one of its values.
    base: JobModel = dataclasses.field(default_factory=lambda: _scenario_base(DEFAULT_SCENARIO))
    gpus_per_node: int = 8
    #: Measured recovery costs (``python -m bench ft``): restart/stall/rejoin at each point's size.
    costs: FtCalibration | None = None
    #: The scenario and settings behind ``base``, stated on every output (None: a library caller
    #: built ``base`` itself; the outputs then give the model's own figures only).
    assumptions: SweepAssumptions | None = None

    def __post_init__(self) -> None:
        if self.assumptions is not None:
            # What the sweep does, stated as it does it: an interval sweep's points use their own
            # interval, and the measured costs are the ones given here. Frozen: set once, here.
            stated = dataclasses.replace(
                self.assumptions,
                interval_swept=self.param is SweepParam.INTERVAL_S,
                ft_calibration=self.costs,
            )
            object.__setattr__(self, "assumptions", stated)
        if not self.values:
            raise FieldError("sweep.values", "must not be empty", example="1024,4096")
        if self.seeds < 1:
            raise FieldError("sweep.seeds", "must be >= 1", example="3")
        for value in self.values:
            if not value > 0:
                raise FieldError("sweep.values", f"must be > 0, got {value}", example="1024,4096")

    def model(self, policy: Policy, value: float) -> JobModel:
        """The job model of one sweep point."""
        if self.param is SweepParam.CLUSTER_GPUS:
            nodes = max(int(value) // self.gpus_per_node, 1)
            # Keep the spare share of the base model (1.5% by default) as the cluster grows.
            spares = math.ceil(nodes * self.base.spare_nodes / self.base.num_nodes)
            model = dataclasses.replace(
                self.base, num_nodes=nodes, spare_nodes=spares, policy=policy
            )
        else:
            model = dataclasses.replace(self.base, interval_s=float(value), policy=policy)
        if self.costs is None:
            return model
        costs = self.costs.costs_at(model.num_nodes * self.gpus_per_node)
        # Measured rejoin assumes a node to restart on at once (a spare); without one for drop,
        # the replica still waits for its node's repair, as with the assumed costs.
        wait = 0.0 if self._drop_has_spares() else self.base.rejoin_s
        return dataclasses.replace(
            model,
            restart_s=costs.restart_s,
            detection_s=costs.detection_s,
            rejoin_s=costs.rejoin_s + wait,
            replica_nodes=max(self.costs.gpus_per_group // self.gpus_per_node, 1),
        )

    def _drop_has_spares(self) -> bool:
        a = self.assumptions
        return a is None or (a.spare_nodes > 0 and a.spares_for is SparesFor.ALL)

    def costs_at(self, value: float) -> dict[str, float]:
        """The costs the point ``value`` used (they scale with its size), for the outputs."""
        m = self.model(Policy.RESTART, value)
        return {
            "job_nodes": m.num_nodes,
            "spare_nodes": m.spare_nodes,
            # At this point's size (the table's size law applied), per node.
            "node_failures_per_day": m.node_failures_per_day * m.size_factor,
            "interval_s": m.interval_s,
            "write_s": m.write_s,
            "restart_s": m.restart_s,
            "spare_restart_s": m.spare_restart_s,
            "replacement_s": m.replacement_s,
            "drop_stall_s": m.detection_s,
            "rejoin_s": m.rejoin_s,
            "replica_nodes": m.replica_nodes,
        }


@dataclass(frozen=True, kw_only=True, slots=True)
class SweepPoint:
    """Mean over seeds of one (policy, value)."""

    policy: Policy
    value: float
    ettr_mean: float
    ettr_std: float
    yield_mean: float
    interruptions_mean: float
    mttf_h: float
    #: ETTR of each seed, in seed order (seed s is the same draws for every policy).
    ettr_by_seed: tuple[float, ...] = ()


@dataclass(frozen=True, kw_only=True, slots=True)
class IntervalOptimum:
    """The best checkpoint interval of one policy in an interval sweep, beside Young's and Daly's."""

    best_s: float
    best_ettr: float
    young_s: float
    daly_s: float
    mtbf_s: float

    def to_dict(self) -> dict[str, float]:
        """The JSON shape (``sweep.json``'s ``optimum`` values)."""
        return {
            "best_s": self.best_s,
            "best_ettr": self.best_ettr,
            "young_s": self.young_s,
            "daly_s": self.daly_s,
            "mtbf_s": self.mtbf_s,
        }


@dataclass(frozen=True, kw_only=True, slots=True)
class SweepResult:
    """All points of a sweep, plus the best checkpoint interval per policy for interval sweeps."""

    spec: SweepSpec
    points: tuple[SweepPoint, ...]
    #: Interval sweeps: policy name -> its optimum (empty for size sweeps).
    optimum: dict[str, IntervalOptimum]

    def to_dict(self) -> dict[str, Any]:
        """The JSON shape: ``sweep.json`` and ``gpuyield simulate sweep --json``.

        ``assumptions`` (the scenario, its failure source, every cost and who may use the spares)
        and ``costs`` (what each value's points used) come first; ``optimum`` is there for
        interval sweeps only.
        """
        spec = self.spec
        data: dict[str, Any] = {
            "param": spec.param.value,
            "seeds": spec.seeds,
            "policies": [p.value for p in spec.policies],
        }
        if spec.assumptions is not None:
            data["assumptions"] = spec.assumptions.to_dict()
        elif spec.costs is not None:
            data["assumptions"] = {"ft_calibration": spec.costs.to_dict()}
        data["costs"] = {value_label(v): spec.costs_at(v) for v in spec.values}
        data["points"] = [
            {
                "policy": p.policy.value,
                "value": p.value,
                "ettr_mean": p.ettr_mean,
                "ettr_std": p.ettr_std,
                "yield_mean": p.yield_mean,
                "interruptions_mean": p.interruptions_mean,
                "mttf_h": p.mttf_h,
                # Seed s is the same failure draws for every policy (common random numbers).
                "ettr_by_seed": list(p.ettr_by_seed),
            }
            for p in self.points
        ]
        if self.optimum:
            data["optimum"] = {policy: o.to_dict() for policy, o in self.optimum.items()}
        return data


def value_label(value: float) -> str:
    """A sweep value as sweep.csv and sweep.json write it: whole numbers without a decimal point."""
    return str(int(value)) if float(value).is_integer() else f"{value:g}"


def _one(task: tuple[SweepSpec, float, int, int]) -> list[tuple[float, float, int, float]]:
    """Every policy at one (value, seed), on the same draws: common random numbers."""
    spec, value, seed, value_index = task
    rng = np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(value_index,)))
    draws = draw(spec.model(spec.policies[0], value), rng)
    out = []
    for policy in spec.policies:
        res = run_drawn(spec.model(policy, value), draws)
        out.append((res.ettr, res.yield_, res.interruptions, res.mttf_s))
    return out


def run_sweep(spec: SweepSpec, *, jobs: int = 1) -> SweepResult:
    """Run every point of ``spec`` (``jobs`` processes; results do not depend on ``jobs``).

    Seed ``s`` of a value gives every policy the same failures (common random numbers), so a
    difference between policies is the policies', not sampling noise.
    """
    if jobs < 1:
        raise FieldError("sweep.jobs", "must be >= 1", example="1")
    tasks = [(spec, v, seed, i) for i, v in enumerate(spec.values) for seed in range(spec.seeds)]
    if jobs == 1:
        outs = [_one(t) for t in tasks]
    else:
        with ProcessPoolExecutor(max_workers=jobs) as pool:
            outs = list(pool.map(_one, tasks, chunksize=max(len(tasks) // (4 * jobs), 1)))
    points = []
    for p_index, policy in enumerate(spec.policies):
        for v_index, value in enumerate(spec.values):
            chunk = [outs[v_index * spec.seeds + seed][p_index] for seed in range(spec.seeds)]
            points.append(_point(spec, policy, value, chunk))
    return SweepResult(spec=spec, points=tuple(points), optimum=_optimum(spec, points))


def _point(
    spec: SweepSpec, policy: Policy, value: float, chunk: list[tuple[float, float, int, float]]
) -> SweepPoint:
    ettr = np.array([c[0] for c in chunk])
    fails = np.array([c[2] for c in chunk], dtype=float)
    return SweepPoint(
        policy=policy,
        value=value,
        ettr_mean=float(ettr.mean()),
        ettr_std=float(ettr.std()),
        yield_mean=float(np.mean([c[1] for c in chunk])),
        interruptions_mean=float(fails.mean()),
        mttf_h=spec.base.duration_s / fails.mean() / 3600 if fails.mean() else math.inf,
        ettr_by_seed=tuple(float(x) for x in ettr),
    )


def _optimum(spec: SweepSpec, points: Sequence[SweepPoint]) -> dict[str, IntervalOptimum]:
    if spec.param is not SweepParam.INTERVAL_S:
        return {}
    mtbf = 1.0 / spec.base.failure_rate_per_s
    out = {}
    for policy in spec.policies:
        mine = [p for p in points if p.policy is policy]
        best = max(mine, key=lambda p: p.ettr_mean)
        out[policy.value] = IntervalOptimum(
            best_s=best.value,
            best_ettr=best.ettr_mean,
            young_s=young_interval_s(spec.base.write_s, mtbf),
            daly_s=daly_interval_s(spec.base.write_s, mtbf),
            mtbf_s=mtbf,
        )
    return out


_DEFAULT_VALUES = {
    SweepParam.CLUSTER_GPUS: (1024, 4096, 16384, 65536, 262144, 1048576),
    SweepParam.INTERVAL_S: (120, 300, 600, 900, 1200, 1800, 2700, 3600, 5400, 7200),
}


def default_values(param: SweepParam) -> tuple[float, ...]:
    """The values a sweep of ``param`` covers when none are given."""
    return tuple(float(v) for v in _DEFAULT_VALUES[param])


def base_model(
    *,
    days: float,
    gpus: int,
    interval_s: float | None = None,
    write_s: float | None = None,
    scenario: str = DEFAULT_SCENARIO,
    spares_for: SparesFor | None = None,
    costs: FtCalibration | None = None,
) -> SweepBase:
    """The job a sweep varies (the whole cluster for ``days``), with its failure model and restart
    costs from ``scenario`` (bundled name or TOML path), and the scenario's GPUs per node.

    ``interval_s`` and ``write_s`` replace the scenario run's checkpoint interval and write stall;
    ``spares_for`` which remedies may use its spare nodes (default: the scenario's, which is both
    unless it says otherwise). ``costs`` are measured recovery costs, stated in the assumptions.
    """
    from gpuyield.simulate.from_scenario import first_run, job_model
    from gpuyield.simulate.scenario import load_scenario
    from gpuyield.simulate.sweep_assumptions import sweep_assumptions

    if not days > 0:
        raise FieldError("sweep.days", "must be > 0", example="30")
    loaded = load_scenario(scenario)
    gpn = loaded.fleet.gpus_per_node
    use = spares_for if spares_for is not None else first_run(loaded).spares_for
    model = job_model(
        loaded,
        num_nodes=max(gpus // gpn, 1),
        duration_s=days * 86400.0,
        interval_s=None if interval_s is None else float(interval_s),
        write_s=None if write_s is None else float(write_s),
        spares_for=use,
    )
    assumptions = sweep_assumptions(
        loaded,
        days=days,
        interval_s=model.interval_s,
        write_s=model.write_s,
        spares_for=use,
        ft_calibration=costs,
    )
    return SweepBase(model=model, gpus_per_node=gpn, assumptions=assumptions)


@dataclass(frozen=True, kw_only=True, slots=True)
class SweepBase:
    """What ``base_model`` gives a sweep: the job it varies, the fleet's node size, and what it
    assumed."""

    model: JobModel
    gpus_per_node: int
    assumptions: SweepAssumptions
