"""The ladder summary kept in a file beside the store, so ``gpuyield preflight`` answers without
DuckDB.

``preflight`` runs at every ``sbatch``; opening a DuckDB store (importing the engine, reading the
catalog, starting its threads, closing) costs more than the rest of the check together. So the first
check after a store changed copies what every later check reads, the ladder summary
(``rungs.SUMMARY_TABLE``, ``rungs.FAMILIES_TABLE``) and the manifest's ladder and families, into
``<store>.ladder``; later checks read that file alone, for as long as the store is the one it was
copied from.

"The one it was copied from" is the store file's identity (inode, size, modification and change
times, to the nanosecond): any write to the store changes its times, and a copy elsewhere has
another inode, so a changed store is never answered from an old copy. While a ``<store>.wal``
exists, writes may sit in it rather than in the file: the cache is not used (nor written) then.

Layout: a first line naming the format, a second line of JSON (the store's identity, the ladder,
the families and their patterns), then one line per summary row, sorted bytewise, so a check
finds its family by bisecting the file instead of reading all of it (10M jobs: tens of MB)::

    <family, hex>\\t-                                      the family has jobs (FAMILIES_TABLE)
    <family, hex>\\t<end_s>\\t<gpus>\\t<run, hex>           a COMPLETED job of it (SUMMARY_TABLE)

Names are hex-encoded UTF-8 so no name can contain the separators; a tab sorts below every hex
digit, so a family's lines are contiguous and come before those of any longer name it prefixes.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING

from gpuyield import duck
from gpuyield.errors import GpuyieldError
from gpuyield.families import LadderPolicy
from gpuyield.ladder_verdict import Evidence
from gpuyield.sqltext import identifier, literal

if TYPE_CHECKING:
    import duckdb

# Bump when this layout, or the meaning of the summary tables it copies, changes: a file of another
# format is ignored (and rewritten by the next check that opens the store).
FORMAT = "gpuyield ladder cache 1"
SUFFIX = ".ladder"
# The second line holds the ladder and the manifest's families (at most families.MAX_FAMILIES):
# far below this; a longer line is not a file this module wrote.
_MAX_HEADER_BYTES = 8 << 20
_KNOWN = b"-"


def path_for(db: str | Path) -> Path:
    """Where the cache of store ``db`` lives."""
    db = Path(db)
    return db.with_name(db.name + SUFFIX)


def store_identity(db: str | Path) -> tuple[int, ...] | None:
    """The store file's identity, or None when it cannot be cached: missing, or with a write-ahead
    log whose writes the file does not hold yet."""
    db = Path(db)
    try:
        stat = db.stat()
    except OSError:
        return None
    if db.with_name(db.name + ".wal").exists():
        return None
    return (stat.st_dev, stat.st_ino, stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns)


@dataclass(frozen=True, kw_only=True, slots=True)
class CachedLadder:
    """The manifest's ladder and families, as the cache holds them, and the open file."""

    policy: LadderPolicy
    """The stored manifest's ``[ladder]``."""
    families: tuple[tuple[str, tuple[str, ...]], ...]
    """The manifest's ``[[families]]`` in order: name and anchored patterns."""
    body: IO[bytes]
    """The file, for ``evidence`` and ``known``."""
    body_start: int
    """Offset of the first summary line."""
    body_end: int
    """Size of the file."""

    @property
    def patterns(self) -> list[str]:
        """Every family's patterns in order (``families.first_match`` reads them)."""
        return [p for _, patterns in self.families for p in patterns]

    @property
    def owners(self) -> list[str]:
        """The family each of ``patterns`` belongs to."""
        return [name for name, patterns in self.families for _ in patterns]

    def evidence(self, family: str, *, at_s: int) -> Evidence | None:
        """The completed run of ``family`` with the most GPUs (then the latest, then the first
        name) that ended within the ladder's window before ``at_s``; what ``rungs.preflight``
        selects from the summary table."""
        low = at_s - self.policy.within_s
        candidates = [
            (int(fields[1]), int(fields[0]), bytes.fromhex(fields[2].decode()).decode())
            for fields in self._lines(family)
            if fields[0] != _KNOWN and low <= int(fields[0]) <= at_s
        ]
        if not candidates:
            return None
        gpus, end_s, run = min(candidates, key=lambda c: (-c[0], -c[1], c[2]))
        return Evidence(run=run, gpus=gpus, end_s=end_s)

    def known(self, family: str) -> bool:
        """True when the manifest or some job names ``family``."""
        return any(name == family for name, _ in self.families) or any(
            True for _ in self._lines(family)
        )

    def _lines(self, family: str) -> Iterator[list[bytes]]:
        """The fields after the family of each of its lines."""
        key = family.encode().hex().upper().encode() + b"\t"
        self.body.seek(self._first_at_or_after(key))
        for line in self.body:
            if not line.startswith(key):
                return
            yield line[len(key) :].rstrip(b"\n").split(b"\t")

    def _first_at_or_after(self, key: bytes) -> int:
        """Offset of the first line not sorting before ``key`` (bisection over byte offsets:
        the line starting at or after an offset moves forward as the offset does)."""
        low, high = self.body_start, self.body_end
        while low < high:
            middle = (low + high) // 2
            start = self._line_start(middle)
            if start >= self.body_end or self.body.readline() >= key:
                high = middle
            else:
                low = middle + 1
        return self._line_start(low)

    def _line_start(self, offset: int) -> int:
        """Offset of the first line starting at or after ``offset``; the file is left there."""
        if offset <= self.body_start:
            self.body.seek(self.body_start)
            return self.body_start
        self.body.seek(offset - 1)
        self.body.readline()
        return self.body.tell()


def open_cached(db: str | Path) -> CachedLadder | None:
    """The cache of store ``db`` when it was copied from the store as it is now; None otherwise
    (no cache, another format, a changed store, a file this module did not write)."""
    identity = store_identity(db)
    if identity is None:
        return None
    try:
        body = path_for(db).open("rb")
    except OSError:
        return None
    try:
        cached = _read_header(body, identity)
    except (ValueError, KeyError, TypeError, IndexError):
        cached = None
    if cached is None:
        body.close()
    return cached


def _read_header(body: IO[bytes], identity: tuple[int, ...]) -> CachedLadder | None:
    if body.readline(len(FORMAT) + 2) != (FORMAT + "\n").encode():
        return None
    line = body.readline(_MAX_HEADER_BYTES)
    header = json.loads(line)  # any JSON: a wrong shape raises, and the cache is not read
    if tuple(header["store"]) != identity or not line.endswith(b"\n"):
        return None
    ladder = header["ladder"]
    policy = LadderPolicy(
        rungs=tuple(int(r) for r in ladder["rungs"]), within_days=float(ladder["within_days"])
    )
    families = tuple((str(n), tuple(str(p) for p in ps)) for n, ps in header["families"])
    start = body.tell()
    return CachedLadder(
        policy=policy,
        families=families,
        body=body,
        body_start=start,
        body_end=body.seek(0, os.SEEK_END),
    )


def _header(
    identity: tuple[int, ...], policy: LadderPolicy, families: list[tuple[str, tuple[str, ...]]]
) -> bytes:
    """The first two lines of a cache of the store with ``identity``."""
    header = {
        "store": list(identity),
        "ladder": {"rungs": list(policy.rungs), "within_days": policy.within_days},
        "families": [[name, list(patterns)] for name, patterns in families],
    }
    return (FORMAT + "\n" + json.dumps(header, ensure_ascii=True) + "\n").encode()


# The summary as the cache's sorted lines (see the module's docstring), for DuckDB's COPY: one
# column whose values hold no comma, quote or newline, so the CSV writer writes them as they are.
_BODY_SQL = """
    SELECT line FROM (
        SELECT hex(family) || chr(9) || end_s || chr(9) || gpus || chr(9) || hex(run) AS line
        FROM {summary}
        UNION ALL
        SELECT hex(family) || chr(9) || '-' FROM {families}
    ) ORDER BY line
"""


@dataclass(frozen=True, kw_only=True, slots=True)
class Staged:
    """A cache written next to the store under a temporary name, waiting for ``publish``."""

    path: Path
    """The written file."""
    identity: tuple[int, ...]
    """The store's identity before it was opened to write this."""


def stage(
    con: duckdb.DuckDBPyConnection,
    db: str | Path,
    *,
    identity: tuple[int, ...],
    policy: LadderPolicy,
    families: list[tuple[str, tuple[str, ...]]],
    summary_table: str,
    families_table: str,
) -> Staged | None:
    """Write the cache of store ``db`` (open as ``con``, whose identity was ``identity`` before
    it was opened) from ``summary_table`` and ``families_table`` under a temporary name.

    None when it cannot be written: the cache only spares later checks the store's opening, so a
    directory the check may not write to, or a full disk, leaves them answered from the store."""
    target = path_for(db)
    try:
        fd, name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    except OSError:
        return None
    staged = Path(name)
    body = staged.with_suffix(".body")
    try:
        body_sql = _BODY_SQL.format(
            summary=identifier(summary_table), families=identifier(families_table)
        )
        con.execute(
            f"COPY ({body_sql}) TO {literal(str(body))} (FORMAT csv, HEADER false, QUOTE '', "
            "ESCAPE '')"
        )
        # Whoever may read the store may read its copy (mkstemp makes it private).
        os.fchmod(fd, Path(db).stat().st_mode & 0o666)
        with os.fdopen(fd, "wb") as out, body.open("rb") as lines:
            out.write(_header(identity, policy, families))
            while chunk := lines.read(1 << 20):
                out.write(chunk)
    except (OSError, GpuyieldError, duck.engine().Error):
        staged.unlink(missing_ok=True)
        return None
    finally:
        body.unlink(missing_ok=True)
    return Staged(path=staged, identity=identity)


def publish(staged: Staged, db: str | Path) -> None:
    """Put a staged cache in place when the store is still the one it was copied from (the
    store's lock kept writers out while it was read; a writer since changed its identity)."""
    try:
        if store_identity(db) == staged.identity:
            os.replace(staged.path, path_for(db))
    except OSError:
        pass  # as in stage: without the cache, checks read the store
    finally:
        staged.path.unlink(missing_ok=True)
