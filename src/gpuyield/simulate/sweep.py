"""Sweeps: vary cluster size or checkpoint interval across policies and seeds, in parallel processes.

Each point is the failure-only model (``ettr.py``) of one job holding the whole cluster, so a sweep
from 1k to 1M GPUs takes seconds. Results go to ``sweep.csv``, ``sweep.json`` and, with matplotlib
(extra ``html``), ``sweep.png`` plus a self-contained ``sweep.html``.
"""

from __future__ import annotations

import csv
import dataclasses
import json
import math
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any

import numpy as np

from gpuyield.errors import InputError
from gpuyield.simulate.ettr import (
    JobModel,
    daly_interval_s,
    run_model,
    young_interval_s,
)
from gpuyield.simulate.ft_costs import FtCalibration, load_ft_calibration
from gpuyield.simulate.scenario import Policy


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
    base: JobModel = dataclasses.field(
        default_factory=lambda: JobModel(
            num_nodes=2048,
            node_failures_per_day=3.79e-3,
            duration_s=30 * 86400.0,
            interval_s=1800.0,
            write_s=30.0,
            spare_nodes=32,
        )
    )
    gpus_per_node: int = 8
    #: Measured recovery costs (``python -m bench ft``): restart/stall/rejoin at each point's size.
    costs: FtCalibration | None = None

    def __post_init__(self) -> None:
        if not self.values:
            raise InputError("sweep values must not be empty", hint="pass --values 1024,4096")
        if self.seeds < 1:
            raise InputError("sweep seeds must be >= 1", hint="pass --seeds 3")
        for value in self.values:
            if not value > 0:
                raise InputError(f"sweep value {value} must be > 0", hint="use positive values")

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
        return dataclasses.replace(
            model,
            restart_s=costs.restart_s,
            detection_s=costs.detection_s,
            rejoin_s=costs.rejoin_s,
            replica_nodes=max(self.costs.gpus_per_group // self.gpus_per_node, 1),
        )


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


@dataclass(frozen=True, kw_only=True, slots=True)
class SweepResult:
    """All points of a sweep, plus the best checkpoint interval per policy for interval sweeps."""

    spec: SweepSpec
    points: tuple[SweepPoint, ...]
    #: Interval sweeps: policy -> {"best_s", "young_s", "daly_s"}.
    optimum: dict[str, dict[str, float]]


def _one(task: tuple[SweepSpec, Policy, float, int, int]) -> tuple[float, float, int, float]:
    spec, policy, value, seed, index = task
    model = spec.model(policy, value)
    rng = np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(index,)))
    res = run_model(model, rng)
    return res.ettr, res.yield_, res.interruptions, res.mttf_s


def run_sweep(spec: SweepSpec, *, jobs: int = 1) -> SweepResult:
    """Run every point of ``spec`` (``jobs`` processes; results do not depend on ``jobs``)."""
    if jobs < 1:
        raise InputError("--jobs must be >= 1", hint="pass --jobs 1 or more")
    grid = [(p, v) for p in spec.policies for v in spec.values]
    tasks = [(spec, p, v, seed, i) for i, (p, v) in enumerate(grid) for seed in range(spec.seeds)]
    if jobs == 1:
        outs = [_one(t) for t in tasks]
    else:
        with ProcessPoolExecutor(max_workers=jobs) as pool:
            outs = list(pool.map(_one, tasks, chunksize=max(len(tasks) // (4 * jobs), 1)))
    points = []
    for g, (policy, value) in enumerate(grid):
        chunk = outs[g * spec.seeds : (g + 1) * spec.seeds]
        ettr = np.array([c[0] for c in chunk])
        fails = np.array([c[2] for c in chunk], dtype=float)
        points.append(
            SweepPoint(
                policy=policy,
                value=value,
                ettr_mean=float(ettr.mean()),
                ettr_std=float(ettr.std()),
                yield_mean=float(np.mean([c[1] for c in chunk])),
                interruptions_mean=float(fails.mean()),
                mttf_h=spec.base.duration_s / fails.mean() / 3600 if fails.mean() else math.inf,
            )
        )
    return SweepResult(spec=spec, points=tuple(points), optimum=_optimum(spec, points))


def _optimum(spec: SweepSpec, points: Sequence[SweepPoint]) -> dict[str, dict[str, float]]:
    if spec.param is not SweepParam.INTERVAL_S:
        return {}
    mtbf = 1.0 / spec.base.failure_rate_per_s
    out = {}
    for policy in spec.policies:
        mine = [p for p in points if p.policy is policy]
        best = max(mine, key=lambda p: p.ettr_mean)
        out[policy.value] = {
            "best_s": best.value,
            "best_ettr": best.ettr_mean,
            "young_s": young_interval_s(spec.base.write_s, mtbf),
            "daly_s": daly_interval_s(spec.base.write_s, mtbf),
            "mtbf_s": mtbf,
        }
    return out


def write_sweep(result: SweepResult, out_dir: Path, *, plots: bool = True) -> list[Path]:
    """Write ``sweep.csv``, ``sweep.json`` and (with matplotlib) ``sweep.png`` / ``sweep.html``."""
    out_dir.mkdir(parents=True, exist_ok=True)
    written = [out_dir / "sweep.csv", out_dir / "sweep.json"]
    with written[0].open("w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh, lineterminator="\n")
        writer.writerow(
            [
                "policy",
                result.spec.param.value,
                "ettr_mean",
                "ettr_std",
                "yield_mean",
                "interruptions_mean",
                "mttf_h",
            ]
        )
        for p in result.points:
            writer.writerow(
                [
                    p.policy.value,
                    _fmt(p.value),
                    f"{p.ettr_mean:.6f}",
                    f"{p.ettr_std:.6f}",
                    f"{p.yield_mean:.6f}",
                    f"{p.interruptions_mean:.3f}",
                    f"{p.mttf_h:.4f}",
                ]
            )
    written[1].write_text(json.dumps(sweep_summary(result), indent=2) + "\n", encoding="utf-8")
    if plots:
        from gpuyield.simulate.plots import write_plots

        written += write_plots(result, out_dir)
    return written


def sweep_summary(result: SweepResult) -> dict[str, Any]:
    """JSON-ready view of a sweep."""
    costs = result.spec.costs
    return {
        "param": result.spec.param.value,
        "seeds": result.spec.seeds,
        "recovery_costs": None
        if costs is None
        else {
            "calibration": costs.path,
            "by_value": {
                _fmt(v): dataclasses.asdict(
                    costs.costs_at(
                        result.spec.model(Policy.RESTART, v).num_nodes * result.spec.gpus_per_node
                    )
                )
                for v in result.spec.values
            },
        },
        "points": [
            {
                "policy": p.policy.value,
                "value": p.value,
                "ettr_mean": p.ettr_mean,
                "ettr_std": p.ettr_std,
                "yield_mean": p.yield_mean,
                "interruptions_mean": p.interruptions_mean,
                "mttf_h": p.mttf_h,
            }
            for p in result.points
        ],
        "optimum": result.optimum,
    }


def _fmt(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:g}"


_DEFAULT_VALUES = {
    SweepParam.CLUSTER_GPUS: (1024, 4096, 16384, 65536, 262144, 1048576),
    SweepParam.INTERVAL_S: (120, 300, 600, 900, 1200, 1800, 2700, 3600, 5400, 7200),
}


def sweep_from_options(
    *,
    out: Path,
    param: str,
    values: str | None,
    policies: str,
    seeds: int,
    days: float,
    gpus: int,
    interval_s: int,
    write_s: int,
    jobs: int,
    plots: bool,
    ft_calibration: str | None = None,
) -> SweepResult:
    """Parse CLI-style options, run the sweep and write its files."""
    try:
        which = SweepParam(param)
    except ValueError as error:
        raise InputError(
            f"unknown --param {param!r}", hint="use cluster-gpus or interval-s"
        ) from error
    try:
        chosen = tuple(Policy(p.strip()) for p in policies.split(",") if p.strip())
    except ValueError as error:
        raise InputError(
            f"unknown policy in {policies!r}", hint="use restart, drop, spares"
        ) from error
    try:
        parsed = tuple(float(v) for v in values.split(",")) if values else _DEFAULT_VALUES[which]
    except ValueError as error:
        raise InputError(
            f"--values {values!r} is not a list of numbers", hint="write e.g. 1024,4096,16384"
        ) from error
    if not days > 0:
        raise InputError("--days must be > 0", hint="pass e.g. --days 30")
    base = JobModel(
        num_nodes=max(gpus // 8, 1),
        node_failures_per_day=3.79e-3,
        duration_s=days * 86400.0,
        interval_s=float(interval_s),
        write_s=float(write_s),
        spare_nodes=math.ceil(max(gpus // 8, 1) / 64),
    )
    costs = None
    if ft_calibration is not None:
        costs = load_ft_calibration(None if ft_calibration == "measured" else ft_calibration)
    spec = SweepSpec(
        param=which,
        values=parsed,
        policies=chosen or tuple(Policy),
        seeds=seeds,
        base=base,
        costs=costs,
    )
    result = run_sweep(spec, jobs=jobs)
    write_sweep(result, out, plots=plots)
    return result
