"""Reading input files safely: hash, encoding and byte checks in one streaming pass."""

from __future__ import annotations

import codecs
import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from gpuyield.errors import InputError, ParseError

_CHUNK_BYTES = 8 << 20

ProgressFn = Callable[[int], None]
"""Called with the number of bytes just processed (for progress bars)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class FileInfo:
    """What one pass over a file learned about it."""

    path: Path
    """The file as given."""
    sha256: str
    """Hex SHA-256 of the bytes: identifies the content for idempotent re-ingest."""
    size_bytes: int
    """File size."""


def scan_file(path: Path, *, progress: ProgressFn | None = None) -> FileInfo:
    """Hash ``path`` and check it is UTF-8 text without NUL bytes, naming the line of any bad byte."""
    if not path.is_file():
        raise InputError(f"{path}: no such file", hint="check the path; give the file sacct wrote")
    digest = hashlib.sha256()
    decoder = codecs.getincrementaldecoder("utf-8")()
    num_newlines = 0
    size = 0
    with path.open("rb") as handle:
        while chunk := handle.read(_CHUNK_BYTES):
            digest.update(chunk)
            _check_chunk(path, decoder, chunk, num_newlines)
            if b"\r" in chunk:
                _check_carriage_returns(path, chunk, num_newlines)
            num_newlines += chunk.count(b"\n")
            size += len(chunk)
            if progress is not None:
                progress(len(chunk))
    _check_chunk(path, decoder, b"", num_newlines, final=True)
    return FileInfo(
        path=path,
        sha256=digest.hexdigest(),
        size_bytes=size,
    )


def _check_chunk(
    path: Path,
    decoder: codecs.IncrementalDecoder,
    data: bytes,
    lines_before: int,
    *,
    final: bool = False,
) -> None:
    nul = data.find(b"\x00")
    if nul >= 0:
        raise ParseError(
            "NUL byte in the file",
            path=path,
            line=lines_before + data.count(b"\n", 0, nul) + 1,
            hint="the file is binary or corrupted; re-run the command that wrote it",
        )
    try:
        # Incremental: a character cut at a chunk's end is completed by the next chunk.
        decoder.decode(data, final=final)
    except UnicodeDecodeError as error:
        at = max(0, min(error.start, len(data)))
        raise ParseError(
            f"bytes that are not UTF-8 ({error.object[error.start : error.start + 4]!r})",
            path=path,
            line=lines_before + data.count(b"\n", 0, at) + 1,
            hint="convert the file to UTF-8, e.g. iconv -f latin1 -t utf-8",
        ) from None


def _check_carriage_returns(path: Path, chunk: bytes, lines_before: int) -> None:
    """CR is accepted only as part of CR LF; a lone CR would split lines differently per reader."""
    at = chunk.find(b"\r")
    while at >= 0:
        if chunk[at + 1 : at + 2] not in (b"\n", b""):
            raise ParseError(
                "carriage return inside a line",
                path=path,
                line=lines_before + chunk.count(b"\n", 0, at) + 1,
                hint="normalise line endings (dos2unix) and re-run",
            )
        at = chunk.find(b"\r", at + 1)
