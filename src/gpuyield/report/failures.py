"""Where failed and down GPU-time came from: causes, node event reasons, and the "lemon" nodes.

Meta removed a few "lemon" nodes and cut failures of 512+-GPU jobs from 14% to 4% (Kokolis et al.,
arXiv 2410.21680; facts.md section 3). Ranking nodes by the GPU-time wasted on them points at those.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import ibis
import ibis.expr.types as ir

from gpuyield.categories import Category, DownCause, FailedCause
from gpuyield.ledger import Ledger
from gpuyield.ledger.sums import exact_sum, gpu_seconds


@dataclass(frozen=True, kw_only=True, slots=True)
class EventReason:
    """Node events of one state and reason, clipped to the window."""

    state: str
    """Slurm node state of the events (DOWN, DRAIN, MAINT, ...)."""
    reason: str
    """The admin's or Slurm's reason text (empty if none)."""
    num_events: int
    """Events with this state and reason that overlap the window."""
    num_nodes: int
    """Distinct nodes they hit."""
    gpu_seconds: float
    """Node GPUs x event time inside the window, before merging overlaps or netting out jobs that
    kept running on a draining node: an upper bound on the ``down`` time they explain."""


@dataclass(frozen=True, kw_only=True, slots=True)
class LemonNode:
    """GPU-time wasted on one node: its down time plus its share of failed jobs that ran on it."""

    cluster: str
    """Cluster name."""
    node: str
    """Node name."""
    down_gpu_seconds: dict[str, float]
    """Per down cause (``planned``, ``unplanned``): the node's ``down`` GPU-seconds."""
    failed_gpu_seconds: dict[str, float]
    """Per failure cause: GPU-seconds of failed jobs on this node (a job's GPUs spread evenly over
    its nodes, as the ledger spreads them)."""

    @property
    def down_total_gpu_seconds(self) -> float:
        """All down time on the node."""
        return sum(self.down_gpu_seconds.values())

    @property
    def failed_total_gpu_seconds(self) -> float:
        """All failed time on the node."""
        return sum(self.failed_gpu_seconds.values())

    @property
    def waste_gpu_seconds(self) -> float:
        """Down plus failed: what the ranking sorts by."""
        return self.down_total_gpu_seconds + self.failed_total_gpu_seconds


@dataclass(frozen=True, kw_only=True, slots=True)
class Failures:
    """Chart 4: failed GPU-time by cause, node events by reason, nodes ranked by waste."""

    causes: dict[str, float]
    """GPU-seconds per failure cause (every ``FailedCause``, zeros included); equals the report's
    ``failed.<cause>`` subcategories."""
    event_reasons: tuple[EventReason, ...] = field(default=())
    """Largest GPU-time first."""
    lemons: tuple[LemonNode, ...] = field(default=())
    """Every node with waste, largest first."""


def failures_of(ledger: Ledger, backend: ibis.BaseBackend) -> Failures:
    """Causes from the ledger's subcategories; reasons and lemons from events and job nodes."""
    causes = {c.value: ledger.subcategories.get(f"failed.{c.value}", 0.0) for c in FailedCause}
    return Failures(
        causes=causes,
        event_reasons=_event_reasons(ledger, backend),
        lemons=_lemons(ledger, backend),
    )


def _event_reasons(ledger: Ledger, backend: ibis.BaseBackend) -> tuple[EventReason, ...]:
    events = backend.table("node_events")
    cap = ledger.capacity
    joined = events.join(cap, ["cluster", "node"])
    clipped = joined.select(
        "node",
        "state",
        "num_gpus",
        # An event spanning a change of the node's capacity is clipped into pieces: count it once.
        event_key=joined.node.concat(":", joined.start_s.cast("string")),
        reason=joined.reason.fill_null(""),
        start_s=ibis.greatest(joined.start_s, joined.start_s_right),
        # An open event lasts until the capture, as in the ledger.
        end_s=ibis.least(joined.end_s.fill_null(ledger.window.as_of_s), joined.end_s_right),
    )
    clipped = clipped.filter(clipped.end_s > clipped.start_s)
    gpu_s = ((clipped.end_s - clipped.start_s) * clipped.num_gpus).cast("float64")
    grouped = clipped.group_by(["state", "reason"]).aggregate(
        num_events=clipped.event_key.nunique(),
        num_nodes=clipped.node.nunique(),
        gpu_s=exact_sum(gpu_s),
    )
    rows = grouped.to_pyarrow().to_pylist()
    reasons = [
        EventReason(
            state=r["state"],
            reason=r["reason"],
            num_events=int(r["num_events"]),
            num_nodes=int(r["num_nodes"]),
            gpu_seconds=gpu_seconds(r["gpu_s"]),
        )
        for r in rows
    ]
    return tuple(sorted(reasons, key=lambda e: (-e.gpu_seconds, e.state, e.reason)))


def _lemons(ledger: Ledger, backend: ibis.BaseBackend) -> tuple[LemonNode, ...]:
    down = _down_by_node(ledger)
    failed = _failed_by_node(ledger, backend)
    nodes: dict[tuple[str, str], LemonNode] = {}
    for key in sorted(set(down) | set(failed)):
        assert set(failed.get(key, {})) <= {c.value for c in FailedCause}, "failed without a cause"
        nodes[key] = LemonNode(
            cluster=key[0],
            node=key[1],
            down_gpu_seconds={c.value: down.get(key, {}).get(c.value, 0.0) for c in DownCause},
            failed_gpu_seconds={
                c.value: failed.get(key, {}).get(c.value, 0.0) for c in FailedCause
            },
        )
    ranked = sorted(nodes.values(), key=lambda n: (-n.waste_gpu_seconds, n.cluster, n.node))
    # Rounding of signed down segments can leave a node at a few micro-GPU-seconds: not waste.
    return tuple(n for n in ranked if n.waste_gpu_seconds > 1e-6)


def _down_by_node(ledger: Ledger) -> dict[tuple[str, str], dict[str, float]]:
    """The ledger's own down segments, kept per node (the ledger sums them over nodes)."""
    return _per_node(ledger.down, ledger.down.gpus)


def _failed_by_node(
    ledger: Ledger, backend: ibis.BaseBackend
) -> dict[tuple[str, str], dict[str, float]]:
    failed = ledger.segments.filter(ledger.segments.category == Category.FAILED.value)
    job_nodes = backend.table("job_nodes")
    num_nodes = job_nodes.group_by("job_key").aggregate(num_nodes=job_nodes.count())
    on_nodes = failed.join(num_nodes, "job_key").join(job_nodes, "job_key")
    return _per_node(on_nodes, on_nodes.gpus / on_nodes.num_nodes.cast("float64"))


def _per_node(table: ir.Table, gpus: ir.NumericValue) -> dict[tuple[str, str], dict[str, float]]:
    gpu_s = (table.end_s - table.start_s) * gpus
    grouped = table.mutate(gpu_s=gpu_s).group_by(["cluster", "node", "subcategory"])
    out: dict[tuple[str, str], dict[str, float]] = {}
    for row in grouped.aggregate(gpu_s=lambda t: exact_sum(t.gpu_s)).to_pyarrow().to_pylist():
        per_cause = out.setdefault((row["cluster"], row["node"]), {})
        cause = row["subcategory"] or ""
        per_cause[cause] = per_cause.get(cause, 0.0) + gpu_seconds(row["gpu_s"])
    return out
