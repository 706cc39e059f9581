"""Planned maintenance windows, from the planned node events, placed on the scenario's nodes.

Nodes drained for maintenance at the same instant until the same instant are one window. The
simulator drains research nodes only (the lineage groups take the first nodes) and a node can be
in one window at a time, so each window gets the lowest research nodes free during it; a window
wider than the research nodes is narrowed, and the fit says so.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from gpuyield.whatif.outages import Outage

_DEFAULT_REASON = "scheduled maintenance"


@dataclass(frozen=True, kw_only=True, slots=True)
class MaintenanceShape:
    """One maintenance window of the fitted scenario."""

    start_day: float
    duration_h: float
    first_node: int
    num_nodes: int
    reason: str

    def to_dict(self) -> dict[str, object]:
        """The scenario's ``[[maintenance]]`` table."""
        return {
            "start_day": self.start_day,
            "duration_h": self.duration_h,
            "first_node": self.first_node,
            "num_nodes": self.num_nodes,
            "reason": self.reason,
        }


@dataclass(frozen=True, kw_only=True, slots=True)
class MaintenancePlan:
    """The scenario's maintenance windows and what was changed to place them."""

    windows: list[MaintenanceShape]
    notes: list[str]


def maintenance_windows(
    outages: list[Outage], start_s: int, first_research: int, num_nodes: int
) -> MaintenancePlan:
    """Windows of the planned outages that start in the window, and notes on what was changed."""
    groups = Counter(
        (o.start_s, o.start_s + o.down_s + o.repair_s, _reason(o))
        for o in outages
        if o.planned and o.start_s >= start_s
    )
    shapes: list[MaintenanceShape] = []
    notes: list[str] = []
    room = num_nodes - first_research
    for (begin, end, reason), count in sorted(groups.items()):
        wanted = count
        busy = [s for s in shapes if _overlaps(s, begin, end, start_s)]
        first = _lowest_free(busy, first_research, min(count, room), num_nodes)
        if first is None or count > room:
            count = min(count, room)
            first = _lowest_free(busy, first_research, count, num_nodes)
        if first is None or count <= 0:
            notes.append(
                f"maintenance of {wanted} nodes at {begin} left out: no research nodes free"
            )
            continue
        if count < wanted:
            notes.append(
                f"maintenance of {wanted} nodes at {begin} narrowed to {count} research nodes"
            )
        shapes.append(
            MaintenanceShape(
                start_day=(begin - start_s) / 86400.0,
                duration_h=max(end - begin, 1) / 3600.0,
                first_node=first,
                num_nodes=count,
                reason=reason,
            )
        )
    return MaintenancePlan(windows=shapes, notes=notes)


def _reason(outage: Outage) -> str:
    for reason in outage.reasons:
        if "maint" in reason.lower():
            return reason
    return _DEFAULT_REASON  # the simulator reads 'maint' in a reason as planned


def _overlaps(shape: MaintenanceShape, begin: int, end: int, start_s: int) -> bool:
    s_begin = start_s + shape.start_day * 86400
    s_end = s_begin + shape.duration_h * 3600
    return s_begin < end and begin < s_end


def _lowest_free(
    busy: list[MaintenanceShape], first: int, count: int, num_nodes: int
) -> int | None:
    taken = sorted((s.first_node, s.first_node + s.num_nodes) for s in busy)
    cursor = first
    for lo, hi in taken:
        if lo - cursor >= count:
            return cursor
        cursor = max(cursor, hi)
    return cursor if num_nodes - cursor >= count else None
