"""Hardware blame in truth: a FAILED row is blamed when a node it held had an event near its end.

The search pairs every event with the failed rows ending near it and tests membership with sorted
(row, node) keys; the reference below is the plain loop it replaced (seconds at a cluster-year).
"""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as hs

from gpuyield.simulate.research import ResearchRows
from gpuyield.simulate.truth import _NodesHeld, _ranges

_NODES = 40
# Each row's nodes in any order (the scheduler sorts them; the test must not rely on it).
_ROWS = hs.lists(hs.lists(hs.integers(0, _NODES - 1), unique=True, max_size=6), max_size=20)


def _rows(node_lists: list[list[int]]) -> ResearchRows:
    n = len(node_lists)
    ptr = np.concatenate(([0], np.cumsum([len(x) for x in node_lists]))).astype(np.int64)
    nodes = np.array([v for x in node_lists for v in x], dtype=np.int64)
    zeros = np.zeros(n, dtype=np.int64)
    return ResearchRows(
        job=zeros,
        submit_s=zeros,
        start_s=zeros,
        end_s=zeros,
        state=zeros,
        node_ptr=ptr,
        nodes=nodes,
        num_gpus=zeros,
        requeued=np.zeros(n, dtype=bool),
    )


@given(_ROWS, hs.data())
def test_holds_is_membership(node_lists: list[list[int]], data: hs.DataObject) -> None:
    rows = _rows(node_lists)
    chosen = data.draw(hs.sets(hs.integers(0, len(node_lists) - 1))) if node_lists else set()
    which = np.array(sorted(chosen), dtype=np.int64)
    pairs = hs.tuples(hs.sampled_from(sorted(chosen)), hs.integers(0, _NODES - 1))
    queries = data.draw(hs.lists(pairs)) if chosen else []
    held = _NodesHeld(rows, which, _NODES)
    row = np.array([r for r, _ in queries], dtype=np.int64)
    node = np.array([n for _, n in queries], dtype=np.int64)
    expected = [n in node_lists[r] for r, n in queries]
    assert held.holds(row, node).tolist() == expected


@given(hs.lists(hs.tuples(hs.integers(0, 100), hs.integers(0, 5)), max_size=20))
def test_ranges_concatenate(pairs: list[tuple[int, int]]) -> None:
    starts = np.array([s for s, _ in pairs], dtype=np.int64)
    counts = np.array([c for _, c in pairs], dtype=np.int64)
    expected = [v for s, c in pairs for v in range(s, s + c)]
    assert _ranges(starts, counts).tolist() == expected
