"""One call per CLI command: load, override, simulate, write, summarise."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from gpuyield.errors import FieldError
from gpuyield.simulate.cluster import simulate
from gpuyield.simulate.output import write_outputs
from gpuyield.simulate.scenario import MAX_DAYS, load_scenario
from gpuyield.simulate.truth import Truth


@dataclass(frozen=True, kw_only=True, slots=True)
class RunSummary:
    """What ``gpuyield simulate SCENARIO`` did."""

    scenario: str
    out_dir: Path
    truth: Truth
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
    ``truth.json`` (``gpu_activity.idle_allocated_gpu_seconds``).
    """
    scenario = load_scenario(name_or_path)
    if seed is not None and seed < 0:
        raise FieldError("simulate.seed", "must be >= 0", example="7")
    if days is not None and not 0 < days <= MAX_DAYS:
        raise FieldError("simulate.days", f"must be > 0 and at most {MAX_DAYS:,}", example="7")
    if seed is not None or days is not None:
        scenario = scenario.with_overrides(
            seed=scenario.seed if seed is None else seed,
            days=scenario.days if days is None else days,
        )
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


def _with_utilization(out_dir: Path, truth: Truth, *, seed: int) -> Truth:
    """Write the utilization series and record their truth beside the rest."""
    import dataclasses
    import json

    from gpuyield.simulate.utilization import write_utilization

    util = write_utilization(out_dir, window_end_s=truth.window_end_s, seed=seed)
    truth = dataclasses.replace(truth, gpu_activity=util)
    text = json.dumps(truth.to_dict(), indent=2) + "\n"
    (out_dir / "truth.json").write_text(text, encoding="utf-8")
    return truth
