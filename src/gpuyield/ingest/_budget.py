"""Budgets for readers of untrusted bytes: decompression that stops at a size, a body read that
stops at a size or a deadline.

A 1.4 MB gzip member can hold gigabytes of zeros; an HTTP server can send forever, or a byte a
minute. Each helper here stops at its limit and says which limit, so a reader can name its input
(``ParseError`` with the file and line, ``InputError`` with the URL) instead of filling memory or
waiting without end.
"""

from __future__ import annotations

import time
import zlib
from typing import Protocol

_CHUNK_BYTES = 64 << 10


class BudgetExceeded(Exception):
    """A limit was reached; the message says which (the caller names the input)."""


class DecompressionBomb(BudgetExceeded):
    """Compressed data that would decompress past its budget."""


def decompress_bounded(data: bytes, *, max_bytes: int, max_ratio: float | None = None) -> bytes:
    """``data`` (gzip or zlib, told from its header) decompressed, refusing more than
    ``max_bytes`` of output, or more than ``max_ratio`` times the input when given. Stops as soon
    as the limit is passed: never holds more than the limit plus one chunk."""
    limit = max_bytes if max_ratio is None else min(max_bytes, int(len(data) * max_ratio))
    inflater = zlib.decompressobj(wbits=47)  # 32 + 15: a gzip or a zlib header
    out = bytearray()
    pending = data
    while not inflater.eof:
        chunk = inflater.decompress(pending, _CHUNK_BYTES)
        out += chunk
        if len(out) > limit:
            raise DecompressionBomb(
                f"decompresses to more than {limit:,} bytes ({len(data):,} compressed)"
            )
        pending = inflater.unconsumed_tail
        if not chunk and not pending:
            break  # no input left and nothing more to give: cut short
    if not inflater.eof:
        raise zlib.error("truncated compressed data")
    return bytes(out)


class _Readable(Protocol):
    def read1(self, size: int = -1, /) -> bytes: ...


def read_bounded(stream: _Readable, *, max_bytes: int, deadline: float) -> bytes:
    """At most ``max_bytes`` from ``stream``, before ``deadline`` (``time.monotonic()``): a
    larger body, or one still arriving at the deadline, raises ``BudgetExceeded``. Each read
    returns what has arrived (``read1``) and waits at most the stream's own timeout (a
    socket's), so a drip of a byte at a time cannot hold it past the deadline by more than one
    such wait."""
    out = bytearray()
    while True:
        if time.monotonic() > deadline:
            raise BudgetExceeded(f"still sending after the deadline ({len(out):,} bytes so far)")
        chunk = stream.read1(min(_CHUNK_BYTES, max_bytes + 1 - len(out)))
        if not chunk:
            return bytes(out)
        out += chunk
        if len(out) > max_bytes:
            raise BudgetExceeded(f"sent more than {max_bytes:,} bytes")
