"""Down time per node: merged node events, less the GPUs jobs still held on the node meanwhile."""

from __future__ import annotations

import ibis
import ibis.expr.types as ir

from gpuyield.categories import Category, DownCause
from gpuyield.ledger.window import Window


def down_islands(backend: ibis.BaseBackend, capacity: ir.Table, window: Window) -> ir.Table:
    """Disjoint down intervals per node (``cluster, node, start_s, end_s, planned, num_gpus``).

    Overlapping events on a node merge into one island; an island is planned only if every event
    in it was planned, since a fault during maintenance is still a fault.
    """
    events = backend.table("node_events")
    events = events.join(capacity, ["cluster", "node"]).select(
        "cluster",
        "node",
        "planned",
        "num_gpus",
        start_s=ibis.greatest(events.start_s, capacity.start_s),
        # An open event lasts until the capture.
        end_s=ibis.least(events.end_s.fill_null(window.as_of_s), capacity.end_s),
    )
    events = events.filter(events.end_s > events.start_s)
    ordered = ibis.window(
        group_by=["cluster", "node"], order_by=["start_s", "end_s"], rows=(None, -1)
    )
    events = events.mutate(prev_end_s=events.end_s.max().over(ordered))
    starts_island = events.prev_end_s.isnull() | (events.start_s > events.prev_end_s)
    events = events.mutate(new_island=starts_island.cast("int64"))
    running = ibis.window(
        group_by=["cluster", "node"], order_by=["start_s", "end_s"], rows=(None, 0)
    )
    events = events.mutate(island=events.new_island.sum().over(running))
    return events.group_by(["cluster", "node", "island"]).aggregate(
        start_s=events.start_s.min(),
        end_s=events.end_s.max(),
        planned=events.planned.all(),
        num_gpus=events.num_gpus.max(),
    )


def down_segments(islands: ir.Table, allocations: ir.Table) -> ir.Table:
    """Signed segments: +GPUs of the node over each island, -GPUs a job held there meanwhile.

    Allocation wins over drain: a draining node still running a job is allocated, so the job's GPUs
    are taken back out of ``down`` (the job's own segment counts them).
    """
    category = ibis.literal(Category.DOWN.value)

    def sub(planned: ir.BooleanValue) -> ir.StringValue:
        return ibis.cases((planned, DownCause.PLANNED.value), else_=DownCause.UNPLANNED.value)

    gross = islands.select(
        "cluster",
        "node",
        category=category,
        subcategory=sub(islands.planned),
        start_s=islands.start_s.cast("float64"),
        end_s=islands.end_s.cast("float64"),
        gpus=islands.num_gpus.cast("float64"),
    )
    on_nodes = allocations.view()
    islands = islands.view()
    overlap = on_nodes.join(
        islands,
        [
            on_nodes.cluster == islands.cluster,
            on_nodes.node == islands.node,
            on_nodes.start_s < islands.end_s,
            on_nodes.end_s > islands.start_s,
        ],
    )
    held = overlap.select(
        cluster=on_nodes.cluster,
        node=on_nodes.node,
        category=category,
        subcategory=sub(islands.planned),
        start_s=ibis.greatest(on_nodes.start_s, islands.start_s.cast("float64")),
        end_s=ibis.least(on_nodes.end_s, islands.end_s.cast("float64")),
        gpus=-on_nodes.gpus,
    )
    return gross.union(held)


def job_node_allocations(backend: ibis.BaseBackend, jobs: ir.Table) -> ir.Table:
    """Per job and node: the job's clipped interval and its GPUs on that node.

    Slurm reports one ``gres/gpu`` total per job; the ledger spreads it evenly over the job's nodes
    (what the scheduler does for ``--gres=gpu:N`` per node; uneven spreads are not in sacct).
    """
    job_nodes = backend.table("job_nodes")
    known = jobs.filter(jobs.num_gpus.notnull() & (jobs.num_gpus > 0))
    joined = known.join(job_nodes, ["cluster", "job_id_raw", "submit_s"])
    # NNodes from sacct (or the node list's length): were it to disagree with the expanded node
    # list, the per-node and per-job totals would differ and the ledger's conservation check fails.
    per_node = joined.num_gpus.cast("float64") / joined.num_nodes.cast("float64")
    return joined.select(
        "cluster",
        "node",
        "job_id",
        "job_id_raw",
        "submit_s",
        start_s=joined.clip_start_s.cast("float64"),
        end_s=joined.clip_end_s.cast("float64"),
        gpus=per_node,
    )
