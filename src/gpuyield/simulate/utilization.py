"""DCGM-style utilization series for a simulated cluster, with the truth of its idle allocated time.

Written from the simulator's own ``sacct.psv`` (so the series match the jobs exactly): every GPU a
job held gets one ``DCGM_FI_DEV_GPU_UTIL`` sample a minute, labelled ``hpc_job`` as the DCGM
exporter's HPC job mapping does, in the JSON a Prometheus ``query_range`` returns: one answer per
``NODES_PER_DOCUMENT`` nodes, one answer a line (NDJSON), as a site saves a large cluster's
capture. DuckDB's reader parses one answer at a time, so a 100k-GPU capture is read within its
memory budget (a single 300 MB answer was not, and fell back to Python: 80 s, 6 GB). Jobs idle the
way clusters see them: some stall at start (data loading, a queue for a dataset), some leave one GPU
unused for their whole run. The truth counts those idle seconds in continuous time, so the
ledger's per-minute measurement is checked against it, not against itself.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

from gpuyield.hostlist import expand_hostlist

#: Share of jobs of four hours or more that sit idle from their start, and for how long: from two
#: hours (an interactive session nobody used, a job waiting on a dataset copy or a hung
#: rendezvous) up to this share of the run. A stall ends mid-sample, and that sample is partly
#: busy, so the ledger sees up to a sample less than the truth: about 0.3% of a two-hour stall.
STALL_JOB_SHARE = 0.3
STALL_MIN_S = 7200
STALL_MAX_SHARE = 0.5
#: Share of jobs that never use one of their GPUs.
UNUSED_GPU_JOB_SHARE = 0.1
#: Activity of a busy GPU (percent), as DCGM_FI_DEV_GPU_UTIL reports it.
BUSY_PERCENT = 90.0
#: Nodes per saved answer: a day of 125 nodes at one sample a minute is about 26 MB.
NODES_PER_DOCUMENT = 125


@dataclass(frozen=True, kw_only=True, slots=True)
class UtilizationTruth:
    """What the written series hold."""

    idle_allocated_gpu_seconds: float
    """GPU-seconds jobs held while the GPU did nothing (inside the window)."""
    samples: int
    """Samples written."""


@dataclass(frozen=True, kw_only=True, slots=True)
class _Job:
    job_id: str
    start_s: int
    end_s: int
    nodes: tuple[str, ...]
    gpus_per_node: int


def write_utilization(
    out_dir: Path, *, window_end_s: int, seed: int = 0, step_s: int = 60
) -> UtilizationTruth:
    """Write ``utilization.json`` beside ``sacct.psv`` and return its truth."""
    rng = np.random.default_rng(seed)
    jobs = sorted(_jobs(out_dir / "sacct.psv", window_end_s), key=lambda j: (j.start_s, j.job_id))
    free_at: dict[str, list[int]] = {}
    last_t: dict[tuple[str, int], int] = {}
    series: dict[str, list[dict[str, object]]] = {}
    idle_total = 0.0
    samples = 0
    for job in jobs:
        duration = job.end_s - job.start_s
        stalls = duration >= 2 * STALL_MIN_S and rng.random() < STALL_JOB_SHARE
        stall = int(rng.uniform(STALL_MIN_S, STALL_MAX_SHARE * duration)) if stalls else 0
        unused = rng.random() < UNUSED_GPU_JOB_SHARE
        for node in job.nodes:
            for k, gpu in enumerate(_slots(free_at, node, job)):
                never = unused and node == job.nodes[0] and k == 0
                idle_until = job.end_s if never else job.start_s + stall
                idle_total += idle_until - job.start_s
                # One exporter scrapes a GPU once a step: where a GPU changed hands within a
                # step, the scrape went to the job before, and the new job's first part-step
                # has no sample (unmeasured, as on a real cluster).
                after = last_t.get((node, gpu), 0)
                points = [p for p in _points(job, idle_until, step_s) if p[0] > after]
                if points:
                    last_t[(node, gpu)] = points[-1][0]
                samples += len(points)
                labels = {"__name__": "DCGM_FI_DEV_GPU_UTIL", "Hostname": node}
                labels |= {"gpu": str(gpu), "hpc_job": job.job_id}
                series.setdefault(node, []).append({"metric": labels, "values": points})
    _write_answers(out_dir / "utilization.json", series)
    return UtilizationTruth(idle_allocated_gpu_seconds=idle_total, samples=samples)


def _write_answers(path: Path, series: dict[str, list[dict[str, object]]]) -> None:
    """One ``query_range`` answer per ``NODES_PER_DOCUMENT`` nodes, one a line."""
    nodes = sorted(series)
    with path.open("w", encoding="utf-8") as out:
        for first in range(0, max(1, len(nodes)), NODES_PER_DOCUMENT):
            result = [s for node in nodes[first : first + NODES_PER_DOCUMENT] for s in series[node]]
            document = {"status": "success", "data": {"resultType": "matrix", "result": result}}
            out.write(json.dumps(document, separators=(",", ":")) + "\n")


def _points(job: _Job, idle_until_s: int, step_s: int) -> list[tuple[int, str]]:
    """One sample per step the job overlaps: busy share of the interval x the busy activity."""
    first = (job.start_s // step_s + 1) * step_s
    out: list[tuple[int, str]] = []
    for t in range(first, job.end_s + step_s, step_s):
        a, b = t - step_s, t
        busy = max(0, min(b, job.end_s) - max(a, idle_until_s, job.start_s))
        out.append((t, f"{BUSY_PERCENT * busy / step_s:.4g}"))
    return out


def _slots(free_at: dict[str, list[int]], node: str, job: _Job) -> list[int]:
    """GPU indices free on ``node`` at the job's start, longest free first: a GPU handed over
    within one sample interval would carry two jobs' samples at one time, which one exporter
    cannot scrape (the store keeps one sample per GPU and time)."""
    slots = free_at.setdefault(node, [])
    free = sorted((t, i) for i, t in enumerate(slots) if t <= job.start_s)
    chosen = [i for _, i in free][: job.gpus_per_node]
    while len(chosen) < job.gpus_per_node:
        slots.append(0)
        chosen.append(len(slots) - 1)
    for i in chosen:
        slots[i] = job.end_s
    return chosen


def _jobs(sacct: Path, window_end_s: int) -> list[_Job]:
    lines = sacct.read_text(encoding="utf-8").splitlines()
    header = lines[0].split("|")
    col = {name: header.index(name) for name in ("JobIDRaw", "Start", "End", "AllocTRES")}
    col |= {"NodeList": header.index("NodeList"), "NNodes": header.index("NNodes")}
    jobs = []
    for line in lines[1:]:
        f = line.split("|")
        if f[col["Start"]] in ("None", "Unknown") or "gres/gpu=" not in f[col["AllocTRES"]]:
            continue
        start = _epoch(f[col["Start"]])
        end = window_end_s if f[col["End"]] == "Unknown" else _epoch(f[col["End"]])
        end = min(end, window_end_s)
        gpus = int(f[col["AllocTRES"]].split("gres/gpu=")[1].split(",")[0])
        nodes = tuple(expand_hostlist(f[col["NodeList"]]))
        if end <= start or gpus <= 0:
            continue
        jobs.append(
            _Job(
                job_id=f[col["JobIDRaw"]],
                start_s=start,
                end_s=end,
                nodes=nodes,
                gpus_per_node=gpus // len(nodes),
            )
        )
    return jobs


def _epoch(text: str) -> int:
    return int(datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp())
