"""Simulator of AI training clusters: failures, lineage runs, research jobs, written as Slurm logs.

Library entry points (the CLI ``gpuyield simulate`` wraps them)::

    scenario = load_scenario("llama3-405b")          # or a path to a TOML file
    result = simulate(scenario)                       # seeded, in memory
    truth = write_outputs(result, Path("out"))        # sacct.psv, ..., truth.json; a typed Truth
"""

from __future__ import annotations

from gpuyield.simulate.api import RunSummary, run_scenario
from gpuyield.simulate.calibration import LLAMA3_CAUSES as FAILURE_CAUSES
from gpuyield.simulate.calibration import Cause
from gpuyield.simulate.cluster import SimulationResult, simulate
from gpuyield.simulate.ettr import JobModel, ModelResult, run_model
from gpuyield.simulate.output import write_outputs
from gpuyield.simulate.research_layout import expected_research_jobs
from gpuyield.simulate.scenario import (
    Policy,
    Scenario,
    bundled_names,
    load_scenario,
    scenario_from_dict,
)
from gpuyield.simulate.sweep import SweepParam, SweepResult, SweepSpec, run_sweep
from gpuyield.simulate.sweep_files import write_sweep
from gpuyield.simulate.truth import Interruptions, Truth, compute_truth

__all__ = [
    "FAILURE_CAUSES",
    "Cause",
    "Interruptions",
    "JobModel",
    "ModelResult",
    "Policy",
    "RunSummary",
    "Scenario",
    "SimulationResult",
    "SweepParam",
    "SweepResult",
    "SweepSpec",
    "Truth",
    "bundled_names",
    "compute_truth",
    "expected_research_jobs",
    "load_scenario",
    "run_model",
    "run_scenario",
    "run_sweep",
    "scenario_from_dict",
    "simulate",
    "write_outputs",
    "write_sweep",
]
