"""A gap in a GPU's samples inside a job's allocation stays unmeasured, never idle.

The exporter stops for a while (scrape failure, restart) while the GPU sat at 0% before and
after: the ledger must not fill the gap from its neighbours. Only the sampled minutes move to
``idle.allocated``; the gap keeps the job's category.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpuyield.ingest.slurm import SlurmInputs, ingest_slurm
from gpuyield.ingest.utilization import ingest_utilization
from gpuyield.ledger import Ledger, compute_ledger
from gpuyield.ledger.ledger import backend_for
from gpuyield.store import connect
from tests.ledger.timeline import GPUS_PER_NODE, HOUR_S, T0_S, Cluster, Job

STEP_S = 60
JOB_S = 60 * 60  # job 1 holds n1 (all 8 GPUs) for an hour
GAP = range(20, 35)  # minutes (sample index) missing on GPU 0: 15 minutes


def _samples(gpus_missing: dict[int, range]) -> dict[str, object]:
    """Every GPU of n1 at 0% each minute of the job, less each GPU's missing minutes."""
    result: list[dict[str, object]] = []
    for gpu in range(GPUS_PER_NODE):
        missing = gpus_missing.get(gpu, range(0))
        values = [
            [T0_S + (m + 1) * STEP_S, "0"] for m in range(JOB_S // STEP_S) if m not in missing
        ]
        labels = {"__name__": "DCGM_FI_DEV_GPU_UTIL", "Hostname": "n1", "gpu": str(gpu)}
        result.append({"metric": {**labels, "hpc_job": "1"}, "values": values})
    return {"status": "success", "data": {"resultType": "matrix", "result": result}}


def _ledger(tmp_path: Path, gpus_missing: dict[int, range], since_s: int, until_s: int) -> Ledger:
    cluster = Cluster(num_nodes=1, jobs=[Job(1, 0, JOB_S, state="COMPLETED")])
    paths = cluster.write(tmp_path / "slurm")
    db = tmp_path / "db.duckdb"
    ingest_slurm(
        db,
        SlurmInputs(sacct=paths["sacct"], events=paths["events"], nodes=paths["nodes"]),
        until_s=T0_S + 2 * HOUR_S,
    )
    prom = tmp_path / "query_range.json"
    prom.write_text(json.dumps(_samples(gpus_missing)))
    ingest_utilization(db, prom_json=[prom], step_s=STEP_S)
    con = connect(db, read_only=True)
    try:
        return compute_ledger(backend_for(con), since_s=since_s, until_s=until_s)
    finally:
        con.close()


def test_a_gap_inside_the_allocation_is_not_idle(tmp_path: Path) -> None:
    # The window spans the whole job and the gap.
    ledger = _ledger(tmp_path, {0: GAP}, T0_S, T0_S + 2 * HOUR_S)
    sampled_s = (GPUS_PER_NODE * JOB_S) - len(GAP) * STEP_S
    assert ledger.subcategories["idle.allocated"] == pytest.approx(sampled_s)
    # The gap's GPU-seconds stay the job's (completed: experiment), measured by nothing.
    assert ledger.categories["experiment"] == pytest.approx(len(GAP) * STEP_S)
    util = ledger.utilization
    assert util is not None
    assert util.samples.total == GPUS_PER_NODE * JOB_S // STEP_S - len(GAP)
    assert sum(ledger.categories.values()) == pytest.approx(ledger.installed_gpu_seconds)


def test_a_window_inside_the_gap_measures_nothing_of_that_gpu(tmp_path: Path) -> None:
    # A window that lies wholly inside GPU 0's gap: the other seven GPUs are idle, GPU 0 is not.
    since_s, until_s = T0_S + 22 * STEP_S, T0_S + 32 * STEP_S
    ledger = _ledger(tmp_path, {0: GAP}, since_s, until_s)
    window_s = until_s - since_s
    assert ledger.subcategories["idle.allocated"] == pytest.approx(7 * window_s)
    assert ledger.categories["experiment"] == pytest.approx(window_s)
    assert sum(ledger.categories.values()) == pytest.approx(ledger.installed_gpu_seconds)


def test_without_the_gap_the_whole_job_is_idle(tmp_path: Path) -> None:
    # The control: the same samples with nothing missing move the whole job to idle.
    ledger = _ledger(tmp_path, {}, T0_S, T0_S + 2 * HOUR_S)
    assert ledger.subcategories["idle.allocated"] == pytest.approx(GPUS_PER_NODE * JOB_S)
    assert ledger.categories["experiment"] == pytest.approx(0.0)
