"""Breakdowns of the ledger: by account, user, partition or run, and over time (day or hour)."""

from __future__ import annotations

from dataclasses import dataclass

import ibis
import ibis.expr.types as ir

from gpuyield.categories import Category
from gpuyield.errors import InputError
from gpuyield.ledger import Ledger

DIMENSIONS = ("account", "user", "partition", "run", "day", "hour")
_COLUMN = {"account": "account", "user": "user_name", "partition": "partition", "run": "run"}
_BUCKET_S = {"day": 86400, "hour": 3600}
UNALLOCATED = "(not allocated)"
NO_VALUE = "(none)"


@dataclass(frozen=True, kw_only=True, slots=True)
class BreakdownRow:
    """GPU-seconds per category for one group."""

    key: str
    """Group label (account name, ISO day, ...)."""
    categories: dict[str, float]
    """GPU-seconds per category for this group."""

    @property
    def total_gpu_seconds(self) -> float:
        """Sum over categories."""
        return sum(self.categories.values())


def breakdown(ledger: Ledger, by: str) -> list[BreakdownRow]:
    """Group the ledger by a job attribute, or bucket it in time."""
    if by not in DIMENSIONS:
        raise InputError(
            f"cannot break down by {by!r}", hint=f"choose one of {', '.join(DIMENSIONS)}"
        )
    if by in _BUCKET_S:
        return _by_time(ledger, _BUCKET_S[by])
    return _by_attribute(ledger, _COLUMN[by])


def _rows(table: ir.Table, key: str) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {}
    for row in table.to_pyarrow().to_pylist():
        label = NO_VALUE if row[key] is None else str(row[key])
        out.setdefault(label, {c.value: 0.0 for c in Category})[row["category"]] += float(
            row["gpu_s"]
        )
    return out


def _by_attribute(ledger: Ledger, column: str) -> list[BreakdownRow]:
    segments = ledger.segments.filter(ledger.segments.category != Category.DOWN.value)
    gpu_s = (segments.end_s - segments.start_s) * segments.gpus
    grouped = segments.group_by([column, "category"]).aggregate(gpu_s=gpu_s.sum())
    rows = _rows(grouped, column)
    unallocated = {c.value: 0.0 for c in Category}
    unallocated["down"] = ledger.categories["down"]
    unallocated["idle"] = ledger.categories["idle"]
    # Largest first; equal totals by name, so the same store always prints the same order.
    ordered = sorted(rows.items(), key=lambda kv: (-sum(kv[1].values()), kv[0]))
    return [BreakdownRow(key=k, categories=v) for k, v in ordered] + [
        BreakdownRow(key=UNALLOCATED, categories=unallocated)
    ]


def _by_time(ledger: Ledger, bucket_s: int) -> list[BreakdownRow]:
    """Per bucket: categories of segments clipped to the bucket; idle is what capacity has left."""
    from gpuyield.report.summary import iso

    window = ledger.window
    first = window.start_s - window.start_s % bucket_s
    starts = list(range(first, window.end_s, bucket_s)) or [first]
    totals = bucket_totals(ledger, bucket_s, starts)
    return [
        BreakdownRow(key=iso(start)[: 10 if bucket_s == 86400 else 16], categories=totals[start])
        for start in starts
    ]


def bucket_totals(ledger: Ledger, bucket_s: int, starts: list[int]) -> dict[int, dict[str, float]]:
    """GPU-seconds per bucket and category; idle is what the bucket's capacity has left."""
    # Buckets generated in SQL rather than an ibis.memtable: a memtable is dropped by a finalizer
    # that may run after the store's connection is closed, and it warns under pandas 3.
    first = ibis.literal(starts[0], "int64")
    after_last = ibis.literal(starts[-1] + 1, "int64")
    buckets = ibis.range(first, after_last, bucket_s).unnest().name("bucket_s").as_table()
    buckets = buckets.mutate(bucket_end_s=buckets.bucket_s + bucket_s)
    segments = _clip(ledger.segments, buckets)
    by_category = segments.group_by(["bucket_s", "category"]).aggregate(
        gpu_s=((segments.end_s - segments.start_s) * segments.gpus).sum()
    )
    capacity = _clip(ledger.capacity.mutate(gpus=ledger.capacity.num_gpus.cast("float64")), buckets)
    installed = capacity.group_by("bucket_s").aggregate(
        gpu_s=((capacity.end_s - capacity.start_s) * capacity.gpus).sum()
    )
    out = {start: {c.value: 0.0 for c in Category} for start in starts}
    for row in by_category.to_pyarrow().to_pylist():
        out[row["bucket_s"]][row["category"]] += float(row["gpu_s"])
    for row in installed.to_pyarrow().to_pylist():
        cats = out[row["bucket_s"]]
        cats[Category.IDLE.value] = float(row["gpu_s"]) - sum(
            v for k, v in cats.items() if k != Category.IDLE.value
        )
    return out


def _clip(table: ir.Table, buckets: ir.Table) -> ir.Table:
    joined = table.join(
        buckets, [table.start_s < buckets.bucket_end_s, table.end_s > buckets.bucket_s]
    )
    return joined.mutate(
        start_s=ibis.greatest(joined.start_s, joined.bucket_s.cast("float64")),
        end_s=ibis.least(joined.end_s, joined.bucket_end_s.cast("float64")),
    )
