"""Simulated clusters whose parameters the tests set, ingested into stores the fit reads.

Small on purpose (CI runs them): 64 nodes for 10 days, failures at 20x Llama 3's rates so the
window holds enough failures to fit (docs/whatif.md sizes the window a real cluster needs).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from gpuyield.ingest.slurm import SlurmInputs, ingest_slurm
from gpuyield.simulate import (
    Scenario,
    SimulationResult,
    scenario_from_dict,
    simulate,
    write_outputs,
)

# The cluster every test starts from (cluster() copies it and applies the changes).
_BASE: dict[str, Any] = {
    "scenario": {
        "name": "whatif-test",
        "start": "2026-03-01T00:00:00",
        "days": 10.0,
        "seed": 0,
        "cluster": "wt",
    },
    "fleet": {"num_nodes": 64, "gpus_per_node": 8},
    "failures": {
        "rate_scale": 20.0,
        "repair_mean_s": 43200,
        "detection_s": 120,
        "software_detection_s": 120,
    },
    "lineage": [
        {
            "name": "pt",
            "release": "m1",
            "num_gpus": 128,
            "start_day": 1.0,
            "checkpoint_interval_s": 1200,
            "checkpoint_write_s": 20,
            "startup_s": 180,
            "requeue_wait_s": 240,
            "spare_nodes": 2,
            "planned_stops_per_day": 0.5,
            "telemetry": False,
        }
    ],
    "research": {
        "enabled": True,
        "load": 0.85,
        "diverged_share": 0.03,
        "classes": [
            {
                "num_gpus": 1,
                "gpu_time_share": 0.15,
                "median_duration_s": 3600,
                "time_limit_s": 14400,
            },
            {
                "num_gpus": 8,
                "gpu_time_share": 0.55,
                "median_duration_s": 14400,
                "duration_sigma": 1.1,
                "time_limit_s": 86400,
            },
            {
                "num_gpus": 32,
                "gpu_time_share": 0.3,
                "median_duration_s": 21600,
                "time_limit_s": 172800,
            },
        ],
    },
    "maintenance": [{"start_day": 3.0, "duration_h": 8.0, "first_node": 30, "num_nodes": 8}],
}


def cluster(**changes: Any) -> dict[str, Any]:
    """A cluster's scenario tables: a lineage run on 16 nodes, research in three size classes,
    one maintenance window; ``changes`` replace tables or keys (``failures={...}`` merges)."""
    data = copy.deepcopy(_BASE)
    for table, value in changes.items():
        if isinstance(value, dict) and isinstance(data.get(table), dict):
            data[table] = {**data[table], **value}
        else:
            data[table] = value
    return copy.deepcopy(data)


@dataclass(frozen=True, kw_only=True, slots=True)
class Simulated:
    """A simulated cluster, its files and the store they were ingested into."""

    data: dict[str, Any]
    scenario: Scenario
    result: SimulationResult
    out: Path
    db: Path


def simulated(data: dict[str, Any], seed: int, where: Path) -> Simulated:
    """Simulate ``data`` with ``seed``, write its files and ingest them into a new store."""
    data = copy.deepcopy(data)
    data["scenario"]["seed"] = seed
    scenario = scenario_from_dict(data, origin="<test>")
    result = simulate(scenario)
    out = where / f"files-{seed}"
    write_outputs(result, out)
    (out / "truth.json").unlink()  # the fit must not see the answer
    db = where / f"store-{seed}.duckdb"
    ingest_slurm(db, SlurmInputs.from_dir(out), since_s=scenario.start_s, until_s=scenario.end_s)
    return Simulated(data=data, scenario=scenario, result=result, out=out, db=db)


@pytest.fixture(scope="session")
def base_cluster(tmp_path_factory: pytest.TempPathFactory) -> Simulated:
    """The default test cluster, seed 11, ingested once for the whole session."""
    return simulated(cluster(), 11, tmp_path_factory.mktemp("whatif-base"))
