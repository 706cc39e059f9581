"""Allocated is not used: GPU activity samples, attributed to the jobs that held the GPUs.

The samples are attributed once, at ingest (``gpuyield.attribution``: by job label, by GPU index,
by whole node; the rest counted as unallocated or unattributed, never guessed), and stored grouped
per node, job run and interval (``sample_groups``). A report takes the groups that overlap its
window, clips them to it, and names each run by the window's ``job_key``. A run whose samples
measured more distinct GPUs than it held (labels that contradict the allocation) is charged
nothing: its samples count as unattributed. A sample covers ``[start_s, t_s)`` and a GPU's samples
never overlap, so the GPU-seconds measured inside a run never exceed the run's.

A job's GPU-second measured below the activity threshold (default 1% graphics-engine activity over
the whole sample interval) moves from the job's category to ``idle``, subcategory ``allocated``,
as a pair of signed segments (+idle, -category) carrying the job, user and account, so totals,
breakdowns and time buckets all see the move and conservation holds by construction: no category
of a run loses more than the run held.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

import ibis
import ibis.expr.types as ir
from ibis.common.exceptions import TableNotFound

from gpuyield.attribution import CHARGED, groups_sql
from gpuyield.attribution import IDLE_THRESHOLD as IDLE_THRESHOLD  # its home; importable here
from gpuyield.attribution.rules import ACTIVITY_UNITS, Shape, prepare
from gpuyield.categories import Category, IdleCause
from gpuyield.sqltext import identifier
from gpuyield.store import connection_of

#: The subcategory of ``idle`` that allocated-but-idle GPU time moves to (categories.py's).
ALLOCATED = IdleCause.ALLOCATED.value


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
    """True when the store holds utilization samples."""
    try:
        table = backend.table("gpu_series")
    except TableNotFound:
        return False
    return bool(table.count().to_pyarrow().as_py())


def window_groups(
    backend: ibis.BaseBackend,
    jobs: ir.Table,
    window_start_s: int,
    window_end_s: int,
    threshold: float,
) -> ir.Table:
    """The attributed sample groups overlapping the window, clipped to it: ``how, job_key,
    u_start_s, u_end_s`` and the sums (``_SUMS``), one row per attribution, run
    and interval. ``jobs`` are the window's (``clipped_jobs``): a run is named by its
    ``job_key``; a run that measured more GPUs than it held is charged nothing."""
    raw = _stored_groups(backend, threshold)
    inside = raw.filter((raw.end_s > window_start_s) & (raw.start_s < window_end_s))
    inside = inside.mutate(
        u_start_s=ibis.greatest(inside.start_s, ibis.literal(window_start_s)).cast("float64"),
        u_end_s=ibis.least(inside.end_s, ibis.literal(window_end_s)).cast("float64"),
    )
    refs = backend.table("sample_jobs").select("job_ref", "cluster", "job_id_raw", "submit_s")
    refs = refs.distinct()
    keys = jobs.select("job_key", k_cluster="cluster", k_raw="job_id_raw", k_submit="submit_s")
    named = refs.join(
        keys,
        [
            refs.cluster == keys.k_cluster,
            refs.job_id_raw == keys.k_raw,
            refs.submit_s == keys.k_submit,
        ],
    ).select(r_ref="job_ref", r_key="job_key")
    over = _over_allocated(backend)
    joined = inside.left_join(named, inside.job_ref == named.r_ref)
    joined = joined.left_join(over, joined.job_ref == over.o_ref)
    charged = joined.how.isin(CHARGED)
    how = ibis.ifelse(charged & joined.o_ref.notnull(), "unattributed", joined.how)
    flat = joined.select(
        "u_start_s",
        "u_end_s",
        *_SUMS,
        how=how,
        job_key=ibis.ifelse(charged & joined.o_ref.isnull(), joined.r_key, ibis.null("int64")),
    )
    return flat.group_by(["how", "job_key", "u_start_s", "u_end_s"]).aggregate(
        **{name: flat[name].sum() for name in _SUMS}
    )


def _stored_groups(backend: ibis.BaseBackend, threshold: float) -> ir.Table:
    """``sample_groups`` as stored (attributed at ingest with ``IDLE_THRESHOLD``), or the same
    attribution computed now into a temporary table for another threshold (DuckDB only)."""
    if threshold == IDLE_THRESHOLD:
        return backend.table("sample_groups")
    con = connection_of(backend, needed_for="an idle threshold other than the stored one")
    name = f"gy_groups_{uuid.uuid4().hex[:12]}"
    shape = Shape.of(con)
    prepare(con, regions=False, shape=shape)
    con.execute(
        f"CREATE TEMP TABLE {identifier(name)} AS {groups_sql(regions=False, shape=shape)}",
        {"threshold": threshold},
    )
    return backend.table(name)


def _over_allocated(backend: ibis.BaseBackend) -> ir.Table:
    """``o_ref``: runs whose charged samples measured more distinct GPUs than the run held."""
    measured = backend.table("sample_job_gpus")
    measured = measured.group_by("job_ref").aggregate(m_gpus=measured.gpus_measured.sum())
    held = backend.table("sample_jobs")
    held = held.group_by("job_ref").aggregate(h_gpus=held.gpus.sum())
    both = measured.join(held, "job_ref")
    over = both.filter(both.m_gpus.cast("float64") > both.h_gpus + 1e-9)
    return over.select(o_ref="job_ref")


#: Weights (interval lengths) are summed in milliseconds, as integers; activity sums arrive in
#: billionths (``ACTIVITY_UNITS``): integer sums are exact, so the figures do not depend on the
#: order in which parallel threads add them up (float sums did, in the 16th digit).
_WEIGHT_UNITS = 1_000


def _exact_sum(weight_units: ir.IntegerColumn, amount: ir.IntegerColumn) -> ir.DecimalScalar:
    """The sum of products, in 38 decimal digits (a product alone can pass 64 bits)."""
    decimal = "decimal(38, 0)"
    return (weight_units.cast(decimal) * amount.cast(decimal)).cast(decimal).sum()


# What the cut carries of a group of samples (beside its interval).
_SUMS = ("samples", "idle_samples", "active_sum", "tensor_sum", "tensor_samples")


def on_segments(groups: ir.Table, job_segments: ir.Table) -> ir.Table:
    """Attributed sample groups (``window_groups``) cut by the job's segments: one row per group and
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


def summarize(groups: ir.Table, cut: ir.Table, threshold: float) -> UtilizationSummary:
    """Counts by attribution; activity per category; GPU-seconds moved per category key."""
    counts = {
        r["how"]: int(r["n"])
        for r in groups.group_by("how").aggregate(n=groups.samples.sum()).to_pyarrow().to_pylist()
    }
    unmatched = counts.get("label_unmatched", 0)
    samples = SampleCounts(
        total=sum(counts.values()),
        by_job_label=counts.get("label", 0),
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
        "active": _WEIGHT_UNITS * ACTIVITY_UNITS,
        "tensor": _WEIGHT_UNITS * ACTIVITY_UNITS,
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
