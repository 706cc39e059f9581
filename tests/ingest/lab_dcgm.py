"""DCGM ``query_range`` answers for the bundled Slurm capture (examples/slurm-lab), at any step.

The capture is real (Slurm 22.05 with accounting, four nodes of 8 GPUs, one hour); its jobs' GPU
indices were not captured, so they are given here the way Slurm hands them out (the lowest free
indices of the node when the job starts). Each job's GPUs then follow one activity in continuous
time, whatever the step it is sampled at:

- a job sits idle from its start for ``lead_s(job)`` (data loading, a hung rendezvous), then
  works at ``BUSY_PERCENT``;
- a job of four GPUs or more never uses its last GPU.

A series is sampled the way the DCGM exporter and Prometheus do: at each step ``t`` of the
query, the GPU's mean activity over ``[t - step, t)``, labelled (``hpc_job``) with the job that
held the GPU at the scrape; a GPU no job held is exported unlabelled. ``truth`` integrates the
same activity: the GPU-seconds each job held a GPU while it did nothing.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

LAB = Path(__file__).parents[2] / "examples" / "slurm-lab"
SINCE = "2026-11-30T10:00:00"
UNTIL = "2026-11-30T11:00:00"
GPUS_PER_NODE = 8
BUSY_PERCENT = 90.0


def epoch(text: str) -> int:
    return int(datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp())


SINCE_S, UNTIL_S = epoch(SINCE), epoch(UNTIL)


@dataclass(frozen=True)
class Hold:
    """One job run holding one GPU."""

    job: str
    node: str
    gpu: int
    start_s: int
    end_s: int
    idle_until_s: int
    """Before this the GPU does nothing (the job's lead, or its end for a GPU never used)."""


def lead_s(job: str) -> int:
    """How long a job idles from its start: 0 to 5 minutes, by its id."""
    return (7 * int(job)) % 11 * 30


def holds() -> list[Hold]:
    """Every job run's GPUs, indices handed out lowest free first, in start order."""
    lines = (LAB / "sacct-X-D-wide.psv").read_text().splitlines()
    header = lines[0].split("|")
    col = {name: i for i, name in enumerate(header)}
    runs = []
    for line in lines[1:]:
        f = line.split("|")
        if len(f) != len(header) or f[col["Start"]] in ("None", "Unknown", ""):
            continue
        tres = f[col["AllocTRES"]]
        if "gres/gpu=" not in tres:
            continue
        gpus = int(tres.split("gres/gpu=")[1].split(",")[0])
        nodes = _nodes(f[col["NodeList"]])
        end = UNTIL_S if f[col["End"]] == "Unknown" else epoch(f[col["End"]])
        start = epoch(f[col["Start"]])
        if end > start:
            runs.append((start, f[col["JobIDRaw"]], nodes, gpus // len(nodes), end))
    free_at: dict[tuple[str, int], int] = {}
    out = []
    for start, job, nodes, per_node, end in sorted(runs):
        for node in nodes:
            free = [g for g in range(GPUS_PER_NODE) if free_at.get((node, g), 0) <= start]
            for k, gpu in enumerate(free[:per_node]):
                free_at[(node, gpu)] = end
                never = per_node * len(nodes) >= 4 and node == nodes[-1] and k == per_node - 1
                idle_until = end if never else min(end, start + lead_s(job))
                out.append(Hold(job, node, gpu, start, end, idle_until))
    return out


def _nodes(text: str) -> list[str]:
    if "[" not in text:
        return text.split(",")
    prefix, rest = text.split("[", 1)
    lo, hi = rest.rstrip("]").split("-")
    return [f"{prefix}{i}" for i in range(int(lo), int(hi) + 1)]


def truth_idle_gpu_s(all_holds: list[Hold]) -> float:
    """GPU-seconds jobs held while the GPU was idle, inside the window."""
    return float(
        sum(max(0, min(h.idle_until_s, UNTIL_S) - max(h.start_s, SINCE_S)) for h in all_holds)
    )


def _busy_s(held: list[Hold], a: int, b: int) -> int:
    """Seconds of ``[a, b)`` one GPU worked, over the holds of that GPU."""
    return sum(max(0, min(b, h.end_s) - max(a, h.idle_until_s, h.start_s)) for h in held)


def query_range(step_s: int, all_holds: list[Hold]) -> dict[str, object]:
    """The answer of ``query_range?query=DCGM_FI_DEV_GPU_UTIL&step=<step_s>`` over the hour."""
    series: dict[tuple[str, int, str | None], list[list[object]]] = {}
    by_gpu: dict[tuple[str, int], list[Hold]] = {}
    for h in all_holds:
        by_gpu.setdefault((h.node, h.gpu), []).append(h)
    for node in ("n1", "n2", "n3", "n4"):
        for gpu in range(GPUS_PER_NODE):
            held = by_gpu.get((node, gpu), [])
            for t in range(SINCE_S + step_s, UNTIL_S + 1, step_s):
                owner = next((h.job for h in held if h.start_s < t <= h.end_s), None)
                value = BUSY_PERCENT * _busy_s(held, t - step_s, t) / step_s
                series.setdefault((node, gpu, owner), []).append([t, f"{value:.6g}"])
    result = []
    for (node, gpu, owner), values in series.items():
        labels = {"__name__": "DCGM_FI_DEV_GPU_UTIL", "Hostname": node, "gpu": str(gpu)}
        if owner is not None:
            labels["hpc_job"] = owner
        result.append({"metric": labels, "values": values})
    return {"status": "success", "data": {"resultType": "matrix", "result": result}}


def write(out_dir: Path, step_s: int) -> Path:
    path = out_dir / f"dcgm-{step_s}s.json"
    path.write_text(json.dumps(query_range(step_s, holds())))
    return path
