"""Allocated is not used: GPU activity samples joined to the jobs that held the GPUs.

A sample is one GPU over ``[t_s - step_s, t_s)``. It belongs to a job
1. by the job label the exporter put on it (``hpc_job``, jobstats' ``nvidia_gpu_jobId``), or
2. by its GPU index, when a job held that GPU of that node at the sample's midpoint
   (``job_gpus``: ``scontrol -d show job`` captured while the job ran, ingest/jobs_detail.py), or
3. by its node, when exactly one job held GPUs there at the sample's midpoint and that job held
   the whole node (then every GPU of the node was the job's).
Anything else on a node where jobs ran is *unattributed*: counted and shown, never guessed (a job
whose GPU indices were never captured shared the node; or two jobs claim the same GPU). An
unlabelled sample of a GPU no job held, on a node where every job there at the time has known
indices, is unallocated. Samples of nodes no job held measure unallocated GPUs and change
nothing. Time no sample covers is unmeasured, not idle.

A job's GPU-second measured below the activity threshold (default 1% graphics-engine activity over
the whole sample interval) moves from the job's category to ``idle``, subcategory ``allocated``,
as a pair of signed segments (+idle, -category) carrying the job, user and account, so totals,
breakdowns and time buckets all see the move and conservation holds by construction.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import ibis
import ibis.expr.types as ir
from ibis.common.exceptions import TableNotFound

from gpuyield.categories import Category

#: Below this graphics-engine activity a sample interval counts as idle (1%: DCGM reports a GPU
#: with a context open and no kernels at 0%, and a running job rarely averages under 1% a minute).
IDLE_THRESHOLD = 0.01
#: The subcategory of ``idle`` that allocated-but-idle GPU time moves to.
ALLOCATED = "allocated"
IDLE_ALLOCATED = f"{Category.IDLE.value}.{ALLOCATED}"


@dataclass(frozen=True, kw_only=True, slots=True)
class CategoryActivity:
    """What the samples measured of one category's job time (before idle time moved out)."""

    measured_gpu_seconds: float
    """Job GPU-seconds of this category that samples covered."""
    idle_gpu_seconds: float
    """Of those, measured idle: moved to ``idle.allocated``."""
    active_share: float | None
    """Mean graphics-engine activity over the measured GPU-seconds (0..1)."""
    tensor_share: float | None
    """Mean tensor-pipe activity over the GPU-seconds where it was measured (0..1)."""
    tensor_measured_gpu_seconds: float
    """GPU-seconds with a tensor-pipe sample (DCGM profiling metrics are not always on)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class SampleCounts:
    """How the samples in the window were attributed."""

    total: int
    """Samples overlapping the window."""
    by_job_label: int
    """Attributed by the exporter's job label."""
    by_gpu_index: int
    """Attributed by node and GPU index: the job Slurm said held that GPU (``job_gpus``)."""
    by_whole_node: int
    """Attributed by node: the one job holding the whole node."""
    unallocated: int
    """On nodes no job held GPUs on at the time, or GPUs no job held on a node whose jobs' GPU
    indices are all known: unallocated GPUs, no job to charge."""
    unattributed: int
    """On nodes where jobs ran but no job could be named (shared node without a label and a job
    of unknown GPU indices, a label of no known job, a GPU two jobs claim, a node missing from
    the inventory)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class UtilizationSummary:
    """Measured activity: the ledger's view of the samples."""

    threshold: float
    """Activity below which a sample interval is idle."""
    samples: SampleCounts
    """Attribution counts."""
    activity: dict[str, CategoryActivity] = field(default_factory=dict)
    """Per allocated category."""
    idle_allocated_gpu_seconds: float = 0.0
    """Job GPU-seconds measured idle (the ``idle.allocated`` subcategory)."""
    moved: dict[str, float] = field(default_factory=dict)
    """GPU-seconds moved out of each ``category`` and ``category.subcategory`` key."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Utilization:
    """The summary, and the signed segments that move idle time (for breakdowns)."""

    summary: UtilizationSummary
    """Totals."""
    segments: ir.Table = field(repr=False)
    """+idle.allocated / -category pairs, with the job segments' columns."""


def has_samples(backend: ibis.BaseBackend) -> bool:
    """True when the store holds utilization samples (older stores lack the table)."""
    try:
        table = backend.table("gpu_samples")
    except TableNotFound:
        return False
    return bool(table.count().to_pyarrow().as_py())


def sample_intervals(
    backend: ibis.BaseBackend, node_ids: ir.Table, window_start_s: int, window_end_s: int
) -> ir.Table:
    """Samples clipped to the window, with the node's id (null where the inventory lacks it)."""
    raw = backend.table("gpu_samples")
    start = ibis.greatest(raw.t_s - raw.step_s, ibis.literal(window_start_s)).cast("float64")
    end = ibis.least(raw.t_s, ibis.literal(window_end_s)).cast("float64")
    samples = raw.mutate(u_start_s=start, u_end_s=end).filter(lambda t: t.u_end_s > t.u_start_s)
    ids = node_ids.select(id_cluster="cluster", id_node="node", node_id="node_id")
    # Hashed on the node name; the cluster is checked where the samples name one.
    joined = samples.left_join(
        ids,
        [
            samples.node == ids.id_node,
            samples.cluster.isnull() | (samples.cluster == ids.id_cluster),
        ],
    )
    return joined.select(
        "node",
        "gpu",
        "t_s",
        "job_id",
        "active",
        "tensor_active",
        "u_start_s",
        "u_end_s",
        "node_id",
    )


# What later steps read of an attributed sample (beside ``job_key`` and ``how``).
_KEPT = ("active", "tensor_active", "u_start_s", "u_end_s")


def held_gpus(backend: ibis.BaseBackend, jobs: ir.Table, node_ids: ir.Table) -> ir.Table | None:
    """``job_key, node_id, gpu``: the GPU indices Slurm said each job run held (``job_gpus``,
    joined to the run by cluster, JobIDRaw and start). None when the store has none (older stores
    lack the table): attribution is then by label and whole node only, as before."""
    try:
        raw = backend.table("job_gpus")
    except TableNotFound:
        return None
    if not raw.count().to_pyarrow().as_py():
        return None
    runs = jobs.select("job_key", h_cluster="cluster", h_raw="job_id_raw", h_start="start_s")
    on_run = [raw.cluster == runs.h_cluster, raw.job_id_raw == runs.h_raw,
              raw.start_s == runs.h_start]  # fmt: skip
    joined = raw.join(runs, on_run)
    ids = node_ids.select(n_cluster="cluster", n_node="node", node_id="node_id")
    joined = joined.join(ids, [joined.cluster == ids.n_cluster, joined.node == ids.n_node])
    return joined.select("job_key", "node_id", "gpu").distinct()


def attribute(
    samples: ir.Table,
    jobs: ir.Table,
    allocations: ir.Table,
    capacity: ir.Table,
    held: ir.Table | None = None,
) -> ir.Table:
    """Every sample with ``how`` (label, gpu, node, unallocated, unattributed) and its
    ``job_key``; ``held`` (``held_gpus``) names the GPUs jobs held, None when none are known."""
    return _by_label(samples, jobs, allocations).union(
        _by_node(samples, allocations, capacity, held)
    )


def _by_label(samples: ir.Table, jobs: ir.Table, allocations: ir.Table) -> ir.Table:
    labelled = samples.filter(samples.job_id.notnull())
    # The label names the job; the node and time must agree with one of the job's allocations
    # (a requeued job keeps its id on other nodes: its first run's GPUs are not its second's).
    # Exporters label with SLURM_JOB_ID, sacct's JobIDRaw (an array task's own id, not 12_3).
    ids = jobs.select("job_key", l_raw="job_id_raw")
    held = allocations.join(ids, "job_key").select(
        l_job_key="job_key", l_raw="l_raw", l_node="node_id", l_s="start_s", l_e="end_s"
    )
    by_label = labelled.left_join(
        held,
        [
            labelled.job_id == held.l_raw,
            labelled.node_id == held.l_node,
            held.l_s < labelled.u_end_s,
            held.l_e > labelled.u_start_s,
        ],
    )
    return by_label.select(
        *_KEPT,
        job_key=by_label.l_job_key,
        how=ibis.ifelse(by_label.l_job_key.notnull(), "label", "label_unmatched"),
    )


def _by_node(
    samples: ir.Table, allocations: ir.Table, capacity: ir.Table, held: ir.Table | None
) -> ir.Table:
    """Unlabelled samples: the job holding that GPU (``held``) at the sample's midpoint, else the
    job holding the whole node then, if one did.

    A job holding every GPU of a node is the only job there (the ledger refuses a node held
    beyond its GPUs), so at most one such allocation covers an instant: a join, not a count.
    """
    unlabelled = samples.filter(samples.job_id.isnull())
    unlabelled = unlabelled.mutate(mid_s=(unlabelled.u_start_s + unlabelled.u_end_s) / 2)
    by_index = None
    if held is not None:
        by_index, unlabelled = _by_gpu_index(unlabelled, allocations, held)
    whole = capacity.group_by("node_id").aggregate(node_gpus=capacity.num_gpus.max())
    alloc = allocations.join(whole, "node_id").select(
        a_node="node_id",
        a_job_key="job_key",
        a_s="start_s",
        a_e="end_s",
        a_whole=allocations.gpus >= whole.node_gpus.cast("float64") - 1e-9,
    )
    whole_alloc = alloc.filter(alloc.a_whole)
    on_whole = unlabelled.left_join(
        whole_alloc,
        [
            unlabelled.node_id == whole_alloc.a_node,
            whole_alloc.a_s <= unlabelled.mid_s,
            whole_alloc.a_e > unlabelled.mid_s,
        ],
    )
    matched = on_whole.filter(on_whole.a_job_key.notnull()).select(
        *_KEPT, job_key=on_whole.a_job_key, how=ibis.literal("node")
    )
    rest = on_whole.filter(on_whole.a_job_key.isnull()).select(*unlabelled.columns)
    # Jobs that held part of the node, GPU indices unknown (sacct has none): the GPU may be theirs.
    # A job of known indices held other GPUs (had it held this one, it took the sample above).
    unknown = alloc if held is None else _unknown_indices(alloc, held)
    overlapping = [
        rest.node_id == unknown.a_node,
        unknown.a_s <= rest.mid_s,
        unknown.a_e > rest.mid_s,
    ]
    shared = rest.semi_join(unknown, overlapping).select(
        *_KEPT, job_key=ibis.null("int64"), how=ibis.literal("unattributed")
    )
    free = rest.anti_join(unknown, overlapping)
    # No job there: an unallocated GPU; a node missing from the inventory cannot be told.
    free = free.select(
        *_KEPT,
        job_key=ibis.null("int64"),
        how=ibis.ifelse(free.node_id.isnull(), "unattributed", "unallocated"),
    )
    by_node = matched.union(shared).union(free)
    return by_node if by_index is None else by_index.union(by_node)


def _by_gpu_index(
    unlabelled: ir.Table, allocations: ir.Table, held: ir.Table
) -> tuple[ir.Table, ir.Table]:
    """Unlabelled samples of a GPU a job held at the sample's midpoint; and the others.

    Slurm gives a GPU to one job at a time: should two jobs' captured indices claim the same GPU
    at once (contradictory inputs), the sample is unattributed, not given to both.
    """
    runs = allocations.select(g_job_key="job_key", g_node="node_id", g_s="start_s", g_e="end_s")
    gpus = held.select(h_job_key="job_key", h_node="node_id", g_gpu="gpu")
    alloc = runs.join(gpus, [runs.g_job_key == gpus.h_job_key, runs.g_node == gpus.h_node])
    alloc = alloc.select("g_job_key", "g_node", "g_s", "g_e", "g_gpu")
    on = [
        unlabelled.node_id == alloc.g_node,
        unlabelled.gpu == alloc.g_gpu,
        alloc.g_s <= unlabelled.mid_s,
        alloc.g_e > unlabelled.mid_s,
    ]
    found = unlabelled.join(alloc, on)
    sample = ibis.window(group_by=[found.node_id, found.gpu, found.t_s])
    found = found.mutate(g_claims=found.g_job_key.count().over(sample))
    one = found.filter(found.g_claims == 1)
    matched = one.select(*_KEPT, job_key=one.g_job_key, how=ibis.literal("gpu"))
    many = found.filter(found.g_claims > 1).select(*_KEPT, "node_id", "gpu", "t_s").distinct()
    contested = many.select(*_KEPT, job_key=ibis.null("int64"), how=ibis.literal("unattributed"))
    return matched.union(contested), unlabelled.anti_join(alloc, on)


def _unknown_indices(alloc: ir.Table, held: ir.Table) -> ir.Table:
    """The allocations (``_by_node``'s columns) whose GPU indices on their node are not known."""
    known = held.select(k_job_key="job_key", k_node="node_id").distinct()
    return alloc.anti_join(
        known, [alloc.a_job_key == known.k_job_key, alloc.a_node == known.k_node]
    )


def grouped(attributed: ir.Table, threshold: float) -> ir.Table:
    """Attributed samples of one job and one interval taken together (the GPUs of a node, read
    at the same instant): the cut, the sums and the idle moves weigh a sample by its interval
    only, so sums over the group are exact, and the tables that follow are a GPU count smaller.
    ``idle_samples`` are those below ``threshold``; a sample without graphics-engine activity
    (only tensor pipes measured) counts as measured, not idle, as before the grouping."""
    return attributed.group_by(["how", "job_key", "u_start_s", "u_end_s"]).aggregate(
        samples=attributed.count(),
        idle_samples=(attributed.active < threshold).sum(),
        active_sum=_in_units(attributed.active).sum(),
        tensor_sum=_in_units(attributed.tensor_active).sum(),
        tensor_samples=attributed.tensor_active.count(),
    )


#: Activity is summed in billionths, weights in milliseconds, as integers: integer sums are exact,
#: so the figures do not depend on the order in which parallel threads add them up (float sums
#: did: two computations of one report differed in the 16th digit).
_ACTIVITY_UNITS = 1_000_000_000
_WEIGHT_UNITS = 1_000


def _in_units(activity: ir.FloatingColumn) -> ir.IntegerColumn:
    return (activity * _ACTIVITY_UNITS).round().cast("int64")


def _exact_sum(weight_units: ir.IntegerColumn, amount: ir.IntegerColumn) -> ir.DecimalScalar:
    """The sum of products, in 38 decimal digits (a product alone can pass 64 bits)."""
    decimal = "decimal(38, 0)"
    return (weight_units.cast(decimal) * amount.cast(decimal)).cast(decimal).sum()


# What the cut carries of a group of samples (beside its interval).
_SUMS = ("samples", "idle_samples", "active_sum", "tensor_sum", "tensor_samples")


def on_segments(groups: ir.Table, job_segments: ir.Table) -> ir.Table:
    """Attributed sample groups (``grouped``) cut by the job's segments: one row per group and
    segment overlap.

    ``sign`` carries the segment's sign (overhead pairs a +overhead with a -released segment),
    so a stall measured idle moves out of overhead, not out of released twice.
    """
    owned = groups.filter(groups.job_key.notnull()).select(
        "u_start_s", "u_end_s", *_SUMS, u_job_key="job_key"
    )
    seg = job_segments.filter(job_segments.job_key.notnull())
    joined = owned.join(
        seg,
        [
            owned.u_job_key == seg.job_key,
            seg.start_s < owned.u_end_s,
            seg.end_s > owned.u_start_s,
        ],
    )
    o_start = ibis.greatest(joined.u_start_s, joined.start_s)
    o_end = ibis.least(joined.u_end_s, joined.end_s)
    sign = ibis.ifelse(joined.gpus < 0, -1.0, 1.0)
    return joined.select(
        *[c for c in job_segments.columns if c not in ("start_s", "end_s", "gpus")],
        *_SUMS,
        start_s=o_start,
        end_s=o_end,
        sign=sign,
    )


def idle_segments(cut: ir.Table, columns: list[str]) -> ir.Table:
    """The signed pairs that move idle sample time from the job's category to idle.allocated
    (one pair per group, as many GPUs as its idle samples); ``columns`` are the job segments'
    columns, in their order."""
    idle = cut.filter(cut.idle_samples > 0)
    gpus = idle.sign * idle.idle_samples.cast("float64")
    plus = idle.mutate(
        category=ibis.literal(Category.IDLE.value),
        subcategory=ibis.literal(ALLOCATED),
        gpus=gpus,
    ).select(*columns)
    minus = idle.mutate(gpus=-gpus).select(*columns)
    return plus.union(minus)


def summarize(
    groups: ir.Table, cut: ir.Table, threshold: float, total_labelled: ir.IntegerScalar
) -> UtilizationSummary:
    """Counts by attribution; activity per category; GPU-seconds moved per category key."""
    counts = {
        r["how"]: int(r["n"])
        for r in groups.group_by("how").aggregate(n=groups.samples.sum()).to_pyarrow().to_pylist()
    }
    # A labelled sample of a GPU handed between two runs of one job within a step matches both
    # (each gets its part of the step): count samples, not matches. An unmatched one has one row.
    labelled = int(total_labelled.to_pyarrow().as_py())
    unmatched = counts.get("label_unmatched", 0)
    node_side = sum(counts.get(k, 0) for k in ("gpu", "node", "unallocated", "unattributed"))
    samples = SampleCounts(
        total=labelled + node_side,
        by_job_label=labelled - unmatched,
        by_gpu_index=counts.get("gpu", 0),
        by_whole_node=counts.get("node", 0),
        unallocated=counts.get("unallocated", 0),
        unattributed=counts.get("unattributed", 0) + unmatched,
    )
    weight = ((cut.end_s - cut.start_s) * cut.sign * _WEIGHT_UNITS).round().cast("int64")
    grouped_sums = cut.group_by(["category", "subcategory"]).aggregate(
        measured=_exact_sum(weight, cut.samples),
        idle=_exact_sum(weight, cut.idle_samples),
        active=_exact_sum(weight, cut.active_sum),
        tensor=_exact_sum(weight, cut.tensor_sum),
        tensor_measured=_exact_sum(weight, cut.tensor_samples),
    )
    scales = {
        "measured": _WEIGHT_UNITS,
        "idle": _WEIGHT_UNITS,
        "active": _WEIGHT_UNITS * _ACTIVITY_UNITS,
        "tensor": _WEIGHT_UNITS * _ACTIVITY_UNITS,
        "tensor_measured": _WEIGHT_UNITS,
    }
    rows = [
        {k: (float(v) / scales[k] if k in scales and v is not None else v) for k, v in r.items()}
        for r in sorted(grouped_sums.to_pyarrow().to_pylist(), key=_category_order)
    ]
    return _summary(rows, threshold, samples)


def _category_order(row: dict[str, object]) -> tuple[int, str]:
    """Categories in the vocabulary's order (the engine returns groups in any order)."""
    order = [c.value for c in Category]
    category = str(row["category"])
    index = order.index(category) if category in order else len(order)
    return index, str(row["subcategory"] or "")


def _summary(
    rows: list[dict[str, object]], threshold: float, samples: SampleCounts
) -> UtilizationSummary:
    """The per-category sums (``measured``, ``idle``, ``active``, ``tensor``,
    ``tensor_measured``, by category and subcategory) as the summary."""
    sums: dict[str, list[float]] = {}
    moved: dict[str, float] = {}
    for r in rows:
        values = [
            float(r[k] or 0.0)  # type: ignore[arg-type]
            for k in ("measured", "idle", "active", "tensor", "tensor_measured")
        ]
        category = str(r["category"])
        acc = sums.setdefault(category, [0.0] * 5)
        for i, v in enumerate(values):
            acc[i] += v
        moved[category] = moved.get(category, 0.0) + values[1]
        if r["subcategory"] is not None:
            key = f"{category}.{r['subcategory']}"
            moved[key] = moved.get(key, 0.0) + values[1]
    activity = {
        category: CategoryActivity(
            measured_gpu_seconds=m,
            idle_gpu_seconds=i,
            active_share=a / m if m > 0 else None,
            tensor_share=t / tm if tm > 0 else None,
            tensor_measured_gpu_seconds=tm,
        )
        for category, (m, i, a, t, tm) in sums.items()
    }
    return UtilizationSummary(
        threshold=threshold,
        samples=samples,
        activity=activity,
        idle_allocated_gpu_seconds=sum(a.idle_gpu_seconds for a in activity.values()),
        moved=moved,
    )


def combined_summaries(parts: list[UtilizationSummary | None]) -> UtilizationSummary | None:
    """One summary of a window with gaps: each captured part's summary summed (shares weighted
    by the GPU-seconds they were measured over); None when no part had samples."""
    present = [p for p in parts if p is not None]
    if not present:
        return None
    counts = {
        f: sum(getattr(p.samples, f) for p in present)
        for f in (
            "total",
            "by_job_label",
            "by_gpu_index",
            "by_whole_node",
            "unallocated",
            "unattributed",
        )
    }
    activity = {}
    for category in dict.fromkeys(c for p in present for c in p.activity):
        each = [p.activity[category] for p in present if category in p.activity]
        m = sum(a.measured_gpu_seconds for a in each)
        tm = sum(a.tensor_measured_gpu_seconds for a in each)
        active = sum((a.active_share or 0.0) * a.measured_gpu_seconds for a in each)
        tensor = sum((a.tensor_share or 0.0) * a.tensor_measured_gpu_seconds for a in each)
        activity[category] = CategoryActivity(
            measured_gpu_seconds=m,
            idle_gpu_seconds=sum(a.idle_gpu_seconds for a in each),
            active_share=active / m if m > 0 else None,
            tensor_share=tensor / tm if tm > 0 else None,
            tensor_measured_gpu_seconds=tm,
        )
    moved: dict[str, float] = {}
    for p in present:
        for key, value in p.moved.items():
            moved[key] = moved.get(key, 0.0) + value
    return UtilizationSummary(
        threshold=present[0].threshold,
        samples=SampleCounts(**counts),
        activity=activity,
        idle_allocated_gpu_seconds=sum(p.idle_allocated_gpu_seconds for p in present),
        moved=moved,
    )
