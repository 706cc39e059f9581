"""The network body budget: copied a chunk at a time, cut off at its size and its deadline."""

from __future__ import annotations

import hashlib
import io
import time

import pytest

from gpuyield.ingest._budget import BudgetExceeded, copy_bounded


class _Chunks:
    """A body that arrives in pieces (``read1`` gives what has arrived, at most ``size``)."""

    def __init__(self, pieces: list[bytes]) -> None:
        self.pieces = pieces
        self.largest_ask = 0

    def read1(self, size: int = -1, /) -> bytes:
        self.largest_ask = max(self.largest_ask, size)
        if not self.pieces:
            return b""
        piece = self.pieces.pop(0)
        if size >= 0 and len(piece) > size:
            self.pieces.insert(0, piece[size:])
            piece = piece[:size]
        return piece


class _Sink(io.BytesIO):
    def __init__(self) -> None:
        super().__init__()
        self.largest_write = 0

    def write(self, data: bytes, /) -> int:  # type: ignore[override]
        self.largest_write = max(self.largest_write, len(data))
        return super().write(bytes(data))


def test_the_body_is_copied_and_hashed_a_chunk_at_a_time() -> None:
    body = bytes(range(256)) * 4096  # 1 MiB
    stream, out, digest = _Chunks([body]), _Sink(), hashlib.sha256()
    copied = copy_bounded(
        stream, out, max_bytes=2 << 20, deadline=time.monotonic() + 60, feed=digest.update
    )
    assert copied == len(body)
    assert out.getvalue() == body
    assert digest.hexdigest() == hashlib.sha256(body).hexdigest()
    # Never more than a chunk asked for or held at once, however large the limit.
    assert stream.largest_ask <= 64 << 10 and out.largest_write <= 64 << 10


def test_a_body_past_its_size_stops_there() -> None:
    stream, out = _Chunks([b"x" * 1000] * 10), _Sink()
    with pytest.raises(BudgetExceeded, match="more than 2,500 bytes"):
        copy_bounded(stream, out, max_bytes=2500, deadline=time.monotonic() + 60)
    assert len(out.getvalue()) <= 2500


def test_a_body_still_arriving_at_the_deadline_stops() -> None:
    with pytest.raises(BudgetExceeded, match="deadline"):
        copy_bounded(_Chunks([b"x"] * 10), _Sink(), max_bytes=100, deadline=time.monotonic() - 1)
