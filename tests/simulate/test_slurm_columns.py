"""The column formats print what the one-value formats print, and batching does not change a byte.

``slurm_columns`` formats millions of sacct fields at once; ``slurm_text`` is the reference, one
value at a time (compared with real Slurm output in ``test_formats.py``).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as hs

from gpuyield.simulate import sacct_file
from gpuyield.simulate import slurm_columns as sc
from gpuyield.simulate import slurm_text as st
from gpuyield.simulate.api import RunSummary
from gpuyield.simulate.cluster import SimulationResult, simulate
from gpuyield.simulate.scenario import load_scenario

# From 1938 to 2096: negative epochs, leap days and the 2038 boundary included.
_EPOCHS = hs.lists(hs.integers(-(2**31), 2**32), max_size=60)


@given(_EPOCHS)
def test_times_match_time1(epochs: list[int]) -> None:
    got = sc.times(np.array(epochs, dtype=np.int64)).to_pylist()
    assert got == [st.time1(e) for e in epochs]


@given(hs.lists(hs.integers(-(10**8), 10**9), max_size=60))
def test_durations_match_duration(seconds: list[int]) -> None:
    got = sc.durations(np.array(seconds, dtype=np.int64)).to_pylist()
    assert got == [st.duration(s) for s in seconds]


@given(hs.lists(hs.integers(0, 2**40), max_size=40))
def test_ints_print_as_python(values: list[int]) -> None:
    assert sc.ints(np.array(values, dtype=np.int64)).to_pylist() == [str(v) for v in values]


_KEYS = hs.lists(hs.tuples(hs.integers(-50, 50), hs.integers(0, 3), hs.integers(0, 10**6)))


@given(_KEYS)
def test_lookup_formats_each_combination(keys: list[tuple[int, int, int]]) -> None:
    # Small and large key ranges: a table of every code, or a sort.
    columns = [np.array(c, dtype=np.int64) for c in zip(*keys, strict=True)] or [np.zeros(0)] * 3
    got = sc.lookup(lambda a, b, c: f"{a}/{b}/{c}", *columns).to_pylist()
    assert got == [f"{a}/{b}/{c}" for a, b, c in keys]
    single = sc.lookup(lambda a: f"<{a}>", columns[0]).to_pylist()
    assert single == [f"<{a}>" for a, _, _ in keys]


_ROWS = hs.lists(hs.frozensets(hs.integers(0, 120), max_size=12), max_size=25)


@given(_ROWS, hs.sampled_from(["n", "gpu-", "x"]), hs.integers(1, 5))
def test_hostlists_match_hostlist(rows: list[frozenset[int]], prefix: str, width: int) -> None:
    nodes = np.array([n for row in rows for n in sorted(row)], dtype=np.int64)
    counts = np.array([len(row) for row in rows], dtype=np.int64)
    got = sc.hostlists(nodes, counts, prefix, width).to_pylist()
    assert got == [st.hostlist(row, prefix, width) for row in rows]


def test_hostlists_refuse_unsorted_rows() -> None:
    # A row's nodes out of order would print a different list than Slurm's; say so, not guess.
    with pytest.raises(AssertionError, match="strictly increasing"):
        sc.hostlists(np.array([3, 2]), np.array([2]), "n", 3)
    with pytest.raises(AssertionError, match="strictly increasing"):
        sc.hostlists(np.array([4, 4]), np.array([2]), "n", 3)
    # Across rows the order starts over.
    assert sc.hostlists(np.array([5, 1]), np.array([1, 1]), "n", 1).to_pylist() == ["n6", "n2"]


def test_text_buffer_of_a_slice() -> None:
    lines = pa.array(["a\n", "bb\n", "ccc\n", "d\n"]).slice(1, 2)
    text = sc.text_buffer(lines)
    assert bytes(text.data[int(text.offsets[0]) : int(text.offsets[-1])]) == b"bb\nccc\n"
    assert bytes(text.data[int(text.offsets[1]) : int(text.offsets[2])]) == b"ccc\n"
    assert text.offsets.size == 3


@pytest.fixture(scope="module")
def ledger_check_result() -> SimulationResult:
    return simulate(load_scenario("ledger-check"))


def _lineage_points(result: SimulationResult) -> list[int]:
    """Where the lineage rows go among the research rows (research rows before each)."""
    submit, job_id, _ = sacct_file._research_order(result)
    keys = [key for key, _ in sacct_file._lineage_lines(result)]
    return sacct_file._insertion_points(submit, job_id, keys).tolist()


@pytest.mark.parametrize("batch", ["boundary", "inside"])
def test_batches_do_not_change_sacct(
    ledger_check: RunSummary,
    ledger_check_result: SimulationResult,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    batch: str,
) -> None:
    # ledger-check interleaves a dozen lineage rows with about 5,000 research rows. Batches as
    # long as the first lineage row's place put it on a batch boundary; batches of 1,000 rows
    # put most inside one.
    points = _lineage_points(ledger_check_result)
    batch_rows = min(p for p in points if p > 0) if batch == "boundary" else 1000
    assert any(p % batch_rows == 0 for p in points) or batch == "inside"
    monkeypatch.setattr(sacct_file, "BATCH_ROWS", batch_rows)
    sacct_file.write_sacct(tmp_path / "sacct.psv", ledger_check_result)
    expected = (ledger_check.out_dir / "sacct.psv").read_bytes()
    assert (tmp_path / "sacct.psv").read_bytes() == expected
