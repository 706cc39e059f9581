"""Slurm's text formats over whole columns: the formats of ``slurm_text``, one Arrow array at a time.

A cluster-year holds millions of sacct rows; formatting them one f-string at a time took longer
than simulating them. Here every field is an Arrow string array built by C++ kernels (integer
casts, ``take`` from small tables, element-wise joins), byte for byte what the scalar functions of
``slurm_text`` print (``tests/simulate/test_slurm_columns.py`` compares them on random inputs).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

_DAY_S = 86400
#: ``HH:MM:SS`` of every second of a day: a time of day or the clock part of a duration is one
#: ``take`` from it.
_CLOCK = pa.array(
    [f"{s // 3600:02d}:{s // 60 % 60:02d}:{s % 60:02d}" for s in range(_DAY_S)], type=pa.string()
)


def join(*parts: pa.Array | str, sep: str = "") -> pa.Array:
    """Element-wise concatenation of string arrays (and constant strings) with ``sep`` between."""
    return pc.binary_join_element_wise(*parts, sep)


def ints(values: np.ndarray) -> pa.Array:
    """Integers as Python's ``str`` prints them."""
    return pc.cast(pa.array(np.asarray(values, dtype=np.int64)), pa.string())


def lookup(text: Callable[..., str], *keys: np.ndarray) -> pa.Array:
    """``text(a, b, ...)`` for every row of the integer key columns ``keys``, formatting each
    distinct combination once: the keys come from small sets (GPU counts, users, states, days)."""
    columns = [np.asarray(k, dtype=np.int64) for k in keys]
    # One integer code per row (mixed radix over each column's range), decoded once per distinct
    # code.
    low = [int(c.min()) if c.size else 0 for c in columns]
    radix = [int(c.max()) - lo + 1 if c.size else 1 for c, lo in zip(columns, low, strict=True)]
    code = np.zeros(columns[0].size, dtype=np.int64)
    for column, lo, r in zip(columns, low, radix, strict=True):
        code = code * r + (column - lo)
    size = math.prod(radix)
    if size >= 2**62:
        raise ValueError("lookup: the key columns span too many combinations for one code")
    distinct, index = _distinct(code, size)
    values = []
    for lo, r in zip(reversed(low), reversed(radix), strict=True):
        distinct, digit = np.divmod(distinct, r)
        values.append((digit + lo).tolist())
    table = pa.array([text(*v) for v in zip(*reversed(values), strict=True)], type=pa.string())
    return table.take(pa.array(index))


def _distinct(code: np.ndarray, size: int) -> tuple[np.ndarray, np.ndarray]:
    """The distinct codes (sorted) and each code's index among them: by a table of every
    possible code when there are few (linear time), else by sorting."""
    if size > max(1 << 16, code.size):
        distinct, index = np.unique(code, return_inverse=True)
        return distinct, index.reshape(-1)
    present = np.zeros(size, dtype=bool)
    present[code] = True
    return np.flatnonzero(present), (np.cumsum(present) - 1)[code]


def choose(mask: np.ndarray, when_true: pa.Array | str, when_false: pa.Array | str) -> pa.Array:
    """``when_true`` where ``mask`` holds, else ``when_false`` (arrays or constant strings)."""
    return pc.if_else(pa.array(np.asarray(mask, dtype=bool)), when_true, when_false)


def times(epoch_s: np.ndarray) -> pa.Array:
    """Epoch seconds as ``YYYY-MM-DDTHH:MM:SS`` (``slurm_text.time1`` of every value)."""
    epoch_s = np.asarray(epoch_s, dtype=np.int64)
    days, clock = np.divmod(epoch_s, _DAY_S)
    dates = lookup(lambda d: str(np.datetime64(d, "D")), days)
    return join(dates, _CLOCK.take(pa.array(clock)), sep="T")


def durations(seconds: np.ndarray) -> pa.Array:
    """``[D-]HH:MM:SS`` of every value (``slurm_text.duration``, negative values included)."""
    days, clock = np.divmod(np.asarray(seconds, dtype=np.int64), _DAY_S)
    hms = _CLOCK.take(pa.array(clock))
    return choose(days != 0, join(ints(days), hms, sep="-"), hms)


def hostlists(nodes: np.ndarray, counts: np.ndarray, prefix: str, width: int) -> pa.Array:
    """Slurm hostlists of consecutive groups of node indices (``slurm_text.hostlist`` of each).

    Row i holds the next ``counts[i]`` entries of ``nodes``, strictly increasing (as the
    scheduler stores them); a row with no nodes is ``None assigned``.
    """
    nodes = np.asarray(nodes, dtype=np.int64)
    counts = np.asarray(counts, dtype=np.int64)
    ends = np.cumsum(counts)
    first = np.zeros(nodes.size, dtype=bool)
    first[(ends - counts)[counts > 0]] = True
    step = np.diff(nodes, prepend=np.int64(-2))
    if np.any((step <= 0) & ~first):
        raise AssertionError("hostlists: a row's nodes are not strictly increasing")
    run_start = first | (step != 1)
    lo = np.flatnonzero(run_start)
    hi = np.append(lo[1:], nodes.size)[: lo.size] - 1  # a run ends where the next one starts
    low, high = _numbers(nodes[lo] + 1, width), _numbers(nodes[hi] + 1, width)
    runs = choose(lo == hi, low, join(low, high, sep="-"))
    runs_per_row = np.bincount(np.searchsorted(ends, lo, side="right"), minlength=counts.size)
    offsets = np.concatenate(([0], np.cumsum(runs_per_row))).astype(np.int32)
    listed = pc.binary_join(pa.ListArray.from_arrays(pa.array(offsets), runs), ",")
    many = join(prefix + "[", listed, "]")
    named = choose(counts == 1, join(prefix, listed), many)
    return choose(counts == 0, "None assigned", named)


def _numbers(values: np.ndarray, width: int) -> pa.Array:
    """Node numbers zero-padded to ``width`` digits, as ``slurm_text.node_name`` pads them."""
    return pc.utf8_lpad(ints(values), width=width, padding="0")


@dataclass(frozen=True, kw_only=True, slots=True)
class TextBuffer:
    """The bytes of a string array: lines ending in a newline are written with one call, or cut
    at any element boundary."""

    data: memoryview
    offsets: np.ndarray
    """Element i is ``data[offsets[i]:offsets[i + 1]]`` (one more offset than elements)."""


def text_buffer(lines: pa.Array) -> TextBuffer:
    """The buffer behind a string array without nulls (no copy)."""
    if lines.null_count:
        raise AssertionError("text_buffer: a line is null")
    offsets = np.frombuffer(lines.buffers()[1], dtype=np.int32)
    return TextBuffer(
        data=memoryview(lines.buffers()[2]),
        offsets=offsets[lines.offset : lines.offset + len(lines) + 1],
    )
