"""A small cluster with two families: one climbs 1 -> 8 -> 16 GPUs, one jumps to 16 and fails."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from gpuyield.ingest.slurm import SlurmInputs, ingest_slurm
from tests.ledger.timeline import HOUR_S, T0_S, Cluster, Job

WINDOW_END_S = 4 * HOUR_S
MANIFEST = """
[[families]]
name = "climb"
runs = "climb-*"

[[families]]
name = "jump"
runs = ["re:jump-(a|b)"]

[ladder]
rungs = [1, 8, 16]
within_days = 7
"""


@dataclass(frozen=True, kw_only=True, slots=True)
class LadderStore:
    """The store and what the tests count independently."""

    db: Path
    jump_failed_gpu_s: int
    climb_gpu_s: int


def ladder_cluster() -> Cluster:
    """Four 8-GPU nodes; times in seconds after T0."""
    return Cluster(
        num_nodes=4,
        jobs=[
            Job(1, 0, 600, gpus=1, nodes="n1", run="climb-1"),
            Job(2, 700, 1900, gpus=8, nodes="n1", run="climb-8"),
            # A first try at 16 GPUs that failed: the ladder was climbed, the failure is not
            # a skipped rung's.
            Job(3, 2000, 2300, gpus=16, nodes="n[1-2]", run="climb-16", state="FAILED"),
            Job(4, 2400, 4000, gpus=16, nodes="n[1-2]", run="climb-16"),
            Job(5, 100, 1300, gpus=16, nodes="n[3-4]", run="jump-a", state="FAILED"),
            # A job that names its family in its comment, without a run pattern match.
            Job(6, 1400, 1700, gpus=8, nodes="n3", run="solo,family=jump", state="CANCELLED"),
            Job(7, 1800, 1900, gpus=8, nodes="n4", run="unrelated"),
        ],
    )


@pytest.fixture
def ladder_store(tmp_path: Path) -> LadderStore:
    """The cluster ingested with the two-family manifest."""
    files = ladder_cluster().write(tmp_path / "in")
    manifest = tmp_path / "in" / "manifest.toml"
    manifest.write_text(MANIFEST)
    db = tmp_path / "db.duckdb"
    ingest_slurm(
        db,
        SlurmInputs(
            sacct=files["sacct"], events=files["events"], nodes=files["nodes"], manifest=manifest
        ),
        until_s=T0_S + WINDOW_END_S,
    )
    return LadderStore(
        db=db,
        jump_failed_gpu_s=16 * 1200,
        climb_gpu_s=1 * 600 + 8 * 1200 + 16 * 300 + 16 * 1600,
    )
