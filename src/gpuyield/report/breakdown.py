"""Breakdowns of the ledger: by account, user, partition or run, and over time (day or hour)."""

from __future__ import annotations

from dataclasses import dataclass

import ibis
import ibis.expr.types as ir
import pyarrow as pa

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
    ordered = sorted(rows.items(), key=lambda kv: -sum(kv[1].values()))
    return [BreakdownRow(key=k, categories=v) for k, v in ordered] + [
        BreakdownRow(key=UNALLOCATED, categories=unallocated)
    ]


def _by_time(ledger: Ledger, bucket_s: int) -> list[BreakdownRow]:
    """Per bucket: categories of segments clipped to the bucket; idle is what capacity has left."""
    window = ledger.window
    first = window.start_s - window.start_s % bucket_s
    starts = list(range(first, window.end_s, bucket_s)) or [first]
    buckets = ibis.memtable(pa.table({"bucket_s": pa.array(starts, pa.int64())}))
    buckets = buckets.mutate(bucket_end_s=buckets.bucket_s + bucket_s)
    segments = _clip(ledger.segments, buckets)
    seg_rows = _rows(
        segments.group_by(["bucket_s", "category"]).aggregate(
            gpu_s=((segments.end_s - segments.start_s) * segments.gpus).sum()
        ),
        "bucket_s",
    )
    capacity = _clip(ledger.capacity.mutate(gpus=ledger.capacity.num_gpus.cast("float64")), buckets)
    installed = {
        str(r["bucket_s"]): float(r["gpu_s"])
        for r in capacity.group_by("bucket_s")
        .aggregate(gpu_s=((capacity.end_s - capacity.start_s) * capacity.gpus).sum())
        .to_pyarrow()
        .to_pylist()
    }
    from gpuyield.report.summary import iso

    result = []
    for start in starts:
        cats = seg_rows.get(str(start), {c.value: 0.0 for c in Category})
        cats["idle"] = installed.get(str(start), 0.0) - sum(
            v for k, v in cats.items() if k != "idle"
        )
        label = iso(start)[: 10 if bucket_s == 86400 else 16]
        result.append(BreakdownRow(key=label, categories=cats))
    return result


def _clip(table: ir.Table, buckets: ir.Table) -> ir.Table:
    joined = table.join(
        buckets, [table.start_s < buckets.bucket_end_s, table.end_s > buckets.bucket_s]
    )
    return joined.mutate(
        start_s=ibis.greatest(joined.start_s, joined.bucket_s.cast("float64")),
        end_s=ibis.least(joined.end_s, joined.bucket_end_s.cast("float64")),
    )
