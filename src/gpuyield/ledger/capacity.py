"""Installed capacity over time: which nodes, with how many GPUs, from when to when.

Slurm records a "Cluster Registered TRES" event whenever the cluster's resources change (nodes added
or removed, GPUs per node changed): its ``ClusterNodes`` names the nodes in the cluster from that
moment until the next registration, and its ``gres/gpu`` their total. The inventory (``scontrol
show nodes``) gives GPUs per node, but only as they were at the capture. Together:

- a node is installed while the latest registration lists it (the last one lasts to the window end);
- its GPUs are the inventory's; a node the inventory lacks (removed since) gets the registration's
  GPUs that the inventory's nodes do not account for, split evenly over such nodes;
- without registrations that list nodes (the default ``sacctmgr show event`` format has no
  ``ClusterNodes``), every inventory node counts from the cluster's first registration.

The tables involved are small (a row per node and registration), so this runs in Python on rows
fetched from any backend; the result goes back as one table.
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from dataclasses import dataclass
from functools import lru_cache

from gpuyield.errors import DataConsistencyError, EmptyDataError
from gpuyield.hostlist import expand_hostlist
from gpuyield.times import iso_utc as _iso


@dataclass(frozen=True, kw_only=True, slots=True)
class Registration:
    """One "Cluster Registered TRES" event."""

    cluster: str
    """Cluster name."""
    start_s: int
    """When the cluster registered these resources."""
    num_gpus: int | None
    """``gres/gpu`` of the whole cluster (None when the event has no TRES)."""
    node_list: str | None
    """``ClusterNodes`` hostlist (None in the default event format)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class NodeInterval:
    """A node with a fixed number of GPUs over ``[start_s, end_s)``."""

    cluster: str
    """Cluster name."""
    node: str
    """Node name."""
    num_gpus: int
    """GPUs installed in the node over the interval."""
    start_s: int
    """First second."""
    end_s: int
    """First second after."""


@dataclass(frozen=True, kw_only=True, slots=True)
class CapacityIntervals:
    """Every node's installed GPUs over a window, and what the user should know about them."""

    intervals: list[NodeInterval]
    warnings: list[str]


def capacity_intervals(
    inventory: dict[tuple[str, str], int],
    registrations: list[Registration],
    *,
    start_s: int,
    end_s: int,
    first_job_s: dict[str, int] | None = None,
) -> CapacityIntervals:
    """Every node's installed GPUs over ``[start_s, end_s)``, and what the user should know.

    ``inventory`` maps (cluster, node) to GPUs. Intervals of one node never overlap, and
    consecutive ones with the same GPUs are merged. ``first_job_s``: per cluster, when its first
    job started; a job before the first registration means the capture lacks the registration
    the cluster ran under, so the first one known is taken to hold from that job on (and said).
    """
    first_job_s = first_job_s or {}
    by_cluster: dict[str, list[Registration]] = defaultdict(list)
    for reg in registrations:
        by_cluster[reg.cluster].append(reg)
    intervals: list[NodeInterval] = []
    warnings: list[str] = []
    for cluster in sorted({c for c, _ in inventory} | set(by_cluster)):
        found = _cluster_intervals(
            cluster,
            sorted(by_cluster.get(cluster, []), key=lambda r: r.start_s),
            {n: g for (c, n), g in inventory.items() if c == cluster},
            start_s=start_s,
            end_s=end_s,
            first_job_s=first_job_s.get(cluster),
        )
        intervals += found.intervals
        warnings += found.warnings
    # Nothing at all says what is installed (an empty window is fine: it has no intervals).
    if not inventory and not any(r.node_list and r.num_gpus is not None for r in registrations):
        raise EmptyDataError(
            "installed capacity is unknown: no node inventory and no cluster TRES event",
            hint="give ingest.nodes (scontrol -o show nodes) or ingest.events in the long format "
            "with TRES",
        )
    return CapacityIntervals(intervals=_merged(intervals), warnings=warnings)


def _cluster_intervals(
    cluster: str,
    regs: list[Registration],
    inventory: dict[str, int],
    *,
    start_s: int,
    end_s: int,
    first_job_s: int | None,
) -> CapacityIntervals:
    """``capacity_intervals`` of one cluster: its registrations in time order, its inventory
    (node to GPUs), when its first job started (None: no job)."""
    warnings: list[str] = []
    # Only a registration inside the window changes anything: capacity is clipped to it.
    if (
        regs
        and first_job_s is not None
        and first_job_s < regs[0].start_s
        and regs[0].start_s > start_s
    ):
        warnings.append(
            f"jobs of cluster {cluster} ran from {_iso(first_job_s)}, before its first "
            f"registration in the node events ({_iso(regs[0].start_s)}): its capacity is "
            "counted from that first job"
        )
        regs = [dataclasses.replace(regs[0], start_s=first_job_s), *regs[1:]]
    listed = _distinct_by_start([r for r in regs if r.node_list])
    intervals: list[NodeInterval] = []
    if listed:
        found, said = _from_registrations(listed, inventory, start_s, end_s)
        intervals += found
        warnings += said
        # Every interval found is of a listed node: the listed names are the nodes seen.
        missing = sorted(set(inventory) - _listed_nodes(listed))
    else:
        missing = sorted(inventory)
    # Inventory nodes no registration lists: from the cluster's first registration on, as a
    # GPU cannot have been installed in a cluster that was not registered yet.
    first = max(start_s, regs[0].start_s) if regs else start_s
    if listed and missing:
        warnings.append(
            f"{len(missing)} inventory node(s) of cluster {cluster} are in no cluster "
            f"registration ({', '.join(missing[:3])}...): counted for the whole window"
        )
    intervals += [
        NodeInterval(
            cluster=cluster,
            node=n,
            num_gpus=inventory[n],
            start_s=min(first, end_s),
            end_s=end_s,
        )
        for n in missing
    ]
    return CapacityIntervals(intervals=intervals, warnings=warnings)


def _distinct_by_start(regs: list[Registration]) -> list[Registration]:
    """One registration per start time (captures concatenated repeat them); two that differ at
    the same second contradict each other."""
    out: dict[int, Registration] = {}
    for reg in regs:
        other = out.setdefault(reg.start_s, reg)
        if (other.node_list, other.num_gpus) != (reg.node_list, reg.num_gpus):
            raise DataConsistencyError(
                f"cluster {reg.cluster} has two different registrations at {_iso(reg.start_s)}: "
                f"{other.node_list} ({other.num_gpus} GPUs) and {reg.node_list} "
                f"({reg.num_gpus} GPUs)",
                hint="ingest node events from one sacctmgr capture of this cluster",
            )
    return list(out.values())


def _listed_nodes(regs: list[Registration]) -> set[str]:
    return {n for text in {r.node_list or "" for r in regs} for n in _names(text)}


@lru_cache(maxsize=256)
def _names(node_list: str) -> tuple[str, ...]:
    """A hostlist's names; registrations repeat the same list, so each is expanded once."""
    return tuple(expand_hostlist(node_list))


def _from_registrations(
    regs: list[Registration], inventory: dict[str, int], start_s: int, end_s: int
) -> tuple[list[NodeInterval], list[str]]:
    """Each registration holds from its start until the next one (the last: the window end)."""
    intervals: list[NodeInterval] = []
    warnings: list[str] = []
    for i, reg in enumerate(regs):
        lo = max(reg.start_s, start_s)
        hi = min(regs[i + 1].start_s if i + 1 < len(regs) else end_s, end_s)
        if hi <= lo:
            continue
        gpus, said = _gpus_per_node(reg, list(_names(reg.node_list or "")), inventory)
        warnings += said
        intervals += [
            NodeInterval(cluster=reg.cluster, node=n, num_gpus=g, start_s=lo, end_s=hi)
            for n, g in gpus.items()
        ]
    return intervals, warnings


def _gpus_per_node(
    reg: Registration, names: list[str], inventory: dict[str, int]
) -> tuple[dict[str, int], list[str]]:
    known = {n: inventory[n] for n in names if n in inventory}
    unknown = [n for n in names if n not in inventory]
    total_known = sum(known.values())
    if not unknown:
        if reg.num_gpus is not None and reg.num_gpus != total_known:
            return known, [
                f"cluster {reg.cluster} registered {reg.num_gpus} GPUs at {_iso(reg.start_s)}; "
                f"the inventory gives its nodes {total_known}: the inventory's counts are used"
            ]
        return known, []
    if reg.num_gpus is None:
        # Nothing says how many GPUs those nodes had: they stay out of the capacity, and a job
        # that ran on one stops the report with the node's name.
        return known, []
    rest = reg.num_gpus - total_known
    if rest < 0 or rest % len(unknown):
        raise DataConsistencyError(
            f"cluster {reg.cluster} registered {reg.num_gpus} GPUs at {_iso(reg.start_s)} on "
            f"{len(names)} nodes; the inventory's nodes among them hold {total_known}, which "
            f"leaves {rest} for the {len(unknown)} it lacks ({', '.join(unknown[:3])}...): "
            "cannot split evenly",
            hint="give ingest.nodes an inventory that lists every node (scontrol -o show nodes)",
        )
    return {**known, **dict.fromkeys(unknown, rest // len(unknown))}, []


def _merged(intervals: list[NodeInterval]) -> list[NodeInterval]:
    """Consecutive intervals of a node with the same GPUs as one."""
    out: list[NodeInterval] = []
    for item in sorted(intervals, key=lambda i: (i.cluster, i.node, i.start_s)):
        last = out[-1] if out else None
        if (
            last is not None
            and (last.cluster, last.node) == (item.cluster, item.node)
            and last.num_gpus == item.num_gpus
            and last.end_s == item.start_s
        ):
            out[-1] = NodeInterval(
                cluster=last.cluster,
                node=last.node,
                num_gpus=last.num_gpus,
                start_s=last.start_s,
                end_s=item.end_s,
            )
        else:
            assert (
                last is None
                or (last.cluster, last.node) != (item.cluster, item.node)
                or (last.end_s <= item.start_s)
            ), "a node's capacity intervals overlap"
            out.append(item)
    return out
