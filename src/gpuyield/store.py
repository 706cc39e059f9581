"""The DuckDB store: connection, and the single transaction each ingest runs in.

Times are integer epoch seconds (UTC); intervals are half-open ``[start_s, end_s)``. A NULL ``end_s`` means
"still open at the capture time" (running job, open node event); the ledger clips it at the ingest's
``as_of_s``. Natural keys make re-ingest idempotent: a job run is ``(cluster, job_id_raw, submit_s)``
(requeued runs share ``job_id_raw`` but get a new submit time), a node event is
``(cluster, node, start_s, state)``. Loads replace rows by key (delete, then insert) instead of
declaring primary keys, because an index over ten million jobs costs more memory than the ledger.
The tables themselves are ``store_schema``'s (re-exported here: callers know the store by this
module).
"""

from __future__ import annotations

import contextlib
import os
import re
import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import TYPE_CHECKING, TypeAlias

from gpuyield import duck
from gpuyield.errors import InputError
from gpuyield.sqltext import identifier
from gpuyield.store_schema import SCHEMA, SCHEMA_VERSION, samples_sql

if TYPE_CHECKING:
    import duckdb


def duckdb_connect(
    target: str = ":memory:", *, read_only: bool = False, light: bool = False
) -> duckdb.DuckDBPyConnection:
    """A DuckDB connection as gpuyield opens every one: never downloading or loading extensions.

    DuckDB installs and loads "known" extensions on demand (opening an SQLite file fetches the
    sqlite scanner from the internet): gpuyield needs none, and nothing downloads at run time.
    ``light`` opens it with DuckDB's engine alone (``gpuyield.duck``): for plain queries only.
    """
    module = duck.engine() if light else duck.package()
    con: duckdb.DuckDBPyConnection = module.connect(
        target, read_only=read_only, config=_NO_EXTENSIONS
    )
    return con


_NO_EXTENSIONS: dict[str, str | bool | int | float | list[str]] = {
    "autoinstall_known_extensions": False,
    "autoload_known_extensions": False,
}
_SQLITE_MAGIC = b"SQLite format 3\x00"
_STORE_HINT = "the store is derived from the input files: ingest them again into a new store.db"


def connect(
    db: str | Path | None = None, *, read_only: bool = False, light: bool = False
) -> duckdb.DuckDBPyConnection:
    """Open (and create if needed) the store; ``None`` or ``":memory:"`` gives an in-memory store.

    ``light`` (read-only lookups: the submit-time ladder check) opens it without importing
    DuckDB's Python layer; such a connection has no relation methods unless something else
    imported ``duckdb``.
    """
    target = ":memory:" if db is None else str(db)
    if target != ":memory:":
        _check_store_path(Path(target), must_exist=read_only)
    con = _open_waiting(target, read_only=read_only and target != ":memory:", light=light)
    try:
        limit_memory(con)
    except InputError:
        con.close()
        raise
    if target != ":memory:":
        spill = Path(target).with_name(Path(target).name + ".tmp")
        # A parameter, not text: a store named x'; DROP TABLE jobs; ... is only a file name.
        con.execute("SET temp_directory = ?", [str(spill)])
    _check_schema_version(con, target, every_table=not light)
    if not read_only or target == ":memory:":
        con.execute(SCHEMA)
        con.execute(f"CREATE OR REPLACE VIEW gpu_samples AS {samples_sql()}")
        con.execute(
            "INSERT OR REPLACE INTO meta VALUES ('schema_version', ?)", [str(SCHEMA_VERSION)]
        )
    return con


# What GPUYIELD_MEMORY_LIMIT may say: a positive size in DuckDB's units, or a share of the RAM.
_MEMORY_LIMIT = re.compile(r"\s*(\d+(?:\.\d+)?)\s*(B|KB|MB|GB|TB|KiB|MiB|GiB|TiB|%)\s*", re.I)
_MEMORY_HINT = "write it like 3GB, 512MiB or 50% (the default is 3GB); or unset it"


def memory_limit() -> str:
    """The memory a DuckDB connection may use: ``GPUYIELD_MEMORY_LIMIT``, checked, or 3GB.

    Past it DuckDB spills to disk (next to the store) instead of growing; the benchmark's
    10M-job ingest peaks at 3.5 GB RSS with 3 GB, 7.5 GB without.
    """
    text = os.environ.get("GPUYIELD_MEMORY_LIMIT", "3GB")
    match = _MEMORY_LIMIT.fullmatch(text)
    if match is None or float(match.group(1)) <= 0:
        raise InputError(f"GPUYIELD_MEMORY_LIMIT is not a memory size: {text!r}", hint=_MEMORY_HINT)
    return text.strip()


def limit_memory(con: duckdb.DuckDBPyConnection) -> None:
    """Apply ``memory_limit()`` to ``con`` (as a parameter: the variable is never SQL text)."""
    limit = memory_limit()
    try:
        con.execute("SET memory_limit = ?", [limit])
    except duck.engine().Error as error:  # e.g. 1e300GB: a number DuckDB cannot hold
        raise InputError(
            f"GPUYIELD_MEMORY_LIMIT={limit!r}: {str(error).splitlines()[0]}", hint=_MEMORY_HINT
        ) from None


# How long opening a store that another process is writing keeps trying (``waiting_for_writer``).
_WRITER_WAIT_S: ContextVar[float] = ContextVar("gpuyield_writer_wait_s", default=0.0)


@contextmanager
def waiting_for_writer(wait_s: float) -> Iterator[None]:
    """Inside the block, opening a store that another process holds (a collection writing it)
    retries for up to ``wait_s`` seconds before failing (``report --wait``)."""
    token = _WRITER_WAIT_S.set(wait_s)
    try:
        yield
    finally:
        _WRITER_WAIT_S.reset(token)


def _open_waiting(target: str, *, read_only: bool, light: bool) -> duckdb.DuckDBPyConnection:
    deadline = time.monotonic() + _WRITER_WAIT_S.get()
    pause_s = 0.05
    while True:
        try:
            return duckdb_connect(target, read_only=read_only, light=light)
        except duck.engine().Error as error:
            # A writer holds DuckDB's file lock for as long as its connection is open; a
            # collection opens it only for its one transaction, so a short wait outlasts it.
            if not _is_lock_conflict(error) or time.monotonic() + pause_s > deadline:
                raise open_error(target, error) from None
        time.sleep(pause_s)
        pause_s = min(pause_s * 2, 0.5)


def _is_lock_conflict(error: duckdb.Error) -> bool:
    text = str(error)
    return (
        "set lock" in text
        or "Conflicting lock" in text
        or isinstance(error, duck.engine().ConnectionException)
    )


def _check_store_path(path: Path, *, must_exist: bool) -> None:
    """What is wrong with a store path (``store.db``: the CLI's --db), said before DuckDB says
    something vaguer."""
    if "\\" in str(path):
        # DuckDB opens a database at the path with every backslash read as a folder separator.
        raise InputError(
            f"cannot use {path} as a store: DuckDB reads a backslash in it as a folder separator",
            hint="give store.db a path without backslashes",
        )
    try:
        # os.stat, not Path.exists: that says False for a symlink loop instead of why.
        exists = os.path.lexists(path) and bool(os.stat(path))
        is_file = path.is_file()
        head = b""
        if is_file:
            with path.open("rb") as handle:
                head = handle.read(16)
    except OSError as error:  # a symlink loop, a file that cannot be read
        raise InputError(
            f"cannot open database {path}: {error.strerror or error}",
            hint="check the store.db path",
        ) from None
    if must_exist and not exists:
        raise InputError(
            f"no database at {path}",
            hint="ingest first: gpuyield ingest slurm --sacct FILE --db " + str(path),
        )
    if exists and not is_file:
        raise InputError(
            f"{path} is not a file (a directory or a device), not a gpuyield store",
            hint="give store.db a file path",
        )
    if head.startswith(_SQLITE_MAGIC):
        raise InputError(f"{path} is an SQLite database, not a gpuyield store", hint=_STORE_HINT)


# What the operating system says when a store cannot be written (DuckDB passes its words on):
# the store is not damaged, so none of these may read as "corrupted, rebuild it".
_STORAGE_FAULTS = (
    (
        ("No space left on device", "Disk quota exceeded", "File too large"),
        "no space left to write {target} ({said})",
        "free space on that disk (the store is unchanged: nothing of this run was kept) or give "
        "store.db a file on another disk",
    ),
    (
        ("Read-only file system",),
        "{target} is on a read-only file system",
        "write the store on a writable disk (copy it there); reports can read it where it is",
    ),
)


def storage_error(target: str | Path, error: BaseException) -> InputError | None:
    """The error to report when DuckDB could not write the store for want of space or because
    its disk is read-only; None for any other error."""
    text = str(error)
    for words, message, hint in _STORAGE_FAULTS:
        said = next((w for w in words if w in text), None)
        if said is not None:
            return InputError(message.format(target=target, said=said.lower()), hint=hint)
    return None


def open_error(target: str, error: duckdb.Error) -> InputError:
    """The reason DuckDB could not open (or read) a store, in words a user can act on."""
    storage = storage_error(target, error)
    if storage is not None:
        return storage
    text = str(error)
    if _is_lock_conflict(error):
        waited = _WRITER_WAIT_S.get()
        return InputError(
            f"cannot open database {target}: another process holds it"
            + (f" (waited {waited:g} s)" if waited else "")
            + f" ({text.splitlines()[0]})",
            hint="is another gpuyield process (a collection) writing it? DuckDB allows one "
            "writer at a time; report, ladder and idle-now wait for it with store.wait_s (e.g. 1m)",
        )
    return InputError(
        f"{target} is not a readable gpuyield store (corrupted, truncated or another kind of "
        f"file): {text.splitlines()[0]}",
        hint=_STORE_HINT,
    )


#: What a reading library call takes: the store's path, or a connection the caller keeps open.
#: (A string at run time: this module imports no DuckDB until a store is opened, for preflight.)
StoreRef: TypeAlias = "str | Path | duckdb.DuckDBPyConnection"


@contextmanager
def reading(db: StoreRef) -> Iterator[duckdb.DuckDBPyConnection]:
    """A connection to read ``db`` through: a path is opened read-only and closed after; a caller's
    connection is used as it is and left open (the caller owns it)."""
    if not isinstance(db, str | Path):
        yield db
        return
    con = connect(db, read_only=True)
    try:
        yield con
    finally:
        con.close()


def connection_of(backend: object, *, needed_for: str) -> duckdb.DuckDBPyConnection:
    """The DuckDB connection under an Ibis backend over the store; ``needed_for`` says what
    cannot run on another engine."""
    con = getattr(backend, "con", None)
    assert isinstance(con, duck.engine().DuckDBPyConnection), f"{needed_for} needs DuckDB"
    return con


def _check_schema_version(
    con: duckdb.DuckDBPyConnection, target: str, *, every_table: bool = True
) -> None:
    """A store written by another schema version would fail deep inside a query: say so first.

    ``every_table`` also reads each table's first block; a light lookup (``preflight``) reads a
    few tables and turns a damaged one into the same error with ``open_error`` itself.
    """
    try:
        rows = con.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchall()
        if rows and every_table:
            # Reading every table's first block finds a truncated or damaged file now, not in
            # the middle of a report.
            for (table,) in con.execute("SELECT table_name FROM duckdb_tables()").fetchall():
                con.execute(f"SELECT * FROM {identifier(table)} LIMIT 1").fetchall()
    except duck.engine().CatalogException:
        return  # a new store
    except duck.engine().Error as error:
        con.close()
        raise open_error(target, error) from None
    if rows and rows[0][0] != str(SCHEMA_VERSION):
        con.close()
        raise InputError(
            f"{target} has store schema version {rows[0][0]}; this gpuyield reads version "
            f"{SCHEMA_VERSION}",
            hint="ingest the files again into a new store.db (the store is derived from them)",
        )


@contextmanager
def transaction(con: duckdb.DuckDBPyConnection) -> Iterator[None]:
    """All-or-nothing: an exception (or a killed process) leaves the store as it was.

    A full or read-only disk, inside the work or at the commit, is one clear error (the store
    as it was), not a traceback from the engine.
    """
    con.execute("BEGIN TRANSACTION")
    try:
        yield
        con.execute("COMMIT")
    except BaseException as error:
        with contextlib.suppress(duck.engine().Error):  # a failed COMMIT rolled back already
            con.execute("ROLLBACK")
        storage = (
            storage_error(_database_of(con), error)
            if isinstance(error, duck.engine().Error)
            else None
        )
        if storage is not None:
            raise storage from None
        raise


def _database_of(con: duckdb.DuckDBPyConnection) -> str:
    """The file the connection writes (its main database), for messages."""
    try:
        row = con.execute(
            "SELECT path FROM duckdb_databases() WHERE database_name = current_database()"
        ).fetchone()
    except duck.engine().Error:
        return "the store"
    return str(row[0]) if row and row[0] else "the store"


def next_ingest_id(con: duckdb.DuckDBPyConnection) -> int:
    """A fresh ingest id for provenance rows."""
    row = con.execute("SELECT nextval('ingest_ids')").fetchall()[0]
    assert row is not None
    return int(row[0])


def is_new(db: str | Path) -> bool:
    """True when ``db`` names a file that does not exist yet (a first ingest creates it)."""
    return str(db) != ":memory:" and not Path(db).exists()


def remove(path: Path) -> None:
    """Delete a store and its side files: a failed first ingest leaves nothing behind, no empty
    store to puzzle over next time."""
    import shutil

    for leftover in (path, path.with_name(path.name + ".wal")):
        leftover.unlink(missing_ok=True)
    shutil.rmtree(path.with_name(path.name + ".tmp"), ignore_errors=True)


def record_coverage(
    con: duckdb.DuckDBPyConnection,
    *,
    cluster: str,
    start_s: int,
    end_s: int,
    source: str,
    ingest_id: int | None,
) -> None:
    """Record that the accounting of ``cluster`` is complete over ``[start_s, end_s)``.

    ``source`` says how the range was known (a collect's query window, ``--since/--until``, or the
    earliest job start of a file ingested without them); ledger/coverage.py merges the ranges.
    """
    if end_s <= start_s:
        return  # an empty query window covers nothing (a collect run twice in the same second)
    con.execute(
        "INSERT INTO coverage VALUES (?, ?, ?, ?, ?)", [cluster, start_s, end_s, source, ingest_id]
    )
