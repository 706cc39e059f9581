"""The serving process's state: the current snapshot, collections on a schedule, the store lock.

DuckDB lets one process open a store either read-write or read-only, never both at once, so inside
``gpuyield serve`` a collection (which writes) and a request that reads the store (an
``/api/report`` for another window) take turns under one readers-writer lock. Everything else is
answered from the snapshot in memory, which a collection replaces whole when it is done.
"""

from __future__ import annotations

import dataclasses
import os
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from gpuyield.errors import GpuyieldError
from gpuyield.serve.metrics import CollectionStats, render
from gpuyield.serve.snapshot import Snapshot, build_snapshot

# How long stopping waits for the refresh thread (Ctrl-C must not wait for a 10M-job ledger).
_STOP_WAIT_S = 5.0


class ReadWriteLock:
    """Many readers or one writer; a waiting writer stops new readers, so it is never starved."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._readers = 0
        self._writing = False
        self._writers_waiting = 0

    @contextmanager
    def reading(self) -> Iterator[None]:
        with self._cond:
            while self._writing or self._writers_waiting:
                self._cond.wait()
            self._readers += 1
        try:
            yield
        finally:
            with self._cond:
                self._readers -= 1
                self._cond.notify_all()

    @contextmanager
    def writing(self) -> Iterator[None]:
        with self._cond:
            self._writers_waiting += 1
            while self._writing or self._readers:
                self._cond.wait()
            self._writers_waiting -= 1
            self._writing = True
        try:
            yield
        finally:
            with self._cond:
                self._writing = False
                self._cond.notify_all()


@dataclass(frozen=True, kw_only=True, slots=True)
class Served:
    """What a request reads: one snapshot and its exposition, replaced together."""

    snapshot: Snapshot | None
    """None until the first snapshot is built."""
    stats: CollectionStats
    """The process's collection figures when ``metrics`` was rendered."""
    metrics: bytes
    """``/metrics``' body."""


@dataclass(frozen=True, kw_only=True, slots=True)
class ServeSettings:
    """How the serving process reads and refreshes the store."""

    db: Path
    """The DuckDB store."""
    collect_fn: Callable[[ReadWriteLock], object] | None = None
    """Called on the schedule with the store's lock to bring new data into the store
    (``gpuyield collect``); it takes ``writing()`` only while it writes, so requests are answered
    while Slurm's commands run."""
    collect_every_s: float | None = None
    """Seconds between collections; None: no collection."""
    watch_every_s: float = 30.0
    """How often to look for changes others made to the store (an ingest from cron)."""
    top_accounts: int = 50
    """Accounts exported one by one; the rest are summed as ``(others)``."""
    with_page: bool = True
    """Render the HTML page (needs the html extra)."""


class ServeState:
    """The current ``Served`` and the thread that refreshes it."""

    def __init__(self, settings: ServeSettings) -> None:
        self.settings = settings
        self.store_lock = ReadWriteLock()
        self._swap = threading.Lock()
        self._stats = CollectionStats()
        self._served = Served(snapshot=None, stats=self._stats, metrics=render(None, self._stats))
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._seen_store: tuple[int, ...] | None = None

    @property
    def served(self) -> Served:
        """The current snapshot (one attribute read: a request never sees half a swap)."""
        return self._served

    def _update(self, snapshot: Snapshot | None = None, **changes: object) -> None:
        with self._swap:
            self._stats = dataclasses.replace(self._stats, **changes)  # type: ignore[arg-type]
            kept = snapshot if snapshot is not None else self._served.snapshot
            self._served = Served(
                snapshot=kept, stats=self._stats, metrics=render(kept, self._stats)
            )

    def refresh(self) -> None:
        """Rebuild the snapshot from the store; on failure keep serving the previous one."""
        try:
            with self.store_lock.reading():
                signature = _signature(self.settings.db)
                snapshot = build_snapshot(
                    self.settings.db,
                    top_accounts=self.settings.top_accounts,
                    with_page=self.settings.with_page,
                )
        except Exception as error:  # the server outlives a bad rebuild (DuckDB busy, bad data)
            message = error.message if isinstance(error, GpuyieldError) else repr(error)
            self._update(
                snapshot_errors_total=self._stats.snapshot_errors_total + 1,
                last_error=f"snapshot: {message}",
            )
            return
        self._seen_store = signature
        self._update(snapshot=snapshot)

    def collect(self) -> None:
        """Run one collection (it takes the write lock for its write), then rebuild the
        snapshot."""
        collect_fn = self.settings.collect_fn
        if collect_fn is None:
            return
        self._update(collection_running=True)
        started = time.monotonic()
        try:
            collect_fn(self.store_lock)
        except Exception as error:  # a failed collection must not stop the server
            self._update(
                collection_running=False,
                collections_total=self._stats.collections_total + 1,
                collection_errors_total=self._stats.collection_errors_total + 1,
                last_collection_duration_s=time.monotonic() - started,
                last_error=f"collection: {getattr(error, 'message', error)}",
            )
            return
        self._update(
            collection_running=False,
            collections_total=self._stats.collections_total + 1,
            last_collection_duration_s=time.monotonic() - started,
            last_collection_success_s=time.time(),
        )
        self.refresh()

    def start(self) -> None:
        """Build the first snapshot, then refresh in the background."""
        self.refresh()
        self._thread = threading.Thread(target=self._loop, name="gpuyield-refresh", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop the background thread, waiting a little for the work in progress.

        Not for long: a snapshot of a large store takes minutes and is only reads, and a collection
        is one transaction, which DuckDB rolls back if the process ends inside it.
        """
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=_STOP_WAIT_S)

    def _loop(self) -> None:
        every = self.settings.collect_every_s
        next_collect = time.monotonic() + every if every else None
        while not self._stop.is_set():
            if next_collect is not None and time.monotonic() >= next_collect:
                self.collect()
                next_collect = time.monotonic() + (every or 0)
            elif _signature(self.settings.db) != self._seen_store:
                self.refresh()  # someone else (an ingest from cron) changed the store
            waits = [self.settings.watch_every_s]
            if next_collect is not None:
                waits.append(max(next_collect - time.monotonic(), 0.0))
            self._stop.wait(min(waits))


def _signature(db: Path) -> tuple[int, ...]:
    """Modification time and size of the store and its write-ahead log: every write changes one."""
    signature: list[int] = []
    for path in (db, db.with_name(db.name + ".wal")):
        try:
            stat = os.stat(path)
        except FileNotFoundError:
            signature += [0, 0]
            continue
        signature += [stat.st_mtime_ns, stat.st_size]
    return tuple(signature)
