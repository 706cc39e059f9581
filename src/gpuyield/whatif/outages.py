"""Node outages read back from the store's node events: failures, their causes, repairs, upkeep.

A failure shows in ``sacctmgr show event`` as a run of events on one node: ``DOWN``/``DOWN*`` from
detection, then (often) ``DRAIN`` while it is repaired. Events that follow each other on a node
(the next starts within ``CHAIN_GAP_S`` of the previous end) are one outage: its down part is the
leading ``DOWN``/``DOWN*`` event, its repair the rest. Planned events (maintenance, by the ledger's
reading of state and reason) are upkeep, not failures.

Causes are read from reasons: a reason naming a component (``repair: faulty gpu``, as the
simulator and many admins write it) or a cause's own reason (``GPU fell off the bus``) gives that
cause; reasons several causes share (``Not responding``) or nobody recognises give a group whose
rate is split over its causes in Table 5's proportions (the only per-cause table published).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import duckdb

from gpuyield.simulate import FAILURE_CAUSES

#: Events on a node this close after the previous one ended continue the same outage.
CHAIN_GAP_S = 60
#: The group of causes Slurm shows only as an unresponsive node.
UNRESPONSIVE = "unresponsive"
#: Reasons nobody recognises: booked as the generic cause below in the scenario.
UNRECOGNISED = "other"
#: The scenario cause that stands for unrecognised reasons (Table 5's "Host Maintenance",
#: unplanned: a host pulled for a repair whose part is not named).
GENERIC_CAUSE = "host_unplanned"

_HARDWARE = tuple(c for c in FAILURE_CAUSES if c.kind == "hardware")
_SHARED_REASON = "not responding"
# Keyword rules for free-text reasons, first match wins (lower case, whole words).
_KEYWORDS: tuple[tuple[str, str], ...] = (
    (r"\b(hbm\w*|ecc|dbe|xid ?(48|63|64|94|95))\b", "hbm3"),
    (r"\bsram\b", "sram"),
    (r"\b(gsp|xid ?119)\b", "gsp"),
    (r"\b(sdc|silent data)\b", "sdc"),
    (r"\b(thermal|temperature|overheat\w*)\b", "gpu_thermal"),
    (r"\b(gpu|xid ?\d+|nvlink|fell off the bus)\b", "gpu"),
    (r"\b(switch|cable|infiniband|ib|network|link down|fabric)\b", "network"),
    (r"\b(nic|hca|mlx\w*|ethernet)\b", "nic"),
    (r"\b(ssd|nvme|disk)\b", "ssd"),
    (r"\b(psu|power supply|power)\b", "psu"),
    (r"\b(chassis|bmc)\b", "chassis"),
    (r"\b(dimm|system memory|host memory)\b", "system_memory"),
    (r"\b(cpu|processor)\b", "cpu"),
)


@dataclass(frozen=True, kw_only=True, slots=True)
class Outage:
    """One failure (or planned stretch) of one node: times as stored, the end cut at the window
    end."""

    node: str
    start_s: int
    #: The leading DOWN/DOWN* event's length (0 when the outage starts with another state).
    down_s: int
    #: From the end of the down part to the node's return (or to the window end if still out).
    repair_s: int
    #: Still out at the window end: ``repair_s`` is a lower bound.
    open: bool
    #: Cause id, ``UNRESPONSIVE`` or ``UNRECOGNISED`` (planned outages: ``planned``).
    cause: str
    #: The reasons of its events, as stored (evidence).
    reasons: tuple[str, ...]
    planned: bool


def read_outages(
    con: duckdb.DuckDBPyConnection, start_s: int, end_s: int, as_of_s: int
) -> list[Outage]:
    """Every outage of the store that overlaps ``[start_s, end_s)``, in time order (those that
    started before the window count for exposure only: ``started_before``)."""
    rows = con.execute(
        """SELECT node, state, coalesce(reason, ''), start_s, coalesce(end_s, ?), planned
           FROM node_events WHERE start_s < ? AND coalesce(end_s, ?) > ?
           ORDER BY node, start_s, end_s""",
        [as_of_s, end_s, as_of_s, start_s - CHAIN_GAP_S],
    ).fetchall()
    outages: list[Outage] = []
    chain: list[tuple[str, str, str, int, int, bool]] = []
    for row in rows:
        if chain and (row[0] != chain[-1][0] or row[3] > chain[-1][4] + CHAIN_GAP_S):
            outages.append(_outage(chain, end_s, as_of_s))
            chain = []
        chain.append(row)
    if chain:
        outages.append(_outage(chain, end_s, as_of_s))
    overlapping = [o for o in outages if o.start_s + o.down_s + o.repair_s > start_s]
    return sorted(overlapping, key=lambda o: (o.start_s, o.node))


def _outage(chain: list[tuple[str, str, str, int, int, bool]], end_s: int, as_of_s: int) -> Outage:
    node, first_state, _, start, first_end, _ = chain[0]
    last_end = max(row[4] for row in chain)
    down = first_end - start if first_state.upper().startswith("DOWN") else 0
    until = min(last_end, end_s)
    reasons = tuple(dict.fromkeys(row[2] for row in chain if row[2]))
    # An outage is planned when it began so: a failure whose repair drain mentions maintenance
    # is still a failure.
    planned = bool(chain[0][5])
    return Outage(
        node=node,
        start_s=start,
        down_s=min(down, until - start),
        repair_s=max(until - start - down, 0),
        open=last_end >= min(end_s, as_of_s),
        cause="planned" if planned else classify(reasons),
        reasons=reasons,
        planned=planned,
    )


def classify(reasons: tuple[str, ...]) -> str:
    """The cause id the reasons name, ``UNRESPONSIVE`` or ``UNRECOGNISED``."""
    lowered = [r.strip().lower() for r in reasons]
    for cause in _HARDWARE:  # a repair reason naming the component is the most specific
        if cause.repair_reason in lowered:
            return cause.id
    for cause in _HARDWARE:
        if cause.reason.lower() != _SHARED_REASON and cause.reason.lower() in lowered:
            return cause.id
    for text in lowered:
        for pattern, cause_id in _KEYWORDS:
            if re.search(pattern, text):
                return cause_id
    if _SHARED_REASON in lowered:
        return UNRESPONSIVE
    return UNRECOGNISED


def group_members(group: str) -> tuple[str, ...]:
    """The cause ids a reason group stands for."""
    if group == UNRESPONSIVE:
        return tuple(c.id for c in _HARDWARE if c.reason.lower() == _SHARED_REASON)
    if group == UNRECOGNISED:
        return (GENERIC_CAUSE,)
    return (group,)


def node_seconds_out(outages: list[Outage], start_s: int, end_s: int) -> int:
    """Node-seconds of the window the outages (planned ones too) keep out of service."""
    return sum(
        max(min(o.start_s + o.down_s + o.repair_s, end_s) - max(o.start_s, start_s), 0)
        for o in outages
    )
