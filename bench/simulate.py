"""Simulator benchmark: a 100k-GPU cluster-year, the failure-only model, and a SimPy baseline.

Targets (issue 4): the cluster-year with its research workload in <= 60 s on one core (simulation
only, writing files is timed separately), the failure-only model of one 100k-GPU run-year in <= 5 s.
The SimPy model below is the straightforward version of the same failure process (one process for
the job, one for failures, one event per checkpoint), timed in the same run for the ratio.
"""

from __future__ import annotations

import random
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from gpuyield.simulate.cluster import simulate
from gpuyield.simulate.ettr import JobModel, run_model
from gpuyield.simulate.output import write_outputs
from gpuyield.simulate.scenario import Policy, load_scenario

_RUN_YEAR = dict(
    num_nodes=12_500,
    node_failures_per_day=3.79e-3,
    duration_s=365 * 86400.0,
    interval_s=1800.0,
    write_s=30.0,
    restart_s=600.0,
)


def simpy_restart(model: JobModel, seed: int) -> dict[str, float]:
    """The same restart-from-checkpoint process as ``ettr._restart``, written plainly in SimPy."""
    import simpy

    rnd = random.Random(seed)
    env = simpy.Environment()
    state = {"kept": 0.0, "failures": 0, "checkpoints": 0}

    def job(env: simpy.Environment) -> Any:
        offset = 0.0
        while True:
            try:
                if offset:
                    yield env.timeout(offset)
                while True:
                    yield env.timeout(model.interval_s)
                    state["kept"] += model.interval_s - model.write_s
                    state["checkpoints"] += 1
            except simpy.Interrupt:
                state["failures"] += 1
                offset = model.restart_s

    def failures(env: simpy.Environment, target: Any) -> Any:
        while True:
            yield env.timeout(rnd.expovariate(model.failure_rate_per_s))
            target.interrupt()

    proc = env.process(job(env))
    env.process(failures(env, proc))
    env.run(until=model.duration_s)
    return {
        "ettr": state["kept"] / model.duration_s,
        "events": state["failures"] + state["checkpoints"],
    }


def _best_of(repeats: int, fn: Any) -> tuple[float, Any]:
    best, out = float("inf"), None
    for _ in range(repeats):
        began = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - began)
    return best, out


def _failure_only(quick: bool) -> dict[str, Any]:
    figures: dict[str, Any] = {}
    for policy in Policy:
        model = JobModel(**_RUN_YEAR, policy=policy)
        seconds, res = _best_of(3, lambda m=model: run_model(m, np.random.default_rng(1)))
        figures[policy.value] = {
            "seconds": seconds,
            "events": res.num_events,
            "ettr": res.ettr,
            "events_per_s": res.num_events / seconds,
            "target_s": 5.0,
            "ok": seconds <= 5.0,
        }
    model = JobModel(**_RUN_YEAR)
    simpy_s, simpy_res = _best_of(1 if quick else 3, lambda: simpy_restart(model, 1))
    ours = figures["restart"]
    figures["simpy_restart"] = {
        "seconds": simpy_s,
        "events": simpy_res["events"],
        "ettr": simpy_res["ettr"],
        "events_per_s": simpy_res["events"] / simpy_s,
        "speedup_vs_simpy": simpy_s / ours["seconds"],
    }
    print(
        f"  failure-only run-year (12,500 nodes): restart {ours['seconds'] * 1e3:.2f} ms, "
        f"{ours['events_per_s']:,.0f} events/s, ETTR {ours['ettr']:.3f}; SimPy {simpy_s:.2f} s, "
        f"{figures['simpy_restart']['events_per_s']:,.0f} events/s, ETTR {simpy_res['ettr']:.3f}; "
        f"x{figures['simpy_restart']['speedup_vs_simpy']:,.0f}"
    )
    return figures


def _cluster_year(quick: bool) -> dict[str, Any]:
    scenario = load_scenario("cluster-100k-year")
    if quick:
        scenario = scenario.with_overrides(days=30.0)
    began = time.perf_counter()
    result = simulate(scenario)
    sim_s = time.perf_counter() - began
    jobs = 0 if result.jobs is None else int(result.jobs.job_id.size)
    rows = (0 if result.rows is None else len(result.rows)) + sum(
        len(r.rows) for r in result.lineage
    )
    figures: dict[str, Any] = {
        "days": scenario.days,
        "gpus": scenario.fleet.num_gpus,
        "simulate_s": sim_s,
        "research_jobs": jobs,
        "sacct_rows": rows,
        "events": result.num_events,
        "events_per_s": result.num_events / sim_s,
        "target_s": 60.0,
        "ok": sim_s <= 60.0 * scenario.days / 365,
    }
    with tempfile.TemporaryDirectory() as tmp:
        began = time.perf_counter()
        truth = write_outputs(result, Path(tmp))
        figures["write_s"] = time.perf_counter() - began
        figures["sacct_bytes"] = (Path(tmp) / "sacct.psv").stat().st_size
    figures["yield"] = truth.yield_
    figures["effective_training_time"] = truth.effective_training_time
    print(
        f"  cluster {scenario.fleet.num_gpus:,} GPUs x {scenario.days:g} days: simulated in "
        f"{sim_s:.1f} s ({jobs:,} research jobs, {figures['events_per_s']:,.0f} events/s), "
        f"written in {figures['write_s']:.1f} s; yield {truth.yield_:.3f}"
    )
    return figures


def run(quick: bool) -> dict[str, Any]:
    """Benchmark figures (also written to bench/out/simulate.json by the runner)."""
    return {"failure_only": _failure_only(quick), "cluster_year": _cluster_year(quick)}
