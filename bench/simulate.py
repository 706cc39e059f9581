"""Simulator benchmark: a 100k-GPU cluster-year simulated and written; the failure-only model.

Targets:

* issue 4: the cluster-year with its research workload simulated in <= 60 s on one core; the
  failure-only model of one 100k-GPU run-year in <= 5 s. The SimPy model below is the
  straightforward version of the same failure process (one process for the job, one for
  failures, one event per checkpoint), timed in the same run for the ratio.
* issue 31: writing the cluster-year's files (``sacct.psv``, ``events.psv``, ``nodes.txt``,
  ``manifest.toml``, telemetry, ``truth.json``) takes no longer than simulating it.

The cluster-year runs in a child process (``bench.simulate_phases``) that times each phase and
reads its own peak RSS per phase, so the simulation's arrays and the writer's batches are told
apart. Beside the writer's throughput, the same run copies the written ``sacct.psv``: the disk's
floor. ``--utilization-days D`` adds a run of D days written with ``--utilization`` (the DCGM
series, ``simulate/utilization.py``), its own phase.

``--baseline-src DIR`` runs the same child with another checkout's ``src/`` first on
``PYTHONPATH`` (``git worktree add /tmp/base main``: the code before a change), alternating with
the current code for ``--rounds`` rounds, so the machine's load falls on both alike.

Run: ``python -m bench simulate [--quick]`` or ``python -m bench.simulate --help``.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from bench.ledger import machine, measure
from bench.runner import start_recording, write_figures
from gpuyield.simulate.ettr import JobModel, run_model
from gpuyield.simulate.scenario import Policy

QUICK_DAYS = 30.0
FULL_DAYS = 365.0
#: Utilization series of a cluster-day at 100k GPUs are about a GB; the default is a slice of one.
QUICK_UTILIZATION_DAYS = 0.05
FULL_UTILIZATION_DAYS = 0.25
#: Issue 4: the cluster-year simulated in a minute (scaled to shorter windows).
TARGET_SIMULATE_S_PER_YEAR = 60.0
#: Issue 31: writing takes no longer than simulating.
TARGET_WRITE_OVER_SIMULATE = 1.0
_REPO = Path(__file__).resolve().parent.parent

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


def child_argv(days: float, *, utilization: bool, src: Path | None) -> list[str]:
    """The command of one cluster run: the current code, or ``src``'s first on the path (through
    ``env``, which execs Python in place: the measured process is Python's)."""
    paths = [str(_REPO), *([os.environ["PYTHONPATH"]] if os.environ.get("PYTHONPATH") else [])]
    if src is not None:
        paths.insert(0, str(src.resolve()))
    argv = ["env", f"PYTHONPATH={os.pathsep.join(paths)}", sys.executable, "-m"]
    argv += ["bench.simulate_phases", "--days", str(days)]
    return argv + (["--utilization"] if utilization else [])


def cluster_run(days: float, *, utilization: bool, src: Path | None = None) -> dict[str, Any]:
    """One child run: its phases' figures plus the whole child's wall time and peak RSS."""
    run = measure(child_argv(days, utilization=utilization, src=src))
    if run.returncode or run.killed:
        return {"error": run.figures()}
    figures: dict[str, Any] = json.loads(run.stdout.strip().splitlines()[-1])
    figures["child"] = run.figures()
    figures["write_over_simulate"] = figures["write_s"] / figures["simulate_s"]
    figures["write_over_simulate_cpu"] = figures["write_cpu_s"] / figures["simulate_cpu_s"]
    return figures


def _compare(
    days: float, *, utilization: bool, baseline: Path | None, rounds: int
) -> dict[str, Any]:
    """Rounds of the current code (and the baseline, alternating); medians of each figure."""
    runs: dict[str, list[dict[str, Any]]] = {"current": []}
    if baseline is not None:
        runs["baseline"] = []
    for _ in range(rounds):
        runs["current"].append(cluster_run(days, utilization=utilization))
        if baseline is not None:
            runs["baseline"].append(cluster_run(days, utilization=utilization, src=baseline))
    out: dict[str, Any] = {"days": days, "utilization": utilization, "rounds": rounds}
    for name, results in runs.items():
        out[name] = _medians(results)
        out[f"{name}_runs"] = results
    return out


def _medians(results: list[dict[str, Any]]) -> dict[str, Any]:
    """Median of every number across runs (the first run's value for everything else)."""
    good = [r for r in results if "error" not in r]
    if not good:
        return {"error": results[0]["error"]}
    out: dict[str, Any] = {}
    for key, value in good[0].items():
        if isinstance(value, int | float) and not isinstance(value, bool):
            out[key] = statistics.median(r[key] for r in good)
        else:
            out[key] = value
    return out


def _print_cluster(label: str, figures: dict[str, Any]) -> None:
    if "error" in figures:
        print(f"  {label}: failed: {figures['error']}")
        return
    util = ""
    if "utilization_s" in figures:
        util = (
            f"; utilization written in {_took(figures, 'utilization')}, peak "
            f"{_mb(figures, 'utilization')} ({figures['utilization_mb']:,.0f} MB)"
        )
    print(
        f"  {label}: {figures['gpus']:,} GPUs x {figures['days']:g} days: simulated in "
        f"{_took(figures, 'simulate')}, peak {_mb(figures, 'simulate')}; written in "
        f"{_took(figures, 'write')}, peak {_mb(figures, 'write')} "
        f"({figures['written_mb']:,.0f} MB at {figures['write_mb_per_s']:,.0f} MB/s; a plain copy "
        f"{figures['copy_mb_per_s']:,.0f} MB/s){util}; write/simulate "
        f"{figures['write_over_simulate']:.2f} ({figures['write_over_simulate_cpu']:.2f} in CPU)"
    )


def _took(figures: dict[str, Any], phase: str) -> str:
    """A phase's wall time and CPU time."""
    return f"{figures[f'{phase}_s']:.1f} s ({figures[f'{phase}_cpu_s']:.1f} s of CPU)"


def _mb(figures: dict[str, Any], phase: str) -> str:
    """A phase's peak RSS and the RSS it started from."""
    peak, start = figures[f"{phase}_peak_rss_mb"], figures[f"{phase}_start_rss_mb"]
    return f"{peak:,.0f} MB from {start:,.0f}"


def _cluster(
    days: float, *, utilization: bool, baseline: Path | None, rounds: int
) -> dict[str, Any]:
    figures = _compare(days, utilization=utilization, baseline=baseline, rounds=rounds)
    _print_cluster("current", figures["current"])
    if baseline is not None:
        _print_cluster("baseline", figures["baseline"])
        cur, base = figures["current"], figures["baseline"]
        if "error" not in cur and "error" not in base:
            figures["write_speedup"] = base["write_s"] / cur["write_s"]
            figures["write_peak_ratio"] = cur["write_peak_rss_mb"] / base["write_peak_rss_mb"]
            print(
                f"  writing {figures['write_speedup']:.1f}x faster than the baseline, at "
                f"{figures['write_peak_ratio']:.2f}x its peak RSS"
            )
    cur = figures["current"]
    if "error" not in cur:
        figures["targets"] = {
            "simulate_s": TARGET_SIMULATE_S_PER_YEAR * days / 365,
            "write_over_simulate": TARGET_WRITE_OVER_SIMULATE,
        }
        figures["ok"] = (
            cur["simulate_s"] <= figures["targets"]["simulate_s"]
            and cur["write_over_simulate"] <= TARGET_WRITE_OVER_SIMULATE
        )
    return figures


def run(
    quick: bool,
    *,
    days: float | None = None,
    utilization_days: float | None = None,
    baseline: Path | None = None,
    rounds: int = 1,
) -> dict[str, Any]:
    """Benchmark figures (also written to bench/out/simulate.json by the runner)."""
    figures: dict[str, Any] = {"machine": machine(), "failure_only": _failure_only(quick)}
    year_days = days or (QUICK_DAYS if quick else FULL_DAYS)
    figures["cluster_year"] = _cluster(
        year_days, utilization=False, baseline=baseline, rounds=rounds
    )
    util_days = (
        (QUICK_UTILIZATION_DAYS if quick else FULL_UTILIZATION_DAYS)
        if utilization_days is None
        else utilization_days
    )
    if util_days > 0:
        figures["cluster_utilization"] = _cluster(
            util_days, utilization=True, baseline=baseline, rounds=rounds
        )
    return figures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.simulate",
        description=__doc__.split("\n")[0],
        epilog="Figures go to bench/out/simulate.json.",
    )
    parser.add_argument("--quick", action="store_true", help=f"{QUICK_DAYS:g} days, not a year")
    parser.add_argument("--days", type=float, help="days of the cluster run (default: a year)")
    parser.add_argument(
        "--utilization-days",
        type=float,
        help=f"days of the run written with --utilization (default {FULL_UTILIZATION_DAYS:g}, "
        f"quick {QUICK_UTILIZATION_DAYS:g}; 0: skip)",
    )
    parser.add_argument(
        "--baseline-src",
        type=Path,
        help="another checkout's src/ to run alternately with the current code (before/after)",
    )
    parser.add_argument("--rounds", type=int, default=1, help="runs of each (medians reported)")
    args = parser.parse_args(argv)
    started = start_recording(
        " ".join(["python -m bench.simulate", *(sys.argv[1:] if argv is None else argv)])
    )
    figures = run(
        args.quick,
        days=args.days,
        utilization_days=args.utilization_days,
        baseline=args.baseline_src,
        rounds=args.rounds,
    )
    write_figures("simulate", figures, started)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
