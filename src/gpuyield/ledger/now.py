"""The cluster at the capture time: jobs waiting for GPUs, nodes out of service.

The ledger accounts for intervals; an operator's dashboard also asks "what is true right now". Both
answers here come from the same store, at the data's capture time (``as_of_s``), not the wall clock:
what is known is only what the last ingest saw.
"""

from __future__ import annotations

from dataclasses import dataclass

import ibis
import ibis.expr.types as ir


@dataclass(frozen=True, kw_only=True, slots=True)
class Waiting:
    """Jobs submitted but not started at the capture time."""

    jobs: int
    """How many jobs were waiting."""
    gpus: int
    """GPUs they asked for (ReqTRES ``gres/gpu``; jobs that asked for none count 0)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class DownNode:
    """A node inside a node event (DOWN, DRAIN, MAINT, ...) that is still open at the capture."""

    cluster: str
    node: str
    state: str
    """The open event's state (the earliest one, when several overlap)."""
    planned: bool
    """Maintenance rather than a fault (docs/contracts.md)."""
    since_s: int
    """Start of the earliest event still open (epoch seconds)."""


def _open_at(table: ir.Table, as_of_s: int, start: str) -> ir.BooleanValue:
    # Half-open intervals: something that ends at as_of_s is over by then.
    begun = table[start].notnull() & (table[start] <= as_of_s)
    return begun & (table.end_s.isnull() | (table.end_s > as_of_s))


def waiting_at(backend: ibis.BaseBackend, as_of_s: int) -> Waiting:
    """Jobs submitted by ``as_of_s`` that had neither started nor ended by then."""
    jobs = backend.table("jobs")
    submitted = jobs.submit_s <= as_of_s
    not_started = jobs.start_s.isnull() | (jobs.start_s > as_of_s)
    # A job cancelled while it waited has an end and no start: it no longer waits after its end.
    not_ended = jobs.end_s.isnull() | (jobs.end_s > as_of_s)
    waiting = jobs.filter(submitted & not_started & not_ended)
    row = (
        waiting.aggregate(jobs=waiting.count(), gpus=waiting.num_gpus.fill_null(0).sum())
        .to_pyarrow()
        .to_pylist()[0]
    )
    return Waiting(jobs=int(row["jobs"] or 0), gpus=int(row["gpus"] or 0))


def down_at(backend: ibis.BaseBackend, as_of_s: int) -> tuple[DownNode, ...]:
    """Nodes inside a node event still open at ``as_of_s``, longest down first."""
    events = backend.table("node_events")
    open_ = events.filter(_open_at(events, as_of_s, "start_s"))
    first = open_.group_by(["cluster", "node"]).aggregate(since_s=open_.start_s.min())
    joined = first.join(
        open_,
        [
            first.cluster == open_.cluster,
            first.node == open_.node,
            first.since_s == open_.start_s,
        ],
    )
    rows = (
        joined.group_by([first.cluster, first.node, first.since_s])
        .aggregate(state=open_.state.min(), planned=open_.planned.any())
        .order_by(["since_s", "cluster", "node"])
        .to_pyarrow()
        .to_pylist()
    )
    return tuple(
        DownNode(
            cluster=r["cluster"],
            node=r["node"],
            state=r["state"],
            planned=bool(r["planned"]),
            since_s=int(r["since_s"]),
        )
        for r in rows
    )
