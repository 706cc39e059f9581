"""Slurm 22.05 text formats, as ``sacct``, ``sacctmgr`` and ``scontrol`` print them.

Compared field by field with ``shared/data/slurm-local/`` (``sacct-X-D-wide.psv``,
``sacctmgr-event-format.psv``, ``scontrol-show-nodes-oneliner.txt``): ``-P`` output has no quoting,
times are ``YYYY-MM-DDTHH:MM:SS`` without a zone, unknown times print ``Unknown``, never-started
jobs have NodeList ``None assigned``, node lists use hostlist ranges (``n[001-004,007]``).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

SACCT_FIELDS = (
    "JobID",
    "JobIDRaw",
    "JobName",
    "User",
    "UID",
    "Group",
    "Account",
    "Partition",
    "QOS",
    "State",
    "ExitCode",
    "DerivedExitCode",
    "Submit",
    "Eligible",
    "Start",
    "End",
    "ElapsedRaw",
    "Elapsed",
    "TimelimitRaw",
    "Timelimit",
    "AllocTRES",
    "ReqTRES",
    "AllocCPUS",
    "ReqCPUS",
    "ReqMem",
    "NodeList",
    "NNodes",
    "NTasks",
    "Comment",
    "Reason",
    "Flags",
    "Priority",
    "Cluster",
    "WorkDir",
    "SubmitLine",
    "MaxRSS",
    "CPUTimeRAW",
)
EVENT_HEADER = (
    "Cluster|Cluster Nodes|NodeName|Event|EventRaw|State|StateRaw|TimeStart|TimeEnd|"
    "Duration|Reason|User|TRES"
)
#: ``StateRaw`` as slurmdbd stores it (sacctmgr-event-format.psv: DOWN 1, DRAIN 514, DOWN* 2049).
STATE_RAW = {"DOWN": 1, "DRAIN": 514, "DOWN*": 2049, "MAINT": 1}
CPUS_PER_GPU = 12
MEM_GB_PER_GPU = 224


def times(epoch_s: np.ndarray) -> np.ndarray:
    """Epoch seconds as Slurm's ``YYYY-MM-DDTHH:MM:SS`` (vectorised)."""
    return np.datetime_as_string(np.asarray(epoch_s, dtype="datetime64[s]"), unit="s")


def time1(epoch_s: int | None) -> str:
    """One epoch second as Slurm prints it; None is ``Unknown``."""
    return "Unknown" if epoch_s is None else str(np.datetime64(int(epoch_s), "s"))


def duration(seconds: int) -> str:
    """Slurm's elapsed format ``[D-]HH:MM:SS``."""
    days, rest = divmod(int(seconds), 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    clock = f"{hours:02d}:{minutes:02d}:{secs:02d}"
    return f"{days}-{clock}" if days else clock


@dataclass(frozen=True, kw_only=True, slots=True)
class NodeNaming:
    """How nodes are named: node index i is ``prefix`` + (i+1) zero-padded to ``width`` digits."""

    prefix: str
    width: int


def node_namer(prefix: str, num_nodes: int) -> NodeNaming:
    """The naming of a fleet of ``num_nodes`` nodes (padded to the widest number)."""
    return NodeNaming(prefix=prefix, width=len(str(num_nodes)))


def node_name(index: int, prefix: str, width: int) -> str:
    """Name of node ``index`` (0-based)."""
    return f"{prefix}{index + 1:0{width}d}"


def hostlist(indices: Iterable[int], prefix: str, width: int) -> str:
    """Compress node indices to a Slurm hostlist: ``n[0001-0004,0007]`` (one node: ``n0001``)."""
    nums = sorted({int(i) + 1 for i in indices})
    if not nums:
        return "None assigned"
    if len(nums) == 1:
        return f"{prefix}{nums[0]:0{width}d}"
    parts, run_start, prev = [], nums[0], nums[0]
    for n in [*nums[1:], None]:
        if n is not None and n == prev + 1:
            prev = n
            continue
        low = f"{run_start:0{width}d}"
        parts.append(low if run_start == prev else f"{low}-{prev:0{width}d}")
        if n is not None:
            run_start = prev = n
    return f"{prefix}[{','.join(parts)}]"


def tres(num_gpus: int, num_nodes: int, gres_type: str = "") -> str:
    """``AllocTRES`` text of an allocation; with a GRES type, its typed count before the total,
    as Slurm prints it (``gres/gpu:h100=4,gres/gpu=4``)."""
    cpus = num_gpus * CPUS_PER_GPU
    typed = f"gres/gpu:{gres_type}={num_gpus}," if gres_type else ""
    return (
        f"billing={cpus},cpu={cpus},{typed}gres/gpu={num_gpus},mem={num_gpus * MEM_GB_PER_GPU}G,"
        f"node={num_nodes}"
    )


def sacct_line(values: Sequence[object]) -> str:
    """One ``-P`` row."""
    assert len(values) == len(SACCT_FIELDS)
    return "|".join(str(v) for v in values)


def node_tres(gpus_per_node: int) -> str:
    """Per-node TRES string of sacctmgr events."""
    cpus = gpus_per_node * CPUS_PER_GPU
    return (
        f"billing={cpus},cpu={cpus},gres/gpu={gpus_per_node},mem={gpus_per_node * MEM_GB_PER_GPU}G"
    )


def cluster_tres(num_nodes: int, gpus_per_node: int) -> str:
    """``Cluster Registered TRES`` text."""
    cpus = num_nodes * gpus_per_node * CPUS_PER_GPU
    mem_mb = num_nodes * gpus_per_node * MEM_GB_PER_GPU * 1024
    return (
        f"billing={cpus},cpu={cpus},energy=0,fs/disk=0,gres/gpu={num_nodes * gpus_per_node},"
        f"mem={mem_mb}M,node={num_nodes},pages=0,vmem=0"
    )


def scontrol_node(
    name: str,
    state: str,
    gpus: int,
    alloc_gpus: int,
    reason: str | None,
    boot: str,
    *,
    gres_type: str = "",
    partitions: str = "train,research",
) -> str:
    """One ``scontrol -o show nodes`` line (a typed node: ``Gres=gpu:TYPE:N``, typed TRES)."""
    cpus = gpus * CPUS_PER_GPU
    mem_mb = gpus * MEM_GB_PER_GPU * 1024
    typed_alloc = f",gres/gpu:{gres_type}={alloc_gpus}" if gres_type else ""
    alloc = (
        (
            f"cpu={alloc_gpus * CPUS_PER_GPU},mem={alloc_gpus * MEM_GB_PER_GPU * 1024}M,"
            f"gres/gpu={alloc_gpus}{typed_alloc}"
        )
        if alloc_gpus
        else ""
    )
    gres = f"gpu:{gres_type}:{gpus}" if gres_type else f"gpu:{gpus}"
    typed_cfg = f",gres/gpu:{gres_type}={gpus}" if gres_type else ""
    text = (
        f"NodeName={name} Arch=x86_64 CoresPerSocket={cpus // 2}  "
        f"CPUAlloc={alloc_gpus * CPUS_PER_GPU} CPUEfctv={cpus} CPUTot={cpus} CPULoad=0.00 "
        f"AvailableFeatures=(null) ActiveFeatures=(null) "
        f"Gres={gres} NodeAddr={name} NodeHostName={name} Version=22.05.8 OS=Linux "
        f"RealMemory={mem_mb} AllocMem={alloc_gpus * MEM_GB_PER_GPU * 1024} FreeMem=N/A Sockets=2 "
        f"Boards=1 State={state} ThreadsPerCore=1 TmpDisk=0 Weight=1 Owner=N/A MCS_label=N/A "
        f"Partitions={partitions}  BootTime={boot} SlurmdStartTime={boot} "
        f"CfgTRES=cpu={cpus},mem={mem_mb}M,billing={cpus},gres/gpu={gpus}{typed_cfg} "
        f"AllocTRES={alloc} "
        f"CapWatts=n/a CurrentWatts=0 AveWatts=0 ExtSensorsJoules=n/s ExtSensorsWatts=0 "
        f"ExtSensorsTemp=n/s"
    )
    return text + (f" Reason={reason}" if reason else "")
