"""The shape every ingest source shares: read -> stage -> load, one ``IngestOutcome`` per file.

- **read**: parse the file into typed rows (an Arrow table or a DuckDB stage), with every bad row
  named by file, line and field (kept and counted in lenient mode).
- **stage**: hold what was read until the whole ingest knows its capture time (``as_of``) and the
  default cluster (events before sacct, sacct before nodes).
- **load**: replace rows with the same natural key (``_sql.replace_rows``), then ``register`` the
  file in ``ingests`` with its SHA-256 and counts, inside the caller's transaction.

A file whose content this store has ingested before from the same source is not read again
(``already_ingested``): the outcome says it was skipped and names the earlier ingest. Slurm's
files are captures of one state, so only the latest ingest of the kind counts; sources whose
inputs add up (utilization samples, one file per metric; telemetry, one log per run) match any
earlier ingest of the same content read with the same options (``latest_only=False``).

An input is a ``FileInfo`` (a scanned file) or an ``InputContent`` (a directory, a server's
responses: anything known by a hash of its content).

In code: a ``Source`` has the steps ``read`` (and, in it, ``stage``) and ``load``; ``ingest_input``
runs them for one input and ``register``s it, and ``atomically`` runs a whole ingest in one
transaction. ``gpuyield.ingest.sources.SOURCES`` lists every source.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, TypeVar, runtime_checkable

import duckdb

from gpuyield import store
from gpuyield.errors import InputError

# The manifest is a statement, not a capture: the same manifest under other options is the same.
_OPTIONS_FREE_SOURCES = frozenset({"manifest"})


class Content(Protocol):
    """What ``ingests`` records of an input: where it came from and what it held."""

    @property
    def path(self) -> Path | str: ...
    @property
    def sha256(self) -> str: ...
    @property
    def size_bytes(self) -> int | None: ...


@dataclass(frozen=True, kw_only=True, slots=True)
class InputContent:
    """An input known by a hash of its content rather than by a scan of one file."""

    path: str
    """The file, directory or URL read."""
    sha256: str
    """Hex SHA-256 over the content (a directory's names and files, a server's responses)."""
    size_bytes: int | None = None
    """Size recorded in ``ingests``; None where a size says nothing (a directory, a server)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class IngestOutcome:
    """What happened to one input file."""

    source: str
    """Source kind: slurm.sacct, slurm.events, slurm.nodes, slurm.reservations, manifest,
    telemetry, utilization."""
    path: str
    """The file."""
    sha256: str
    """Content hash."""
    ingest_id: int
    """Provenance id (an earlier one when the file was skipped as already ingested)."""
    skipped: bool
    """True when the same content had been ingested before: nothing changed."""
    rows_read: int = 0
    """Records read."""
    rows_rejected: int = 0
    """Records rejected (lenient mode)."""
    rows_skipped: int = 0
    """Records deliberately not loaded (sacct step rows, duplicates)."""


def already_ingested(
    con: duckdb.DuckDBPyConnection,
    source: str,
    info: Content,
    options: str,
    *,
    latest_only: bool = True,
) -> IngestOutcome | None:
    """The skipped outcome when this content was ingested before, else None.

    With ``latest_only`` (a capture of one state: Slurm's files, the manifest) only the latest
    ingest of the kind counts, and the same content under other options is an error (the same
    capture read another way would give other rows). Without it (inputs that add up: samples,
    run logs) any earlier ingest of the same content with the same options counts, and other
    options read it again.
    """
    if latest_only:
        ingest_id = _latest_ingest(con, source, info, options)
    else:
        rows = con.execute(
            "SELECT min(ingest_id) FROM ingests WHERE source = ? AND sha256 = ? AND options = ?",
            [source, info.sha256, options],
        ).fetchall()
        ingest_id = rows[0][0]
    if ingest_id is None:
        return None
    return IngestOutcome(
        source=source, path=str(info.path), sha256=info.sha256, ingest_id=ingest_id, skipped=True
    )


def _latest_ingest(
    con: duckdb.DuckDBPyConnection, source: str, info: Content, options: str
) -> int | None:
    """The latest ingest of ``source`` when it holds this content; an error when it was read
    under other options."""
    # Only the latest ingest of the kind makes a file a no-op: manifest A, then B, then A again
    # must put A back in effect (the latest ingest of a kind wins, whatever its hash).
    rows = con.execute(
        "SELECT ingest_id, options, sha256 FROM ingests WHERE source = ? "
        "ORDER BY ingest_id DESC LIMIT 1",
        [source],
    ).fetchall()
    if not rows or rows[0][2] != info.sha256:
        return None
    row = rows[0]
    if source not in _OPTIONS_FREE_SOURCES and _parsing(row[1]) != _parsing(options):
        raise InputError(
            f"{info.path} was ingested before (ingest #{row[0]}) with other options {row[1]}",
            hint="re-ingest with the same ingest.tz/ingest.fields/ingest.until, or use a new "
            "store.db",
        )
    return int(row[0])


def _parsing(options: str) -> dict[str, object]:
    """The options that change how a file is read: an unchanged file under a new ``--until``
    (yesterday's inventory in today's cron run) is the same data."""
    parsed: dict[str, object] = json.loads(options)
    parsed.pop("until_s", None)
    return parsed


def register(
    con: duckdb.DuckDBPyConnection,
    source: str,
    info: Content,
    ingest_id: int,
    as_of: int | None,
    options: str,
    *,
    read: int,
    rejected: int = 0,
    skipped: int = 0,
) -> IngestOutcome:
    """Record a loaded file in ``ingests`` (its provenance) and say what it added."""
    con.execute(
        "INSERT INTO ingests VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, current_timestamp)",
        [
            ingest_id,
            source,
            str(info.path),
            info.sha256,
            info.size_bytes,
            read,
            rejected,
            skipped,
            as_of,
            options,
        ],
    )
    return IngestOutcome(
        source=source,
        path=str(info.path),
        sha256=info.sha256,
        ingest_id=ingest_id,
        skipped=False,
        rows_read=read,
        rows_rejected=rejected,
        rows_skipped=skipped,
    )


@dataclass(frozen=True, kw_only=True, slots=True)
class RowCounts:
    """What ``load`` stored of one input, as ``ingests`` records it."""

    read: int
    """Records read."""
    rejected: int = 0
    """Records rejected (lenient mode)."""
    skipped: int = 0
    """Records deliberately not loaded (steps, duplicates, torn lines)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Loaded:
    """An input ``load`` stored: its provenance id and its counts."""

    ingest_id: int
    """The id its rows carry."""
    counts: RowCounts
    """What it stored."""


RunT = TypeVar("RunT", contravariant=True)
StagedT = TypeVar("StagedT")


@runtime_checkable
class Source(Protocol[RunT, StagedT]):
    """One kind of input: its name in ``ingests`` and the steps every ingest of it takes.

    ``RunT`` is what the ingest knows of the whole call (its connection, options, the capture
    time once known); ``StagedT`` is what ``read`` holds for ``load`` (an Arrow table, a DuckDB
    stage, a parsed manifest).
    """

    @property
    def kind(self) -> str:
        """``ingests.source`` and ``IngestOutcome.source`` (slurm.sacct, telemetry, ...)."""
        ...

    @property
    def input_field(self) -> str:
        """The library field naming its input (``ingest.sacct``; the CLI's flag maps from it)."""
        ...

    @property
    def latest_only(self) -> bool:
        """A capture of one state (only the latest ingest of the kind counts, see
        ``already_ingested``), not inputs that add up."""
        ...

    def read(self, run: RunT, info: Content) -> StagedT:
        """Parse (and stage) the input; every bad record named, or counted in lenient mode."""
        ...

    def stage(self, run: RunT, staged: StagedT) -> None:
        """Hold what was read until every input is: note what it says of the whole ingest (its
        capture time, its cluster, warnings)."""
        ...

    def load(self, run: RunT, info: Content, staged: StagedT) -> Loaded:
        """Store what was read (rows replace rows of the same natural key), in the caller's
        transaction, under a fresh ingest id (or the one the read took)."""
        ...


class IngestRun(Protocol):
    """What ``ingest_input`` needs of an ingest: where to write and how it read."""

    @property
    def con(self) -> duckdb.DuckDBPyConnection: ...
    @property
    def options(self) -> str: ...


RunU = TypeVar("RunU", bound=IngestRun)


def ingest_input(
    run: RunU, source: Source[RunU, StagedT], info: Content, *, as_of_s: int | None = None
) -> IngestOutcome:
    """One input through every step: skipped when ingested before, else read, stage, load and
    register (an ingest that must read every input before it loads any runs the steps itself)."""
    seen = already_ingested(run.con, source.kind, info, run.options, latest_only=source.latest_only)
    if seen is not None:
        return seen
    staged = source.read(run, info)
    source.stage(run, staged)
    return register_loaded(run, source, info, source.load(run, info, staged), as_of_s)


def register_loaded(
    run: RunU,
    source: Source[RunU, StagedT],
    info: Content,
    loaded: Loaded,
    as_of_s: int | None,
    *,
    options: str | None = None,
) -> IngestOutcome:
    """``register`` what ``load`` stored (read with ``options``, by default the run's)."""
    counts = loaded.counts
    return register(
        run.con,
        source.kind,
        info,
        loaded.ingest_id,
        as_of_s,
        run.options if options is None else options,
        read=counts.read,
        rejected=counts.rejected,
        skipped=counts.skipped,
    )


ResultT = TypeVar("ResultT")


class _NoRetry(Exception):
    """Never raised: ``atomically`` without a slower way to redo the work."""


def atomically(
    db: str | Path | None,
    con: duckdb.DuckDBPyConnection | None,
    work: Callable[[duckdb.DuckDBPyConnection, bool], ResultT],
    *,
    redo_on: type[Exception] | tuple[type[Exception], ...] = _NoRetry,
) -> ResultT:
    """Run ``work(con, fast)`` in one transaction on ``con`` (or a connection to ``db`` opened
    and closed here): all of an ingest or nothing of it.

    ``work`` first runs with ``fast=True``; when it raises ``redo_on`` (the fast way met
    something only the slow way names or takes), the transaction is rolled back and ``work``
    runs again with ``fast=False`` in a new one.
    """
    with _connection(db, con) as connection:
        try:
            with store.transaction(connection):
                return work(connection, True)
        except redo_on:
            with store.transaction(connection):
                return work(connection, False)


@contextmanager
def _connection(
    db: str | Path | None, con: duckdb.DuckDBPyConnection | None
) -> Iterator[duckdb.DuckDBPyConnection]:
    if con is not None:
        yield con
        return
    own = store.connect(db)
    try:
        yield own
    finally:
        own.close()
