"""Where a report's ledger runs: a DuckDB store, or a lake on DuckDB or Spark."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import duckdb
import ibis

from gpuyield import store
from gpuyield.lake import LakeSource, lake_backend
from gpuyield.ledger import backend_for
from gpuyield.ledger.plan import release

#: A store's path, or a lake with its engine.
ReportSource = str | Path | LakeSource


@contextmanager
def ledger_backend(
    source: ReportSource, *, con: duckdb.DuckDBPyConnection | None = None
) -> Iterator[ibis.BaseBackend]:
    """An Ibis backend over ``source``'s tables, open for the block (closed after).

    ``con``: a store's read-only connection the caller opened (and closes), e.g. to interrupt
    the computation from another thread; used as it is."""
    if con is not None:
        yield backend_for(con)
        return
    if isinstance(source, LakeSource):
        with lake_backend(source) as backend:
            try:
                yield backend
            finally:
                release(backend)  # what the ledger kept on Spark's executors
        return
    con = store.connect(source, read_only=True)
    try:
        yield backend_for(con)
    finally:
        con.close()


def describe(source: ReportSource) -> str:
    """The source in a progress message."""
    return source.describe() if isinstance(source, LakeSource) else str(source)
