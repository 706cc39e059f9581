"""Budgets for readers of untrusted bytes from the network: a body copied to a file that stops
at a size or a deadline (decompression budgets are ``_files.decompress_bounded``'s).

An HTTP server can send forever, or a byte a minute. The helper stops at its limit and says which
limit, so a reader can name its input (``InputError`` with the URL) instead of filling the disk or
waiting without end; memory holds one chunk of the body, whatever the limit.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Protocol

_CHUNK_BYTES = 64 << 10


class BudgetExceeded(Exception):
    """A limit was reached; the message says which (the caller names the input)."""


class _Readable(Protocol):
    def read1(self, size: int = -1, /) -> bytes: ...


class _Writable(Protocol):
    def write(self, data: bytes, /) -> int: ...


def copy_bounded(
    stream: _Readable,
    out: _Writable,
    *,
    max_bytes: int,
    deadline: float,
    feed: Callable[[bytes], object] | None = None,
) -> int:
    """Copy at most ``max_bytes`` of ``stream`` to ``out`` (a chunk at a time: memory holds one
    chunk, whatever the limit), before ``deadline`` (``time.monotonic()``); ``feed`` sees every
    chunk (to hash it). A larger body, or one still arriving at the deadline, raises
    ``BudgetExceeded``. Each read returns what has arrived (``read1``) and waits at most the
    stream's own timeout (a socket's), so a drip of a byte at a time cannot hold it past the
    deadline by more than one such wait. Returns the bytes copied."""
    copied = 0
    while True:
        if time.monotonic() > deadline:
            raise BudgetExceeded(f"still sending after the deadline ({copied:,} bytes so far)")
        chunk = stream.read1(min(_CHUNK_BYTES, max_bytes + 1 - copied))
        if not chunk:
            return copied
        copied += len(chunk)
        if copied > max_bytes:
            raise BudgetExceeded(f"sent more than {max_bytes:,} bytes")
        if feed is not None:
            feed(chunk)
        out.write(chunk)
