"""Time buckets (``report --by day|hour``, the HTML timeline, the fit's idle stretches): each row cut
at the bucket edges from its own times, checked against the range join it replaced (every row
joined with every bucket it overlaps), which DuckDB ran as a nested loop over rows x buckets."""

from __future__ import annotations

from collections.abc import Iterator

import duckdb
import ibis
import ibis.expr.types as ir
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuyield.ledger.sums import exact_sum
from gpuyield.report.breakdown import _clip, _Grid

BUCKET_S = 3600
FIRST_S = 1_790_812_800  # a bucket edge (2026-10-01T00:00Z)


@pytest.fixture(scope="module")
def backend() -> Iterator[ibis.BaseBackend]:
    con = ibis.duckdb.from_connection(duckdb.connect())
    yield con
    con.disconnect()


def _joined(table: ir.Table, grid: _Grid) -> ir.Table:
    """The reference: the bucket table, and the rows joined with each bucket they overlap."""
    buckets = (
        ibis.range(
            ibis.literal(grid.first_s, "int64"),
            ibis.literal(grid.last_s + 1, "int64"),
            grid.bucket_s,
        )
        .unnest()
        .name("bucket_s")
        .as_table()
    )
    buckets = buckets.mutate(bucket_end_s=buckets.bucket_s + grid.bucket_s)
    joined = table.join(
        buckets, [table.start_s < buckets.bucket_end_s, table.end_s > buckets.bucket_s]
    )
    return joined.mutate(
        start_s=ibis.greatest(joined.start_s, joined.bucket_s.cast("float64")),
        end_s=ibis.least(joined.end_s, joined.bucket_end_s.cast("float64")),
    )


def _per_bucket(
    backend: ibis.BaseBackend, clipped: ir.Table
) -> list[tuple[int, int, float, float, int]]:
    """Each piece (row id, bucket, clipped times) and the buckets' exact sums, sorted."""
    pieces = clipped.select("row", "bucket_s", "start_s", "end_s").order_by(["row", "bucket_s"])
    sums = clipped.group_by("bucket_s").aggregate(
        units=exact_sum((clipped.end_s - clipped.start_s) * clipped.gpus)
    )
    rows = [tuple(r.values()) for r in backend.to_pyarrow(pieces).to_pylist()]
    totals = sorted((r["bucket_s"], int(r["units"])) for r in backend.to_pyarrow(sums).to_pylist())
    return [*rows, *totals]


# Offsets from the grid's first edge: before it, on edges, fractions of a second, past its end.
_OFFSET = st.one_of(
    st.integers(-3 * BUCKET_S, 30 * BUCKET_S).map(float),
    st.integers(-3, 30).map(lambda k: float(k * BUCKET_S)),
    st.floats(-3 * BUCKET_S, 30 * BUCKET_S, allow_nan=False).map(lambda x: round(x, 3)),
)


@settings(deadline=None, max_examples=40)
@given(
    rows=st.lists(st.tuples(_OFFSET, st.one_of(st.just(0.0), _OFFSET)), max_size=12),
    buckets=st.integers(1, 24),
)
def test_each_row_is_cut_into_the_buckets_it_overlaps(
    backend: ibis.BaseBackend, rows: list[tuple[float, float]], buckets: int
) -> None:
    # Rows may start before the grid, end after it, be empty (end == start) or end before start.
    starts = [FIRST_S + a for a, _ in rows]
    ends = [FIRST_S + a + abs(b) for a, b in rows]
    table = ibis.memtable(
        pa.table(
            {
                "row": pa.array(range(len(rows)), pa.int64()),
                "start_s": pa.array(starts, pa.float64()),
                "end_s": pa.array(ends, pa.float64()),
                "gpus": pa.array([float(1 + i % 8) for i in range(len(rows))], pa.float64()),
            }
        )
    )
    grid = _Grid(first_s=FIRST_S, last_s=FIRST_S + (buckets - 1) * BUCKET_S, bucket_s=BUCKET_S)
    assert _per_bucket(backend, _clip(table, grid)) == _per_bucket(backend, _joined(table, grid))


def test_a_long_row_is_cut_at_every_edge(backend: ibis.BaseBackend) -> None:
    # 30 minutes before the first edge to 90 minutes past the third: buckets 0, 1, 2 of 3.
    table = ibis.memtable(
        pa.table(
            {
                "row": pa.array([0], pa.int64()),
                "start_s": pa.array([FIRST_S - 1800.0]),
                "end_s": pa.array([FIRST_S + 3 * BUCKET_S + 5400.0]),
                "gpus": pa.array([2.0]),
            }
        )
    )
    grid = _Grid(first_s=FIRST_S, last_s=FIRST_S + 2 * BUCKET_S, bucket_s=BUCKET_S)
    pieces = backend.to_pyarrow(_clip(table, grid).order_by("bucket_s")).to_pylist()
    assert [(p["start_s"] - FIRST_S, p["end_s"] - FIRST_S) for p in pieces] == [
        (0.0, 3600.0),
        (3600.0, 7200.0),
        (7200.0, 10800.0),
    ]
