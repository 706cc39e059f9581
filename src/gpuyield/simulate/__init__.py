"""Simulator of AI training clusters: failures, lineage runs, research jobs, written as Slurm logs.

Library entry points (the CLI ``gpuyield simulate`` wraps them)::

    scenario = load_scenario("llama3-405b")          # or a path to a TOML file
    result = simulate(scenario)                       # seeded, in memory
    truth = write_outputs(result, Path("out"))        # sacct.psv, ..., truth.json; a typed Truth
"""

from __future__ import annotations

from gpuyield.simulate.api import RunSummary, run_scenario
from gpuyield.simulate.cluster import SimulationResult, simulate
from gpuyield.simulate.ettr import JobModel, ModelResult, run_model
from gpuyield.simulate.output import write_outputs
from gpuyield.simulate.scenario import Policy, Scenario, bundled_names, load_scenario
from gpuyield.simulate.sweep import SweepParam, SweepResult, SweepSpec, run_sweep
from gpuyield.simulate.sweep_files import write_sweep
from gpuyield.simulate.truth import Interruptions, Truth, compute_truth

__all__ = [
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
    "load_scenario",
    "run_model",
    "run_scenario",
    "run_sweep",
    "simulate",
    "write_outputs",
    "write_sweep",
]
