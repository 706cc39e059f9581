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


@dataclass(frozen=True, kw_only=True, slots=True)
class _Use:
    """The GPUs one job held on one node, and until when each sat idle."""

    job: _Job
    gpus: list[int]
    idle_until_s: list[int]


def write_utilization(
    out_dir: Path, *, window_end_s: int, seed: int = 0, step_s: int = 60
) -> UtilizationTruth:
    """Write ``utilization.json`` beside ``sacct.psv`` and return its truth.

    Two passes: the jobs in start order draw their stalls and take their GPUs (cheap, one entry
    per job and node); then each answer's nodes are written, series by series, from text made
    once per grid time, so memory holds one answer's text and the time is the bytes written."""
    rng = np.random.default_rng(seed)
    jobs = sorted(_jobs(out_dir / "sacct.psv", window_end_s), key=lambda j: (j.start_s, j.job_id))
    free_at: dict[str, list[int]] = {}
    uses: dict[str, list[_Use]] = {}
    idle_total = 0
    for job in jobs:
        duration = job.end_s - job.start_s
        stalls = duration >= 2 * STALL_MIN_S and rng.random() < STALL_JOB_SHARE
        stall = int(rng.uniform(STALL_MIN_S, STALL_MAX_SHARE * duration)) if stalls else 0
        unused = rng.random() < UNUSED_GPU_JOB_SHARE
        for node in job.nodes:
            gpus = _slots(free_at, node, job)
            never = unused and node == job.nodes[0]
            idle = [
                job.end_s if never and k == 0 else job.start_s + stall for k in range(len(gpus))
            ]
            idle_total += sum(u - job.start_s for u in idle)
            uses.setdefault(node, []).append(_Use(job=job, gpus=gpus, idle_until_s=idle))
    grid = _Grid(step_s, min((j.start_s for j in jobs), default=0))
    samples = _write_answers(out_dir / "utilization.json", uses, grid)
    return UtilizationTruth(idle_allocated_gpu_seconds=float(idle_total), samples=samples)


def _write_answers(path: Path, uses: dict[str, list[_Use]], grid: _Grid) -> int:
    """One ``query_range`` answer per ``NODES_PER_DOCUMENT`` nodes, one a line; the samples."""
    nodes = sorted(uses)
    samples = 0
    head = '{"status":"success","data":{"resultType":"matrix","result":['
    with path.open("w", encoding="utf-8") as out:
        for first in range(0, max(1, len(nodes)), NODES_PER_DOCUMENT):
            parts: list[str] = []
            for node in nodes[first : first + NODES_PER_DOCUMENT]:
                # One exporter scrapes a GPU once a step: where a GPU changed hands within a
                # step, the scrape went to the job before, and the new job's first part-step
                # has no sample (unmeasured, as on a real cluster).
                last_t: dict[int, int] = {}
                for use in uses[node]:
                    for gpu, idle_until in zip(use.gpus, use.idle_until_s, strict=True):
                        text, count, last = grid.values(use.job, idle_until, last_t.get(gpu, 0))
                        if count:
                            last_t[gpu] = last
                        samples += count
                        labels = {"__name__": "DCGM_FI_DEV_GPU_UTIL", "Hostname": node}
                        labels |= {"gpu": str(gpu), "hpc_job": use.job.job_id}
                        metric = json.dumps(labels, separators=(",", ":"))
                        parts.append(f'{{"metric":{metric},"values":[{text}]}}')
            out.write(head + ",".join(parts) + "]}}\n")
    return samples


class _Grid:
    """The sample text of every grid time, made once: ``[t,"0"]`` (idle) and ``[t,"90"]`` (busy)
    are most of a capture, and a series is then slices of them joined."""

    def __init__(self, step_s: int, origin_s: int) -> None:
        self.step_s = step_s
        self.origin_s = origin_s // step_s * step_s
        self.idle: list[str] = []
        self.busy: list[str] = []

    def _texts(self, busy: bool, lo: int, hi: int) -> list[str]:
        """The texts of the grid times ``lo..hi`` (inclusive), all idle or all busy."""
        i, j = (lo - self.origin_s) // self.step_s, (hi - self.origin_s) // self.step_s
        if j >= len(self.idle):
            more = range(self.origin_s + len(self.idle) * self.step_s, hi + 1, self.step_s)
            self.idle += [f'[{t},"0"]' for t in more]
            self.busy += [f'[{t},"{BUSY_PERCENT:.4g}"]' for t in more]
        return (self.busy if busy else self.idle)[i : j + 1]

    def values(self, job: _Job, idle_until_s: int, after_s: int) -> tuple[str, int, int]:
        """The text of the samples of ``job`` on a GPU idle until ``idle_until_s``, those after
        ``after_s``: one per step the job overlaps, the busy share of its interval x the busy
        activity. Also their count and the last one's time."""
        step, end = self.step_s, job.end_s
        lo = max((job.start_s // step + 1) * step, (after_s // step + 1) * step)
        last = (end + step - 1) // step * step  # the last grid time before end + step
        if lo > last:
            return "", 0, 0
        busy_from = max(idle_until_s, job.start_s)  # the GPU is busy on [busy_from, end)
        idle_hi = busy_from // step * step  # every interval ending here or before is idle
        full_lo = -(-(busy_from + step) // step) * step  # every one from here to end is busy
        full_hi = end // step * step
        # Between the runs, at most a sample at each edge of the busy time is partly busy.
        runs = [(lo, min(idle_hi, last), False)]
        if full_lo <= full_hi:
            runs.append((max(lo, full_lo), full_hi, True))
        pieces: list[str] = []
        t = lo
        for run_lo, run_hi, busy in runs:
            pieces += [
                self._one(u, job, busy_from) for u in range(t, min(run_lo, last + step), step)
            ]
            if run_lo <= run_hi:
                pieces += self._texts(busy, run_lo, run_hi)
                t = run_hi + step
            t = max(t, run_lo)
        pieces += [self._one(u, job, busy_from) for u in range(t, last + step, step)]
        return ",".join(pieces), (last - lo) // step + 1, last

    def _one(self, t: int, job: _Job, busy_from: int) -> str:
        busy = max(0, min(t, job.end_s) - max(t - self.step_s, busy_from))
        return f'[{t},"{BUSY_PERCENT * busy / self.step_s:.4g}"]'


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
