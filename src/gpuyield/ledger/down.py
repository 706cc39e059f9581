"""Per node: who held its GPUs when, and its down time less the GPUs jobs still held meanwhile.

One sweep per node over the time-ordered changes (a job starts or ends, a down island starts or
ends) gives, between consecutive changes, the GPUs in use and whether the node was down. That one
sorted pass yields both the down segments and the capacity check (no node above its GPUs at any
instant), instead of a join of every allocation with every down island of its node.
"""

from __future__ import annotations

import ibis
import ibis.expr.types as ir

from gpuyield.categories import Category, DownCause
from gpuyield.ledger.jobs import HW_SUSPECT_STATES
from gpuyield.ledger.window import Window

# GPU counts are float sums (a job's GPUs spread over its nodes); below this they are rounding.
GPU_EPSILON = 1e-9


def down_islands(backend: ibis.BaseBackend, capacity: ir.Table, window: Window) -> ir.Table:
    """Disjoint down intervals per node (``cluster, node, start_s, end_s, planned, num_gpus``).

    Overlapping events on a node merge into one island; an island is planned only if every event
    in it was planned, since a fault during maintenance is still a fault.
    """
    events = backend.table("node_events")
    events = events.join(capacity, ["cluster", "node"]).select(
        "cluster",
        "node",
        "node_id",
        "planned",
        "num_gpus",
        start_s=ibis.greatest(events.start_s, capacity.start_s),
        # An open event lasts until the capture.
        end_s=ibis.least(events.end_s.fill_null(window.as_of_s), capacity.end_s),
    )
    events = events.filter(events.end_s > events.start_s)
    ordered = ibis.window(group_by="node_id", order_by=["start_s", "end_s"], rows=(None, -1))
    events = events.mutate(prev_end_s=events.end_s.max().over(ordered))
    starts_island = events.prev_end_s.isnull() | (events.start_s > events.prev_end_s)
    events = events.mutate(new_island=starts_island.cast("int64"))
    running = ibis.window(group_by="node_id", order_by=["start_s", "end_s"], rows=(None, 0))
    events = events.mutate(island=events.new_island.sum().over(running))
    return events.group_by(["cluster", "node", "node_id", "island"]).aggregate(
        start_s=events.start_s.min(),
        end_s=events.end_s.max(),
        planned=events.planned.all(),
        num_gpus=events.num_gpus.max(),
    )


def job_node_allocations(backend: ibis.BaseBackend, jobs: ir.Table, capacity: ir.Table) -> ir.Table:
    """Per job and node: the job's clipped interval, its GPUs there, and the node's capacity.

    Also ``full_end_s`` (unclipped end) and ``failed`` (an end state the hardware may explain).

    Slurm reports one ``gres/gpu`` total per job; the ledger spreads it evenly over the job's nodes
    (what the scheduler does for ``--gres=gpu:N`` per node), except for a job holding GPUs of
    several types, whose count per type is known (``gres/gpu:a100=4,gres/gpu:h100=8``): each
    type's count is spread over the job's nodes of that type (``--gpus=12`` on an 8-GPU H100 node
    and a 4-GPU A100 node is 8 + 4, never 6 + 6). A left join with the inventory: a node missing
    from it has a null ``node_id`` (see the ledger's check) and is the only one whose
    ``cluster, node`` are kept.
    """
    job_nodes = backend.table("job_nodes")
    known = jobs.filter(jobs.num_gpus.notnull() & (jobs.num_gpus > 0))
    joined = known.join(job_nodes, "job_key")
    several = joined.gpu_types.contains(",").fill_null(False)
    one_type = joined.filter(~several)
    # NNodes from sacct (or the node list's length): were it to disagree with the expanded node
    # list, the per-node and per-job totals would differ and the ledger's conservation check fails.
    even = one_type.num_gpus.cast("float64") / one_type.num_nodes.cast("float64")
    alloc = _allocation_columns(one_type, even).union(_typed_allocations(backend, joined, several))
    with_nodes = alloc.left_join(node_ids(capacity), ["cluster", "node"])
    unknown = with_nodes.node_id.isnull()
    # Names only where the inventory lacks the node (for the ledger's error): the ledger stores
    # the allocations (11M rows at 10M jobs), and two strings a row were most of their size.
    return with_nodes.select(
        *[c for c in alloc.columns if c not in ("cluster", "node")],
        with_nodes.node_id,
        cluster=ibis.cases((unknown, alloc.cluster), else_=ibis.null(str)),
        node=ibis.cases((unknown, alloc.node), else_=ibis.null(str)),
    )


def _allocation_columns(joined: ir.Table, gpus: ir.Value) -> ir.Table:
    """The allocation rows of jobs x nodes with ``gpus`` on each node."""
    return joined.select(
        "cluster",
        "node",
        "job_key",
        "full_end_s",
        start_s=joined.clip_start_s.cast("float64"),
        end_s=joined.clip_end_s.cast("float64"),
        gpus=gpus,
        # Kept for the hardware-blame rule (ledger/jobs.py), so it need not join node lists again.
        failed=joined.state.isin(HW_SUSPECT_STATES),
    )


def _typed_allocations(backend: ibis.BaseBackend, joined: ir.Table, several: ir.Value) -> ir.Table:
    """Allocations of jobs holding several GPU types: each type's count over the job's nodes of
    that type (the inventory's GRES type). Where that does not add up to the job's GPUs (a node
    of no or another type), the job is spread evenly, as every other job is."""
    types = backend.table("nodes").select("cluster", "node", node_type="gpu_type")
    mixed = joined.filter(several)
    mixed = mixed.left_join(types, ["cluster", "node"]).select(mixed, "node_type")
    listed = "," + mixed.gpu_types + ","
    key = "," + mixed.node_type + "="
    at = listed.find(key)
    count = listed.substr(at + key.length()).split(",")[0].cast("float64")
    same_type = ibis.window(group_by=["job_key", "node_type"])
    typed = ibis.cases((at >= 0, count / mixed.count().over(same_type)), else_=ibis.null("float64"))
    mixed = mixed.mutate(typed_gpus=typed)
    per_job = ibis.window(group_by="job_key")
    complete = (mixed.typed_gpus.count().over(per_job) == mixed.count().over(per_job)) & (
        (mixed.typed_gpus.sum().over(per_job) - mixed.num_gpus).abs() < GPU_EPSILON
    )
    mixed = mixed.mutate(complete=complete)
    even = mixed.num_gpus.cast("float64") / mixed.num_nodes.cast("float64")
    return _allocation_columns(mixed, ibis.ifelse(mixed.complete, mixed.typed_gpus, even))


def node_ids(capacity: ir.Table) -> ir.Table:
    """One row per node (``cluster, node, node_id``): capacity has a row per node and stretch."""
    return capacity.select("cluster", "node", "node_id").distinct()


def sweep_changes(allocations: ir.Table, islands: ir.Table, capacity: ir.Table) -> ir.Table:
    """Every change on every node, as ``key`` (node, then time: ``_sweep_key``) and deltas.

    ``d_gpus``: GPUs a job takes (+) or gives back (-); ``d_down``: a down island opens (+) or
    closes (-); ``d_cap``: installed GPUs arrive (+) or leave (-). Running sums of the deltas in key
    order give, between consecutive changes, the node's state (``node_sweep``, ``scan.scan_sweep``).
    """
    known = allocations.filter(allocations.node_id.notnull())

    def points(
        table: ir.Table,
        t: ir.Value,
        start: int,
        d_gpus: ir.Value,
        d_down: ir.Value,
        d_cap: ir.Value | None = None,
    ) -> ir.Table:
        return table.select(
            key=_sweep_key(table.node_id, t, start),
            d_gpus=d_gpus.cast("float64"),
            d_down=d_down,
            d_cap=(ibis.literal(0) if d_cap is None else d_cap).cast("float64"),
        )

    # Islands on a node are disjoint, so at most one is open: its running sum of +-1 (unplanned)
    # or +-3 (planned) is 0 in service, 1 down unplanned, 3 down planned. One sum, not two.
    island_code = ibis.cases((islands.planned, 3), else_=1).cast("int64")
    no_island = ibis.literal(0, "int64")
    zero = ibis.literal(0)
    return ibis.union(
        points(known, known.start_s, 1, known.gpus, no_island),
        points(known, known.end_s, 0, -known.gpus, no_island),
        points(islands, islands.start_s, 0, zero, island_code),
        points(islands, islands.end_s, 0, zero, -island_code),
        points(capacity, capacity.start_s, 0, zero, no_island, capacity.num_gpus),
        points(capacity, capacity.end_s, 0, zero, no_island, -capacity.num_gpus),
    )


def node_sweep(
    allocations: ir.Table, islands: ir.Table, capacity: ir.Table, *, per_node: bool = False
) -> ir.Table:
    """The intervals between changes on each node that matter: down, or above capacity.

    Columns: ``cluster, node, start_s, end_s, in_use`` (GPUs held by jobs), ``node_gpus`` (GPUs
    installed then), ``down`` (the node was in a down island), ``planned``. Every other interval is
    a node in service within its capacity, which the ledger needs no row for (its idle time is what
    is left). The installed GPUs are a running sum too: a node's capacity can change over time.

    The changes are sorted on one integer, node then time (``_sweep_key``), and summed in that
    order. Every node's changes add up to zero (each start has its end), so a running sum over
    many nodes in a row restarts at zero on each node: the sum need not be partitioned by node.
    ``per_node`` partitions it by node anyway (same rows), for engines that spread window
    partitions over their executors (Spark): each node's changes are sorted and summed on their
    own. On DuckDB the ledger runs the same sums as a streaming scan (``scan.scan_sweep``):
    window functions there cost 5 s per running sum at 22M changes.
    """
    changes = sweep_changes(allocations, islands, capacity)
    group_by = changes.key // NODE_SHIFT if per_node else None
    order = ibis.window(group_by=group_by, order_by="key", rows=(None, 0))
    swept = changes.select(
        "key",
        next_key=changes.key.lead().over(order),
        in_use=changes.d_gpus.sum().over(order),
        island=changes.d_down.sum().over(order),
        node_gpus=changes.d_cap.sum().over(order),
    )
    node_id = swept.key // NODE_SHIFT
    same_node = (swept.next_key // NODE_SHIFT) == node_id
    swept = swept.select(
        "in_use",
        "node_gpus",
        node_id=node_id,
        start_s=((swept.key % NODE_SHIFT) // 2).cast("float64"),
        # The node's last change closes everything on it: no interval after it.
        end_s=ibis.cases(
            (same_node, ((swept.next_key % NODE_SHIFT) // 2).cast("float64")),
            else_=ibis.null("float64"),
        ),
        down=swept.island > 0,
        planned=swept.island == 3,
    )
    return named_sweep(swept, capacity)


def named_sweep(swept: ir.Table, capacity: ir.Table) -> ir.Table:
    """The sweep's intervals that matter (down or above capacity), with their nodes' names."""
    swept = swept.join(node_ids(capacity), "node_id").select(swept, "cluster", "node")
    return swept.filter((swept.end_s > swept.start_s) & (swept.down | above_capacity(swept)))


# Sweep keys: node_id * 2**33 + 2 * t (+1 for a job's start). One integer orders changes by node,
# then time, and at the same second ends before starts: a job may start the second another ends.
NODE_SHIFT = 1 << 33
# Times must stay below 2**32 s (2106), or they would spill into the next node's range.


def _sweep_key(node_id: ir.IntegerValue, t: ir.Value, start: int) -> ir.IntegerValue:
    return node_id.cast("int64") * NODE_SHIFT + t.cast("int64") * 2 + start


def above_capacity(swept: ir.Table) -> ir.BooleanValue:
    """The sweep's intervals where jobs held more GPUs than the node had."""
    return swept.in_use > swept.node_gpus + GPU_EPSILON


def down_segments(swept: ir.Table) -> ir.Table:
    """Down GPU-time per node: the node's GPUs no job held while it was in a down island.

    Allocation wins over drain: a draining node still running a job is allocated (the job's own
    segment counts those GPUs).
    """
    down = swept.filter(swept.down & (swept.end_s > swept.start_s))
    sub = ibis.cases((down.planned, DownCause.PLANNED.value), else_=DownCause.UNPLANNED.value)
    return down.select(
        "cluster",
        "node",
        "start_s",
        "end_s",
        category=ibis.literal(Category.DOWN.value),
        subcategory=sub,
        gpus=down.node_gpus - down.in_use,
    )


def over_capacity(swept: ir.Table) -> ir.Table:
    """Nodes whose jobs held more GPUs than they have, with the highest count held."""
    over = swept.filter(above_capacity(swept))
    return over.group_by(["cluster", "node"]).aggregate(
        peak=over.in_use.max(), num_gpus=over.node_gpus.max()
    )
