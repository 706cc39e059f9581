"""The serving state without HTTP: collections, failed collections, outside changes, the lock."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from gpuyield.ingest.slurm import SlurmInputs, ingest_slurm
from gpuyield.serve.state import ReadWriteLock, ServeSettings, ServeState
from tests.serve.conftest import Store, _epoch
from tests.serve.live_server import Recollect, ingest_until, sacct_until

FIRST = "2026-11-03T00:00:00"
_WAIT_S = 300.0


def _store_at(sim_store: Store, tmp_path: Path) -> Path:
    db = tmp_path / "state.duckdb"
    capture, first_s = sim_store.capture, _epoch(FIRST)
    sacct = tmp_path / "sacct-first.psv"
    sacct_until(capture, sacct, first_s)
    inputs = SlurmInputs(sacct=sacct, events=capture / "events.psv", nodes=capture / "nodes.txt",
                         manifest=capture / "manifest.toml")  # fmt: skip
    ingest_slurm(db, inputs, until_s=first_s)
    return db


def _counter(metrics: bytes, name: str) -> float:
    families = text_string_to_metric_families(metrics.decode())
    return next(s.value for f in families for s in f.samples if s.name == name)


def test_a_collection_replaces_numbers_and_page(sim_store: Store, tmp_path: Path) -> None:
    db = _store_at(sim_store, tmp_path)
    collect = Recollect(db, sim_store.capture, tmp_path, _epoch(FIRST), 3600)
    state = ServeState(ServeSettings(db=db, collect_fn=collect, collect_every_s=3600))
    state.refresh()
    before = state.served
    assert before.snapshot is not None
    state.collect()
    after = state.served
    assert after.snapshot is not None and after.snapshot is not before.snapshot
    assert after.snapshot.report.window_end_s == before.snapshot.report.window_end_s + 3600
    assert after.snapshot.report.categories != before.snapshot.report.categories
    assert after.snapshot.page != before.snapshot.page and "<svg" in after.snapshot.page
    assert _counter(after.metrics, "gpuyield_collections_total") == 1
    assert after.stats.last_collection_success_s is not None


def test_a_failed_collection_keeps_the_numbers_and_says_why(
    sim_store: Store, tmp_path: Path
) -> None:
    db = _store_at(sim_store, tmp_path)

    def broken(lock: ReadWriteLock) -> None:
        raise RuntimeError("sacct: connection refused")

    state = ServeState(ServeSettings(db=db, collect_fn=broken, collect_every_s=60, with_page=False))
    state.refresh()
    before = state.served.snapshot
    state.collect()
    assert state.served.snapshot is before
    assert _counter(state.served.metrics, "gpuyield_collection_errors_total") == 1
    assert "connection refused" in state.served.stats.last_error
    assert state.served.stats.collection_running is False


def test_a_missing_store_serves_process_metrics_until_it_appears(tmp_path: Path) -> None:
    state = ServeState(ServeSettings(db=tmp_path / "none.duckdb", with_page=False))
    state.refresh()
    assert state.served.snapshot is None
    assert "no database" in state.served.stats.last_error
    assert _counter(state.served.metrics, "gpuyield_snapshot_errors_total") == 1


def test_an_ingest_from_outside_is_picked_up(sim_store: Store, tmp_path: Path) -> None:
    db = _store_at(sim_store, tmp_path)
    state = ServeState(ServeSettings(db=db, watch_every_s=0.2, with_page=False))
    state.start()
    try:
        first = state.served.snapshot
        assert first is not None
        with state.store_lock.writing():  # as a cron ingest would, between two rebuilds
            ingest_until(db, sim_store.capture, tmp_path, _epoch(FIRST) + 7200)
        deadline = time.monotonic() + _WAIT_S
        while state.served.snapshot is first and time.monotonic() < deadline:
            time.sleep(0.2)
        latest = state.served.snapshot
        assert latest is not None and latest.report.window_end_s == first.report.window_end_s + 7200
    finally:
        state.stop()


def test_readers_share_and_a_writer_waits_for_them() -> None:
    lock = ReadWriteLock()
    wrote = threading.Event()
    with lock.reading(), lock.reading():  # two readers at once

        def write() -> None:
            with lock.writing():
                wrote.set()

        writer = threading.Thread(target=write)
        writer.start()
        assert not wrote.wait(0.3), "the writer went in while readers held the lock"
    assert wrote.wait(60)
    writer.join(60)


def test_a_waiting_writer_holds_back_new_readers() -> None:
    """A writer is never starved by a stream of readers (collections happen under load)."""
    lock = ReadWriteLock()
    order: list[str] = []
    release = threading.Event()
    reading = threading.Event()

    def first_reader() -> None:
        with lock.reading():
            reading.set()
            release.wait(60)
            order.append("reader 1 done")

    def writer() -> None:
        with lock.writing():
            order.append("writer")

    def second_reader() -> None:
        with lock.reading():
            order.append("reader 2")

    threads = [threading.Thread(target=first_reader)]
    threads[0].start()
    assert reading.wait(60)
    threads.append(threading.Thread(target=writer))
    threads[1].start()
    deadline = time.monotonic() + 60
    while lock._writers_waiting == 0 and time.monotonic() < deadline:  # the writer is queued
        time.sleep(0.01)
    threads.append(threading.Thread(target=second_reader))
    threads[2].start()
    # Give the second reader its chance to (wrongly) slip in; if it has not even tried yet, it
    # can only come later anyway, so a slow machine cannot fail this test.
    time.sleep(0.2)
    release.set()
    for thread in threads:
        thread.join(60)
    assert order == ["reader 1 done", "writer", "reader 2"]
