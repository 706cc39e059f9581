"""Budgets for readers of untrusted bytes from the network: a body read that stops at a size or a
deadline (decompression budgets are ``_files.decompress_bounded``'s).

An HTTP server can send forever, or a byte a minute. The helper stops at its limit and says which
limit, so a reader can name its input (``InputError`` with the URL) instead of filling memory or
waiting without end.
"""

from __future__ import annotations

import time
from typing import Protocol

_CHUNK_BYTES = 64 << 10


class BudgetExceeded(Exception):
    """A limit was reached; the message says which (the caller names the input)."""


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
