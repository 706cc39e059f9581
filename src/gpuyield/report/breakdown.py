"""Breakdowns of the ledger: by account, user, partition, run or job, and over time (day or hour).

``job`` rows name the input line each job came from (``sacct.psv:1234``), so any number of the
report can be traced back to the records behind it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import ibis
import ibis.expr.types as ir

from gpuyield.categories import IDLE_ALLOCATED, Category
from gpuyield.errors import FieldError
from gpuyield.ledger import Ledger
from gpuyield.ledger.plan import materialize
from gpuyield.ledger.sums import exact_sum, gpu_seconds, units_sum
from gpuyield.ledger.weights.weighted import Weight
from gpuyield.times import iso_utc

DIMENSIONS = ("account", "user", "partition", "run", "job", "day", "hour", "cluster")
_COLUMN = {"account": "account", "user": "user_name", "partition": "partition", "run": "run"}
_BUCKET_S = {"day": 86400, "hour": 3600}
UNALLOCATED = "(not allocated)"
NO_VALUE = "(none)"
OTHERS = "(others)"
# Rows of a job or run breakdown unless asked for more: a cluster runs millions of jobs, and
# experiments often name a run per job.
DEFAULT_TOP = {"job": 20, "run": 20}


@dataclass(frozen=True, kw_only=True, slots=True)
class BreakdownRow:
    """GPU-seconds per category for one group."""

    key: str
    """Group label (account name, ISO day, ...)."""
    categories: dict[str, float]
    """GPU-seconds per category for this group."""
    attributes: dict[str, str | None] = field(default_factory=dict)
    """More about the group (a job's run, state and ``source`` file:line)."""

    @property
    def total_gpu_seconds(self) -> float:
        """Sum over categories."""
        return sum(self.categories.values())


@dataclass(frozen=True, kw_only=True, slots=True)
class Breakdown:
    """The rows of one breakdown; with ``top``, the rest summed in one ``(others)`` row."""

    by: str
    """The dimension."""
    rows: list[BreakdownRow]
    """Largest groups first (time buckets: in time order), then others and unallocated."""
    groups: int
    """How many groups there are in all (more than the rows shown when cut at ``top``)."""
    top: int | None
    """The cut, None for every group."""
    unit: str = "gpu_seconds"
    """What the rows count: GPU-seconds, or a weight's unit (``report --weight``, ledger/weights)."""
    weights: dict[str, Weight] = field(default_factory=dict)
    """With a weight: each GPU type's weight (or prices), as stated in ``weighted``."""

    def to_dict(self) -> dict[str, Any]:
        """The ``--json`` shape (the ``breakdown`` key of ``gpuyield report --by X --json``)."""
        weighted = (
            {}
            if self.unit == "gpu_seconds"
            else {
                "unit": self.unit,
                "weights": {
                    k: [p.to_dict() for p in w] if isinstance(w, list) else w
                    for k, w in self.weights.items()
                },
            }
        )
        return {
            "by": self.by,
            "groups": self.groups,
            "top": self.top,
            **weighted,
            "rows": [{"key": r.key, **r.attributes, "categories": r.categories} for r in self.rows],
        }


# The largest --top: more groups than any store has, and far below what SQL's LIMIT can hold
# (2**63 and up were a traceback).
MAX_TOP = 1_000_000_000


def breakdown(
    ledger: Ledger, by: str, *, top: int | None = None, backend: ibis.BaseBackend | None = None
) -> Breakdown:
    """Group the ledger by a job attribute or by job, or bucket it in time.

    ``top`` keeps the largest groups (job and run breakdowns keep 20 unless told; 0 means all);
    the rest become one ``(others)`` row, so the rows still add up to the report's totals.
    ``backend`` is needed for ``job`` (the store's lines and files).
    """
    if by not in DIMENSIONS:
        raise FieldError(
            "report.by",
            f": cannot break down by {by!r}",
            hint=f"choose one of {', '.join(DIMENSIONS)}",
        )
    if top is not None and not 0 <= top <= MAX_TOP:
        raise FieldError(
            "report.top", f"must be from 0 to {MAX_TOP:,}, not {top}", hint="0 shows every group"
        )
    top = DEFAULT_TOP.get(by) if top is None else top
    if by == "job":
        assert backend is not None, "a job breakdown reads the store"
        return _by_job(ledger, backend, top or None)
    if by == "cluster":
        rows = _by_cluster(ledger)
        return Breakdown(by=by, rows=rows, groups=len(rows), top=None)
    if by in _BUCKET_S:
        rows = _by_time(ledger, _BUCKET_S[by])
        return Breakdown(by=by, rows=rows, groups=len(rows), top=None)
    return _by_attribute(ledger, by, top or None)


def _by_attribute(ledger: Ledger, by: str, top: int | None) -> Breakdown:
    """Groups of a job attribute (a missing value is one group, labelled as printed)."""
    segments = ledger.segments.filter(ledger.segments.category != Category.DOWN.value)
    gpu_s = (segments.end_s - segments.start_s) * segments.gpus
    label = segments[_COLUMN[by]].fill_null(NO_VALUE).name("label")
    grouped = segments.group_by([label, "category"]).aggregate(gpu_s=exact_sum(gpu_s))
    ordered, groups = _ordered(_largest_first(grouped, "label", top))
    rows = [BreakdownRow(key=OTHERS if k is None else k, categories=c) for k, c in ordered]
    return Breakdown(
        by=by,
        rows=[*rows, _unallocated(ledger)],
        groups=groups,
        top=top if top is not None and groups > top else None,
    )


def _largest_first(grouped: ir.Table, key: str, top: int | None, *, exact: bool = True) -> ir.Table:
    """``grouped`` (``key, category, gpu_s``) cut by the engine, so only the rows shown reach
    Python (a cluster has millions of jobs, and can have as many runs).

    Columns ``key, order, category, gpu_s, groups``: each group's place (largest total first,
    equal totals by key, so the same store always prints the same order); past ``top``, the
    groups folded into one with a null key and order -1; ``groups`` counts them all.
    ``exact``: ``gpu_s`` is in exact units (ledger/sums.py); otherwise plain floats (a weight's
    unit, such as dollars, whose small values micro-units would round away).
    """

    def total(values: ir.NumericColumn) -> ir.NumericScalar:
        return units_sum(values) if exact else values.sum()

    totals = grouped.group_by(key).aggregate(total=total(grouped.gpu_s))
    order = [ibis.desc("total"), key]
    # A top-N pick, not a sort of every group: the rest is told by the join finding no place.
    chosen = totals if top is None else totals.order_by(order).limit(top)
    chosen = chosen.mutate(place=ibis.row_number().over(order_by=order)).drop("total")
    cut = grouped.left_join(chosen, grouped[key] == chosen[key])
    shown = cut.place.notnull()
    return cut.group_by(
        ibis.ifelse(shown, cut[key], ibis.null(cut[key].type())).name(key),
        cut.place.fill_null(-1).name("order"),
        "category",
    ).aggregate(gpu_s=total(cut.gpu_s), groups=totals.count().as_scalar())


def _ordered(
    cut: ir.Table, *, exact: bool = True
) -> tuple[list[tuple[Any, dict[str, float]]], int]:
    """``_largest_first``'s groups as (key, GPU-seconds per category), in order, the folded rest
    (key None) last; and how many groups there are."""
    key = cut.columns[0]
    by_place: dict[int, tuple[Any, dict[str, float]]] = {}
    groups = 0
    for r in cut.to_pyarrow().to_pylist():
        groups = int(r["groups"])
        place = int(r["order"]) if r["order"] >= 0 else groups  # the rest after the groups kept
        _, cats = by_place.setdefault(place, (r[key], {c.value: 0.0 for c in Category}))
        cats[r["category"]] += gpu_seconds(r["gpu_s"]) if exact else float(r["gpu_s"])
    return [by_place[place] for place in sorted(by_place)], groups


def _by_cluster(ledger: Ledger) -> list[BreakdownRow]:
    """Each cluster of the store as a report of its own: every category, down and idle included
    (a cluster's idle is its installed capacity less its down and allocated time)."""
    segments = ledger.segments
    gpu_s = exact_sum((segments.end_s - segments.start_s) * segments.gpus)
    used = segments.group_by(["cluster", "category"]).aggregate(gpu_s=gpu_s)
    capacity = ledger.capacity
    installed = capacity.group_by("cluster").aggregate(
        gpu_s=exact_sum((capacity.end_s - capacity.start_s).cast("float64") * capacity.num_gpus)
    )
    per_cluster: dict[str, dict[str, float]] = {
        r["cluster"]: {c.value: 0.0 for c in Category}
        | {Category.IDLE.value: gpu_seconds(r["gpu_s"])}
        for r in installed.to_pyarrow().to_pylist()
    }
    # In one order on every engine: idle is what is left after each category, in floats.
    for r in sorted(used.to_pyarrow().to_pylist(), key=lambda r: (r["cluster"], r["category"])):
        cats = per_cluster.setdefault(r["cluster"], {c.value: 0.0 for c in Category})
        cats[r["category"]] += gpu_seconds(r["gpu_s"])
        cats[Category.IDLE.value] -= gpu_seconds(r["gpu_s"])
    return [BreakdownRow(key=k, categories=per_cluster[k]) for k in sorted(per_cluster)]


def _unallocated(ledger: Ledger) -> BreakdownRow:
    """Down and idle time belong to no job: one row, so a breakdown adds up to installed."""
    categories = {c.value: 0.0 for c in Category}
    categories[Category.DOWN.value] = ledger.categories[Category.DOWN]
    # Allocated-but-idle time is in the jobs' rows (utilization samples): only the rest is here.
    allocated_idle = ledger.subcategories.get(IDLE_ALLOCATED, 0.0)
    categories[Category.IDLE.value] = ledger.categories[Category.IDLE] - allocated_idle
    return BreakdownRow(key=UNALLOCATED, categories=categories)


def _by_job(ledger: Ledger, backend: ibis.BaseBackend, top: int | None) -> Breakdown:
    """The jobs with the most GPU time, with the run, state and input line of each."""
    segments = ledger.segments.filter(ledger.segments.category != Category.DOWN.value)
    per_job = segments.group_by(["job_key", "category"]).aggregate(
        gpu_s=exact_sum((segments.end_s - segments.start_s) * segments.gpus)
    )
    # Read three times by the cut (its rows, the top, the count): summed once.
    per_job = materialize(backend, "gy_per_job", per_job)
    # Read twice below (the rows, the kept jobs' attributes): cut once. Equal totals in input
    # order (job_key is the ingest and line).
    cut = materialize(backend, "gy_job_cut", _largest_first(per_job, "job_key", top))
    ordered, groups = _ordered(cut)
    kept = cut.filter(cut.order >= 0).select("job_key").distinct()
    jobs = backend.table("jobs").select("job_key", "job_id", "state", "line", "ingest_id")
    files = backend.table("ingests").select("ingest_id", "path")
    runs = ledger.jobs.select("job_key", "run")
    info = kept.join(jobs, "job_key").join(files, "ingest_id").left_join(runs, "job_key")
    about = {r["job_key"]: r for r in info.to_pyarrow().to_pylist()}
    rows = [
        BreakdownRow(key=OTHERS, categories=cats)
        if key is None
        else BreakdownRow(
            key=str(about[key]["job_id"]),
            categories=cats,
            attributes={
                "run": about[key]["run"],
                "state": about[key]["state"],
                "source": f"{about[key]['path']}:{about[key]['line']}",
            },
        )
        for key, cats in ordered
    ]
    rows.append(_unallocated(ledger))
    return Breakdown(by="job", rows=rows, groups=groups, top=top)


def _by_time(ledger: Ledger, bucket_s: int) -> list[BreakdownRow]:
    """Per bucket: categories of segments clipped to the bucket; idle is what capacity has left."""
    window = ledger.window
    first = window.start_s - window.start_s % bucket_s
    starts = list(range(first, window.end_s, bucket_s)) or [first]
    totals = bucket_totals(ledger, bucket_s, starts)
    return [
        BreakdownRow(
            key=iso_utc(start)[: 10 if bucket_s == 86400 else 16], categories=totals[start]
        )
        for start in starts
    ]


def bucket_totals(ledger: Ledger, bucket_s: int, starts: list[int]) -> dict[int, dict[str, float]]:
    """GPU-seconds per bucket and category; idle is what the bucket's capacity has left."""
    grid = _Grid(first_s=starts[0], last_s=starts[-1], bucket_s=bucket_s)
    segments = _clip(ledger.segments, grid)
    by_category = segments.group_by(["bucket_s", "category"]).aggregate(
        gpu_s=exact_sum((segments.end_s - segments.start_s) * segments.gpus)
    )
    capacity = _clip(ledger.capacity.mutate(gpus=ledger.capacity.num_gpus.cast("float64")), grid)
    installed = capacity.group_by("bucket_s").aggregate(
        gpu_s=exact_sum((capacity.end_s - capacity.start_s) * capacity.gpus)
    )
    out = {start: {c.value: 0.0 for c in Category} for start in starts}
    for row in by_category.to_pyarrow().to_pylist():
        out[row["bucket_s"]][row["category"]] += gpu_seconds(row["gpu_s"])
    for row in installed.to_pyarrow().to_pylist():
        cats = out[row["bucket_s"]]
        cats[Category.IDLE.value] = gpu_seconds(row["gpu_s"]) - sum(
            v for k, v in cats.items() if k != Category.IDLE.value
        )
    return out


@dataclass(frozen=True, kw_only=True, slots=True)
class _Grid:
    """Buckets of ``bucket_s`` seconds starting at ``first_s``, the last one starting at
    ``last_s``."""

    first_s: int
    last_s: int
    bucket_s: int


def _clip(table: ir.Table, grid: _Grid) -> ir.Table:
    """One row per bucket a row of ``table`` overlaps (``bucket_s``, ``bucket_end_s``), its times
    clipped to the bucket.

    Each row's buckets come from its own times (a range per row, unnested), not from joining
    every row with every bucket: DuckDB runs that range join as a nested loop, rows x buckets,
    which on 10M jobs over 300 days by the hour is 10^11 comparisons (hours). The range holds
    the buckets the join's ``start_s < bucket_end_s and end_s > bucket_s`` holds: from the bucket
    the row starts in (or the first) to the last one starting before its end (or the last).
    """
    step = grid.bucket_s
    start_s, end_s = table.start_s.cast("float64"), table.end_s.cast("float64")
    from_start = ((start_s - grid.first_s) / step).floor().cast("int64") * step + grid.first_s
    low = ibis.greatest(from_start, ibis.literal(grid.first_s, "int64"))
    # A bucket start is whole seconds: it lies before end_s exactly when it lies before ceil.
    high = ibis.least(end_s.ceil().cast("int64"), ibis.literal(grid.last_s + 1, "int64"))
    cut = table.mutate(bucket_s=ibis.range(low, high, step).unnest())
    cut = cut.mutate(bucket_end_s=cut.bucket_s + step)
    return cut.mutate(
        start_s=ibis.greatest(cut.start_s, cut.bucket_s.cast("float64")),
        end_s=ibis.least(cut.end_s, cut.bucket_end_s.cast("float64")),
    )
