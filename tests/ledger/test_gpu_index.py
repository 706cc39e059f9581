"""Unlabelled samples on shared nodes find their job by GPU index (scontrol -d show job).

The store is the lab recording (tests/ingest/fixtures/jobs-detail: three jobs sharing n1, one job
on n2 and n3, an exclusive job on n4, a 2-second job on n2 and a job on n1 that ran between the
captures, whose GPU indices nobody saw) plus DCGM-style samples without a job label, one per GPU
index every 10 s, written here. The expectations are computed from the raw files alone.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpuyield.ingest.slurm import SlurmInputs, ingest_slurm
from gpuyield.ingest.utilization import ingest_utilization
from gpuyield.ledger import compute_ledger
from gpuyield.ledger.ledger import Ledger, backend_for
from gpuyield.report.breakdown import Breakdown, breakdown
from gpuyield.store import connect
from tests.ingest.held_oracle import FIXTURE, epoch, held, nodes_of

SINCE_S = epoch("2026-12-01T22:39:00")  # the lab's cluster registration
UNTIL_S = epoch("2026-12-01T22:40:43")  # the final sacct's -E
STEP_S = 10
NODES, GPUS = ("n1", "n2", "n3", "n4"), range(8)
TIMES = range(SINCE_S + STEP_S, UNTIL_S + STEP_S, STEP_S)


def _percent(node: str, gpu: int, t_s: int) -> float:
    """Idle GPUs inside and outside jobs: n1 GPU 1 never used, n1 GPUs 4-7 idle for 40 s, n2 GPU
    5 and n3 GPU 7 (never held after job 5) idle, n4 GPU 3 idle for 30 s."""
    if (node, gpu) in {("n1", 1), ("n2", 5), ("n3", 7)}:
        return 0.0
    if node == "n1" and gpu >= 4 and t_s <= SINCE_S + 40:
        return 0.0
    if (node, gpu) == ("n4", 3) and SINCE_S + 30 < t_s <= SINCE_S + 60:
        return 0.0
    return 55.0


def _samples(path: Path) -> Path:
    result = [
        {
            "metric": {"__name__": "DCGM_FI_DEV_GPU_UTIL", "Hostname": node, "gpu": str(gpu)},
            "values": [[t, f"{_percent(node, gpu, t):g}"] for t in TIMES],
        }
        for node in NODES
        for gpu in GPUS
    ]
    path.write_text(json.dumps({"status": "success", "data": {"resultType": "matrix",
                                                              "result": result}}))  # fmt: skip
    return path


RUNNING = FIXTURE / "scontrol-d-o-show-job.txt"


def _store(tmp_path: Path, *, detail: bool, capture: Path = RUNNING) -> Path:
    tmp_path.mkdir(parents=True, exist_ok=True)
    db = tmp_path / ("detail.duckdb" if detail else "plain.duckdb")
    inputs = SlurmInputs(
        sacct=FIXTURE / "sacct.psv",
        events=FIXTURE / "events.psv",
        nodes=FIXTURE / "scontrol-show-nodes-oneliner.txt",
        jobs_detail=capture if detail else None,
    )
    ingest_slurm(db, inputs, since_s=SINCE_S, until_s=UNTIL_S)
    ingest_utilization(db, prom_json=[_samples(tmp_path / "dcgm.json")], step_s=STEP_S)
    return db


def _ledger(db: Path) -> tuple[Ledger, Breakdown]:
    con = connect(db, read_only=True)
    try:
        backend = backend_for(con)
        ledger = compute_ledger(backend, keep_segments=True)
        return ledger, breakdown(ledger, "job", top=0, backend=backend)
    finally:
        con.close()


def _jobs() -> dict[str, tuple[int, int, list[str], int]]:
    """JobIDRaw -> (start, end, nodes, GPUs per node), from sacct.psv."""
    jobs = {}
    for line in (FIXTURE / "sacct.psv").read_text().splitlines()[1:]:
        f = line.split("|")
        nodes = nodes_of(f[13])
        gpus = int(f[12].split("gres/gpu=")[1].split(",")[0]) // len(nodes)
        jobs[f[1]] = (epoch(f[10]), epoch(f[11]), nodes, gpus)
    return jobs


def _expected(capture: Path = RUNNING) -> tuple[dict[str, int], dict[str, float]]:
    """Sample counts by the documented rule, and each job's GPU-seconds measured idle."""
    jobs = _jobs()
    known = {(job, node, gpu) for job, _, node, gpu, _ in held(capture)}
    counts = dict.fromkeys(("gpu", "node", "unallocated", "unattributed"), 0)
    idle: dict[str, float] = {}
    for node in NODES:
        for gpu in GPUS:
            for t_s in TIMES:
                start, end = max(t_s - STEP_S, SINCE_S), min(t_s, UNTIL_S)
                mid = (start + end) / 2
                there = {j: v for j, v in jobs.items() if node in v[2] and v[0] <= mid < v[1]}
                owners = [j for j in there if (j, node, gpu) in known]
                unknown = [j for j in there if not any(k[:2] == (j, node) for k in known)]
                if len(owners) == 1:
                    counts["gpu"] += 1
                    job = owners[0]
                    if _percent(node, gpu, t_s) < 1:
                        overlap = min(end, jobs[job][1]) - max(start, jobs[job][0])
                        idle[job] = idle.get(job, 0.0) + overlap
                elif len(owners) > 1:
                    counts["unattributed"] += 1  # two jobs claim the GPU: not guessed
                elif any(jobs[j][3] == len(GPUS) for j in unknown):
                    counts["node"] += 1  # not in this recording: every whole-node job is known
                elif unknown:
                    counts["unattributed"] += 1
                else:
                    counts["unallocated"] += 1
    return counts, idle


def test_allocated_idle_per_job_matches_the_raw_files(tmp_path: Path) -> None:
    ledger, by_job = _ledger(_store(tmp_path, detail=True))
    counts, idle = _expected()
    util = ledger.utilization
    assert util is not None
    got = {r.key: r.categories.get("idle", 0.0) for r in by_job.rows if r.key != "(not allocated)"}
    # Jobs 1, 3 and 6 (shared n1 and exclusive n4) had idle GPUs; job 4 and job 2 did not.
    assert {j for j, v in idle.items() if v > 0} == {"1", "3", "6"}
    for job, seconds in idle.items():
        assert got[job] == pytest.approx(seconds, abs=1e-6), job
    assert ledger.subcategories["idle.allocated"] == pytest.approx(sum(idle.values()))
    s = util.samples
    assert (s.by_gpu_index, s.by_whole_node, s.unallocated, s.unattributed) == (
        counts["gpu"], counts["node"], counts["unallocated"], counts["unattributed"],
    )  # fmt: skip
    assert s.by_job_label == 0 and s.total == len(NODES) * len(GPUS) * len(TIMES)
    assert s.total == s.by_gpu_index + s.by_whole_node + s.unallocated + s.unattributed
    # Conservation: every installed GPU-second in exactly one category, per job too.
    assert sum(ledger.categories.values()) == pytest.approx(ledger.installed_gpu_seconds)
    assert sum(r.total_gpu_seconds for r in by_job.rows) == pytest.approx(
        ledger.installed_gpu_seconds
    )


def test_free_gpus_of_a_shared_node_are_unallocated_unless_a_job_of_unknown_indices_ran(
    tmp_path: Path,
) -> None:
    """n2 GPUs 3-7 while only job 4 (indices known) ran there: unallocated. In the first 10 s job
    5 (2 s, ended before the capture: indices unknown) also held one of them: unattributed. So
    did every n1 GPU while job 7 (ran between the captures) held one."""
    ledger, _ = _ledger(_store(tmp_path, detail=True))
    counts, _ = _expected()
    assert counts["unattributed"] == 5 + 8  # n2 GPUs 3-7 in [22:39:00, 22:39:10); n1 at 22:40:35
    assert ledger.utilization is not None
    assert ledger.utilization.samples.unattributed == counts["unattributed"]
    assert ledger.utilization.samples.unallocated == counts["unallocated"] > 0


def test_without_the_capture_shared_nodes_stay_unattributed(tmp_path: Path) -> None:
    """The rule before GPU indices: only n4's exclusive job (whole node) is attributed; a sample
    on a node where any job held part of it is unattributed, on a node no job held unallocated."""
    with_detail, _ = _ledger(_store(tmp_path / "a", detail=True))
    plain, _ = _ledger(_store(tmp_path / "b", detail=False))
    assert with_detail.utilization is not None and plain.utilization is not None
    before, after = plain.utilization.samples, with_detail.utilization.samples
    jobs = _jobs()
    busy = {"whole": 0, "part": 0, "none": 0}
    for node in NODES:
        for t_s in TIMES:
            mid = (max(t_s - STEP_S, SINCE_S) + min(t_s, UNTIL_S)) / 2
            there = [v for v in jobs.values() if node in v[2] and v[0] <= mid < v[1]]
            kind = "none" if not there else "whole" if there[0][3] == len(GPUS) else "part"
            busy[kind] += len(GPUS)
    assert before.by_gpu_index == 0 and before.total == after.total
    assert (before.by_whole_node, before.unattributed, before.unallocated) == (
        busy["whole"], busy["part"], busy["none"],
    )  # fmt: skip
    assert after.unattributed < before.unattributed
    assert plain.installed_gpu_seconds == with_detail.installed_gpu_seconds
    moved_before = plain.subcategories.get("idle.allocated", 0.0)
    assert moved_before < with_detail.subcategories["idle.allocated"]


def test_a_gpu_two_jobs_claim_is_unattributed_not_counted_twice(tmp_path: Path) -> None:
    """Contradictory captures (job 2 said to hold n1 GPUs 0-1, job 1's): those samples are
    unattributed; job 2's real GPUs 2-3 then look free (unallocated)."""
    capture = tmp_path / "contradicting.txt"
    capture.write_text(RUNNING.read_text().replace("GRES=gpu:2(IDX:2-3)", "GRES=gpu:2(IDX:0-1)"))
    ledger, by_job = _ledger(_store(tmp_path, detail=True, capture=capture))
    counts, idle = _expected(capture)
    assert ledger.utilization is not None
    s = ledger.utilization.samples
    assert (s.by_gpu_index, s.unallocated, s.unattributed) == (
        counts["gpu"], counts["unallocated"], counts["unattributed"],
    )  # fmt: skip
    assert s.unattributed > _expected()[0]["unattributed"]
    got = {r.key: r.categories.get("idle", 0.0) for r in by_job.rows if r.key != "(not allocated)"}
    assert got.get("1", 0.0) == idle.get("1", 0.0) == 0.0  # its idle GPU 1 is contested now
    assert sum(ledger.categories.values()) == pytest.approx(ledger.installed_gpu_seconds)
