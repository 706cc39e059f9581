"""Reading input files safely: hash, encoding and byte checks in one streaming pass."""

from __future__ import annotations

import codecs
import hashlib
import threading
import typing
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from queue import Queue

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
    num_lines: int = 0
    """Lines in the file (a last line without a newline counts)."""
    mixed_line_ends: bool = False
    """True when some lines end in CR LF and others in LF (DuckDB's CSV reader takes one)."""
    chunk_marks: tuple[tuple[int, int], ...] = ()
    """(byte offset, newlines before it) at the start of every 8 MB read: lines can be found there."""


def scan_file(path: Path, *, progress: ProgressFn | None = None) -> FileInfo:
    """Hash ``path`` and check it is UTF-8 text without NUL bytes, naming the line of any bad byte.

    The hash runs in a second thread (hashlib releases the GIL), beside the byte checks.
    """
    if not path.is_file():
        raise InputError(f"{path}: no such file", hint="check the path; give the file sacct wrote")
    hasher = _Hasher()
    decoder = codecs.getincrementaldecoder("utf-8")()
    num_newlines = 0
    size = 0
    last_byte = b"\n"
    num_crs = 0
    marks: list[tuple[int, int]] = []
    try:
        with path.open("rb") as handle:
            while chunk := handle.read(_CHUNK_BYTES):
                marks.append((size, num_newlines))
                hasher.feed(chunk)
                _check_chunk(path, decoder, chunk, num_newlines)
                if last_byte == b"\r" and not chunk.startswith(b"\n"):
                    _lone_carriage_return(path, num_newlines)
                if b"\r" in chunk:
                    _check_carriage_returns(path, chunk, num_newlines)
                    num_crs += chunk.count(b"\r")
                last_byte = chunk[-1:]
                num_newlines += chunk.count(b"\n")
                size += len(chunk)
                if progress is not None:
                    progress(len(chunk))
        _check_chunk(path, decoder, b"", num_newlines, final=True)
        if last_byte == b"\r":
            _lone_carriage_return(path, num_newlines)
    finally:
        digest = hasher.finish()
    num_lines = num_newlines + (last_byte != b"\n")
    # Every CR is part of a CR LF (checked above): mixed when some newlines lack one.
    mixed = 0 < num_crs < num_newlines
    return FileInfo(
        path=path,
        sha256=digest,
        size_bytes=size,
        num_lines=num_lines,
        mixed_line_ends=mixed,
        chunk_marks=tuple(marks),
    )


def sample_lines(info: FileInfo, *, count: int = 8) -> dict[int, str]:
    """Some lines of the file by number (1-based): the last, and the first whole line after a few
    evenly spaced chunk starts (the first line is among them). Cheap: a seek and a read each."""
    found: dict[int, str] = {}
    marks = info.chunk_marks
    picks = (
        {marks[round(i * (len(marks) - 1) / max(1, count - 1))] for i in range(count)}
        if marks
        else set()
    )
    with info.path.open("rb") as handle:
        for offset, newlines_before in sorted(picks):
            handle.seek(max(0, offset - 1))
            previous = handle.read(1) if offset else b"\n"
            number = newlines_before + 1
            if previous != b"\n":
                handle.readline()  # the rest of a line cut by the chunk start
                number += 1
            text = handle.readline()
            if text:
                found[number] = text.decode("utf-8").rstrip("\r\n")
        if info.num_lines:
            handle.seek(max(0, info.size_bytes - (1 << 16)))
            tail = handle.read().decode("utf-8", errors="replace").rstrip("\r\n")
            if "\n" in tail or info.size_bytes <= (1 << 16):
                found[info.num_lines] = tail.rsplit("\n", 1)[-1].rstrip("\r")
    return found


class _Hasher:
    """SHA-256 of the chunks fed to it, computed in a background thread."""

    def __init__(self) -> None:
        self._queue: Queue[bytes | None] = Queue(maxsize=4)
        self._digest = hashlib.sha256()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while (chunk := self._queue.get()) is not None:
            self._digest.update(chunk)

    def feed(self, chunk: bytes) -> None:
        self._queue.put(chunk)

    def finish(self) -> str:
        self._queue.put(None)
        self._thread.join()
        return self._digest.hexdigest()


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
    if data.isascii() and not decoder.getstate()[0]:
        return  # ASCII is UTF-8; no character was left cut at the previous chunk's end
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
    """CR is accepted only as part of CR LF; a lone CR would split lines differently per reader.

    A CR ending the chunk is checked against the next chunk's first byte (or the end of the file).
    """
    at = chunk.find(b"\r")
    while at >= 0:
        if chunk[at + 1 : at + 2] not in (b"\n", b""):
            _lone_carriage_return(path, lines_before + chunk.count(b"\n", 0, at))
        at = chunk.find(b"\r", at + 1)


def _lone_carriage_return(path: Path, lines_before: int) -> None:
    raise ParseError(
        "carriage return inside a line",
        path=path,
        line=lines_before + 1,
        hint="normalise line endings (dos2unix) and re-run",
    )


# Compressed captures are read through a plain copy: DuckDB's CSV reader, the line numbers of
# errors and the content hash then see exactly what Slurm printed.
COMPRESSED_SUFFIXES = (".gz", ".zst")
STDIN = Path("-")


# A capture compresses five to fifty times (text of repeated names and times); a file that
# inflates past this ratio, and past the floor below, is a decompression bomb, refused before it
# fills the disk or the memory (a 1.4 MB gzip of zeros inflates to gigabytes).
MAX_INFLATION = 200
INFLATION_FLOOR_BYTES = 256 << 20


def inflation_budget(compressed_bytes: int) -> int:
    """The most bytes ``compressed_bytes`` of gzip or zstd may inflate to."""
    return max(INFLATION_FLOOR_BYTES, MAX_INFLATION * compressed_bytes)


def inflation_error(what: str | Path, compressed_bytes: int) -> InputError:
    return InputError(
        f"{what}: inflates to more than {inflation_budget(compressed_bytes):,} bytes from "
        f"{compressed_bytes:,} (over {MAX_INFLATION}x: a decompression bomb?)",
        hint="if the capture is genuine, decompress it yourself and give the plain file",
    )


def decompress_bounded(data: bytes, *, what: str, max_bytes: int | None = None) -> bytes:
    """gzip or zlib ``data`` (one member, as jobstats' JS1 documents are) inflated in memory,
    refused past ``inflation_budget`` (or ``max_bytes``, when smaller): never inflated whole
    first and measured after."""
    import zlib

    inflater = zlib.decompressobj(wbits=47)  # 32 + 15: a gzip or a zlib header
    budget = inflation_budget(len(data))
    if max_bytes is not None:
        budget = min(budget, max_bytes)
    try:
        out = inflater.decompress(data, budget + 1)
    except zlib.error as error:
        raise InputError(f"{what}: not gzip data: {error}", hint="is it complete?") from None
    if len(out) > budget or inflater.unconsumed_tail:
        if max_bytes is not None and budget == max_bytes:
            raise InputError(
                f"{what}: inflates to more than {budget:,} bytes from {len(data):,}",
                hint="if the data is genuine, it is not what this field holds",
            )
        raise inflation_error(what, len(data))
    return out


def plain_copy(path: Path, directory: Path) -> Path | None:
    """A plain copy in ``directory`` of ``-`` (stdin) or a ``.gz``/``.zst`` file; None for a
    plain file, which is read where it is. The copy keeps the name without its suffix."""
    import shutil
    import sys

    if path == STDIN:
        target = directory / "stdin"
        with target.open("wb") as out:
            shutil.copyfileobj(sys.stdin.buffer, out, _CHUNK_BYTES)
        return target
    if path.suffix not in COMPRESSED_SUFFIXES:
        return None
    if not path.is_file():
        raise InputError(f"{path}: no such file", hint="check the path")
    target = directory / path.with_suffix("").name
    budget = inflation_budget(path.stat().st_size)
    try:
        with _open_compressed(path) as source, target.open("wb") as out:
            written = 0
            while chunk := source.read(_CHUNK_BYTES):
                written += len(chunk)
                if written > budget:
                    raise inflation_error(path, path.stat().st_size)
                out.write(chunk)
    except InputError:
        target.unlink(missing_ok=True)
        raise
    except Exception as error:  # gzip: OSError, EOFError; zstandard: ZstdError
        raise InputError(
            f"{path}: cannot decompress: {error}",
            hint="is the file complete? check it with gzip -t or zstd -t",
        ) from None
    return target


def plain_copies(given: dict[str, Path], directory: Path) -> tuple[dict[str, Path], dict[str, str]]:
    """``plain_copy`` of each input (by kind) that needs one: the copies by kind, and each copy's
    path mapped to what the user gave. Only one input can be stdin."""
    copies: dict[str, Path] = {}
    renamed: dict[str, str] = {}
    if sum(path == STDIN for path in given.values()) > 1:
        raise InputError("only one input can be - (stdin)", hint="give the others as files")
    for kind, path in given.items():
        sub = directory / kind
        sub.mkdir()
        copy = plain_copy(path, sub)
        if copy is not None:
            copies[kind] = copy
            renamed[str(copy)] = "-" if path == STDIN else str(path)
    return copies, renamed


def named_sources(
    renamed: dict[str, str], sources: dict[str, str] | typing.Mapping[str, str]
) -> dict[str, str]:
    """``renamed`` (copy -> path given) with the paths ``sources`` names given those names."""
    named = {copy: sources.get(given, given) for copy, given in renamed.items()}
    return {**{path: name for path, name in sources.items()}, **named}


def _open_compressed(path: Path) -> typing.BinaryIO:
    if path.suffix == ".gz":
        import gzip

        return typing.cast(typing.BinaryIO, gzip.open(path, "rb"))
    import zstandard

    return typing.cast(
        typing.BinaryIO, zstandard.ZstdDecompressor().stream_reader(path.open("rb"), closefd=True)
    )
