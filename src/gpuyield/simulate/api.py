"""One call per CLI command: load, override, simulate, write, summarise."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpuyield.errors import InputError
from gpuyield.simulate.cluster import simulate
from gpuyield.simulate.output import write_outputs
from gpuyield.simulate.scenario import load_scenario


@dataclass(frozen=True, kw_only=True, slots=True)
class RunSummary:
    """What ``gpuyield simulate SCENARIO`` did."""

    scenario: str
    out_dir: Path
    truth: dict[str, Any]
    num_events: int
    research_jobs: int
    simulate_s: float
    write_s: float


def run_scenario(
    name_or_path: str | Path,
    out_dir: Path,
    *,
    seed: int | None = None,
    days: float | None = None,
    utilization: bool = False,
) -> RunSummary:
    """Simulate a bundled or user scenario and write its output directory.

    ``utilization`` also writes DCGM-style series (``utilization.json``) and adds their truth to
    ``truth.json`` (``utilization.idle_allocated_gpu_seconds``).
    """
    scenario = load_scenario(name_or_path)
    changes: dict[str, Any] = {}
    if seed is not None:
        if seed < 0:
            raise InputError("--seed must be >= 0", hint="pass a non-negative integer")
        changes["seed"] = seed
    if days is not None:
        if not days > 0:
            raise InputError("--days must be > 0", hint="pass e.g. --days 7")
        changes["days"] = days
    if changes:
        scenario = scenario.with_overrides(**changes)
    began = time.perf_counter()
    result = simulate(scenario)
    simulated = time.perf_counter()
    truth = write_outputs(result, out_dir)
    if utilization:
        truth = _with_utilization(out_dir, truth, seed=scenario.seed)
    return RunSummary(
        scenario=scenario.name,
        out_dir=out_dir,
        truth=truth,
        num_events=result.num_events,
        research_jobs=0 if result.jobs is None else int(result.jobs.job_id.size),
        simulate_s=simulated - began,
        write_s=time.perf_counter() - simulated,
    )


def _with_utilization(out_dir: Path, truth: dict[str, Any], *, seed: int) -> dict[str, Any]:
    """Write the utilization series and record their truth beside the rest."""
    import json
    from datetime import datetime

    from gpuyield.simulate.utilization import write_utilization

    end_s = int(datetime.fromisoformat(truth["window"]["end"]).timestamp())
    util = write_utilization(out_dir, window_end_s=end_s, seed=seed)
    truth = {
        **truth,
        "utilization": {
            "idle_allocated_gpu_seconds": util.idle_allocated_gpu_seconds,
            "samples": util.samples,
        },
    }
    (out_dir / "truth.json").write_text(json.dumps(truth, indent=2) + "\n", encoding="utf-8")
    return truth
