"""The cluster side of the generated data set: node events, the node inventory, the manifest.

Split from ``bench/gen_slurm.py`` (which builds the jobs and writes ``sacct.psv``): the node
events follow the jobs (a ``DOWN*`` on a node of every ``NODE_FAIL`` job, plus RSC-1's 6.5
incidents per 1,000 node-days), the inventory says what each node held at the capture.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from bench.gen_slurm import ClusterSpec, GenParams, JobRows

# Final job states; the index is the code used in the arrays. Their shares are in
# gen_slurm.STATE_SHARES.
STATES = (
    "COMPLETED", "FAILED", "CANCELLED", "PREEMPTED", "REQUEUED", "TIMEOUT", "NODE_FAIL",
    "OUT_OF_MEMORY", "RUNNING", "DEADLINE",
)  # fmt: skip
S_COMPLETED, S_FAILED, S_CANCELLED, S_PREEMPTED, S_REQUEUED = 0, 1, 2, 3, 4
S_TIMEOUT, S_NODE_FAIL, S_OOM, S_RUNNING, S_DEADLINE = 5, 6, 7, 8, 9

EVENT_HEADER = (
    "Cluster|Cluster Nodes|NodeName|Event|EventRaw|State|StateRaw|TimeStart|TimeEnd|Duration|"
    "Reason|User|TRES"
)

# Lineage runs (named in manifest.toml) by job class; everything else is an experiment run.
LINEAGE_RUNS = ("pt-flagship", "ft-flagship", "pt-mid", "ablate-mid")


EVENT_KINDS = (
    ("DRAIN", 514, "root(0)", 6.0, ("GPU XID 79 fallen off the bus", "ECC errors on gpu3",
                                    "NVLink errors", "HCA link flapping")),
    ("DOWN", 1, "root(0)", 2.0, ("PSU fault", "kernel panic")),
    ("DRAIN", 514, "root(0)", 8.0, ("scheduled maintenance: firmware update",)),
)  # fmt: skip
EVENT_KIND_SHARES = (0.6, 0.25, 0.15)
# Node failures per node-day: RSC-1's 6.5 per 1,000 (facts.md, section 3).
NODE_EVENTS_PER_NODE_DAY = 6.5e-3


def slurm_time(epoch_s: int) -> str:
    """Slurm's ``YYYY-MM-DDTHH:MM:SS`` (UTC here)."""
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(epoch_s))


def slurm_duration(seconds: int) -> str:
    """sacctmgr's Duration: ``HH:MM:SS``, or ``D-HH:MM:SS`` from one day."""
    days, rest = divmod(seconds, 86_400)
    hours, rest = divmod(rest, 3600)
    clock = f"{hours:02d}:{rest // 60:02d}:{rest % 60:02d}"
    return f"{days}-{clock}" if days else clock


def node_name(index: int) -> str:
    return f"n{index + 1:05d}"


@dataclass(frozen=True, kw_only=True, slots=True)
class NodeEvents:
    """Node events, sorted by node then start; end -1 means still open at the window end."""

    node: np.ndarray
    start: np.ndarray
    end: np.ndarray
    kind: np.ndarray  # index into EVENT_KINDS, or -1: "Not responding" after a NODE_FAIL
    reason: np.ndarray  # index into the kind's reasons


def build_events(rows: JobRows, params: GenParams, rng: np.random.Generator) -> NodeEvents:
    """Random node incidents at RSC-1's rate, plus a DOWN* on a node of every NODE_FAIL job."""
    cols = rows.columns
    nf = np.flatnonzero(cols["state"] == S_NODE_FAIL)
    nf_node = cols["first_node"][nf] + rng.integers(0, cols["num_nodes"][nf])
    nf_start = cols["end"][nf] - rng.integers(0, 60, len(nf))
    nf_end = nf_start + rng.integers(300, 3600, len(nf))
    count = round(NODE_EVENTS_PER_NODE_DAY * params.cluster.num_nodes * params.window_s / 86_400)
    kind = rng.choice(len(EVENT_KINDS), size=count, p=np.array(EVENT_KIND_SHARES))
    median_s = np.array([k[3] for k in EVENT_KINDS])[kind] * 3600
    start = rng.integers(params.window_start_s, params.window_end_s, count)
    end = start + np.floor(median_s * rng.lognormal(0.0, 0.8, count)).astype(np.int64)
    num_reasons = np.array([len(k[4]) for k in EVENT_KINDS])[kind]
    node = np.concatenate([nf_node, rng.integers(0, params.cluster.num_nodes, count)])
    start = np.concatenate([nf_start, start])
    end = np.concatenate([nf_end, end])
    kinds = np.concatenate([np.full(len(nf), -1), kind])
    reason = np.concatenate([np.zeros(len(nf), dtype=np.int64), rng.integers(0, num_reasons)])
    order = np.lexsort((start, node))
    node, start, end, kinds, reason = (a[order] for a in (node, start, end, kinds, reason))
    # A node is in one state at a time: a new event closes the one before it.
    same_node_next = np.append(node[1:] == node[:-1], False)
    next_start = np.append(start[1:], 0)
    end = np.where(same_node_next, np.minimum(end, next_start), end)
    end = np.where(end >= params.window_end_s, -1, end)
    keep = start < params.window_end_s
    return NodeEvents(
        node=node[keep], start=start[keep], end=end[keep], kind=kinds[keep], reason=reason[keep]
    )


def cluster_tres(cluster: ClusterSpec, num_nodes: int, *, registered: bool) -> str:
    """TRES string of ``num_nodes`` nodes, in the key order sacctmgr prints."""
    cpus, gpus = cluster.cpus_per_node * num_nodes, cluster.gpus_per_node * num_nodes
    mem = f"mem={cluster.mem_mb_per_node * num_nodes}M"
    if registered:
        return (
            f"billing={cpus},cpu={cpus},energy=0,fs/disk=0,gres/gpu={gpus},{mem},"
            f"node={num_nodes},pages=0,vmem=0"
        )
    return f"billing={cpus},cpu={cpus},gres/gpu={gpus},{mem}"


def event_lines(events: NodeEvents, params: GenParams, registered_s: int) -> list[str]:
    """events.psv as ``sacctmgr -P show event All_Time format=...`` prints it."""
    c = params.cluster
    capture = params.window_end_s
    lines = [
        EVENT_HEADER,
        f"{c.name}|n[00001-{c.num_nodes:05d}]||Cluster|1||0|{slurm_time(registered_s)}|Unknown|"
        f"{slurm_duration(capture - registered_s)}|Cluster Registered TRES||"
        + cluster_tres(c, c.num_nodes, registered=True),
    ]
    node_tres = cluster_tres(c, 1, registered=False)
    columns = (events.node, events.start, events.end, events.kind, events.reason)
    for node, start, end, kind, reason in np.column_stack(columns).tolist():
        if kind < 0:
            state, raw, user, why = "DOWN*", 2049, "slurm(64030)", "Not responding"
        else:
            state, raw, user, _, reasons = EVENT_KINDS[kind]
            why = reasons[reason]
        stop = capture if end < 0 else end
        lines.append(
            f"{c.name}||{node_name(node)}|Node|2|{state}|{raw}|{slurm_time(start)}|"
            f"{'Unknown' if end < 0 else slurm_time(end)}|{slurm_duration(stop - start)}|"
            f"{why}|{user}|{node_tres}"
        )
    return lines


def allocated_gpus_per_node(rows: JobRows, num_nodes: int) -> np.ndarray:
    """GPUs allocated on each node at the window end (jobs still RUNNING), spread evenly."""
    cols = rows.columns
    running = np.flatnonzero(cols["state"] == S_RUNNING)
    nnodes = cols["num_nodes"][running]
    nodes = np.repeat(cols["first_node"][running], nnodes) + (
        np.arange(int(nnodes.sum())) - np.repeat(np.cumsum(nnodes) - nnodes, nnodes)
    )
    per_node = np.repeat(cols["gpus"][running] // nnodes, nnodes)
    alloc = np.zeros(num_nodes, dtype=np.int64)
    np.add.at(alloc, nodes, per_node)
    return alloc


def node_lines(rows: JobRows, events: NodeEvents, params: GenParams, boot_s: int) -> list[str]:
    """nodes.txt as ``scontrol -o show nodes`` prints it (key order of Slurm 22.05.8)."""
    c = params.cluster
    alloc = allocated_gpus_per_node(rows, c.num_nodes)
    columns = (events.node, events.kind, events.reason, events.start, events.end)
    open_events = {n: (k, r, s) for n, k, r, s, e in np.column_stack(columns).tolist() if e < 0}
    cpus_per_gpu = c.cpus_per_node // c.gpus_per_node
    mem_g_per_gpu = c.mem_mb_per_node // 1024 // c.gpus_per_node
    boot, capture = slurm_time(boot_s), slurm_time(params.window_end_s)
    lines = []
    for index, gpus in enumerate(alloc.tolist()):
        name = node_name(index)
        state = "IDLE" if gpus == 0 else ("ALLOCATED" if gpus == c.gpus_per_node else "MIXED")
        alloc_tres, reason = "", ""
        if gpus:
            alloc_tres = f"cpu={gpus * cpus_per_gpu},mem={gpus * mem_g_per_gpu}G,gres/gpu={gpus}"
        if index in open_events:
            kind, why_index, since = open_events[index]
            if kind < 0:
                state, why, who = "DOWN+NOT_RESPONDING", "Not responding", "slurm"
            else:
                kind_state, _, who, _, reasons = EVENT_KINDS[kind]
                state = "DOWN" if kind_state == "DOWN" else f"{state}+DRAIN"
                why, who = reasons[why_index], who.split("(")[0]
            reason = f" Reason={why} [{who}@{slurm_time(since)}]"
        lines.append(
            f"NodeName={name} Arch=x86_64 CoresPerSocket={c.cpus_per_node // 2}  "
            f"CPUAlloc={gpus * cpus_per_gpu} CPUEfctv={c.cpus_per_node} CPUTot={c.cpus_per_node} "
            "CPULoad=0.00 AvailableFeatures=(null) ActiveFeatures=(null) "
            f"Gres=gpu:{c.gpus_per_node} NodeAddr={name} NodeHostName={name} Port=6818 "
            "Version=22.05.8 OS=Linux 5.15.0-105-generic #115-Ubuntu SMP  "
            f"RealMemory={c.mem_mb_per_node} AllocMem={gpus * mem_g_per_gpu * 1024} "
            f"FreeMem={c.mem_mb_per_node // 2} Sockets=2 Boards=1 State={state} ThreadsPerCore=1 "
            "TmpDisk=0 Weight=1 Owner=N/A MCS_label=N/A Partitions=gpu,scavenger  "
            f"BootTime={boot} SlurmdStartTime={boot} LastBusyTime={capture} "
            f"CfgTRES=cpu={c.cpus_per_node},mem={c.mem_mb_per_node}M,billing={c.cpus_per_node},"
            f"gres/gpu={c.gpus_per_node} AllocTRES={alloc_tres} CapWatts=n/a CurrentWatts=0 "
            f"AveWatts=0 ExtSensorsJoules=n/s ExtSensorsWatts=0 ExtSensorsTemp=n/s{reason}"
        )
    return lines


def manifest_text(rows: JobRows) -> str:
    """A release manifest naming the lineage runs that have a finished job (so a comment)."""
    cols = rows.columns
    finished = cols["run"][(cols["state"] != S_RUNNING) & (cols["run"] >= 0)]
    present = {LINEAGE_RUNS[c] for c in np.unique(finished[finished < len(LINEAGE_RUNS)]).tolist()}
    lines = ["# Release manifest of the generated cluster (bench/gen_slurm.py).", "[runs]",
             'match = "comment:run=(?P<run>[^,\\\\s]+)"']  # fmt: skip
    for model, runs in (("flagship-v1", ("pt-flagship", "ft-flagship")), ("mid-v1", ("pt-mid",))):
        lineage = [r for r in runs if r in present]
        if lineage:
            lines += ["", "[[releases]]", f'model = "{model}"', f"runs = {json.dumps(lineage)}"]
    if "ablate-mid" in present:
        lines += ["", "[[diverged]]", 'run = "ablate-mid"']
    for run, interval_s in (("pt-flagship", 1800), ("ft-flagship", 900), ("pt-mid", 3600)):
        if run in present:
            lines += ["", f"[run_settings.{run}]", f"checkpoint_interval_s = {interval_s}"]
    return "\n".join(lines) + "\n"
