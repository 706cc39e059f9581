"""Where the ledger's plan differs by engine (chosen here, never by the caller).

Ibis hands Spark each query as SQL text over the ledger's expressions, which nest deeply (a
segment is a job clipped, allocated, blamed, split): Spark analyses and optimises the whole tree
of every query again, and evaluates a subtree once per branch that reads it. An intermediate the
ledger reads more than once is therefore computed once and cached on the executors, columnar.
DuckDB, which plans a query in milliseconds and shares common subtrees itself, stores only the
intermediates worth a write as temporary tables. What it costs where: docs/scale.md.
"""

from __future__ import annotations

import uuid
from typing import Any

import ibis
import ibis.expr.types as ir


def is_spark(backend: ibis.BaseBackend) -> bool:
    """True for Ibis' PySpark backend."""
    return backend.name == "pyspark"


def materialize(backend: ibis.BaseBackend, name: str, table: ir.Table) -> ir.Table:
    """Compute an intermediate once instead of once per query that uses it.

    A temp table where the backend has them (DuckDB); on Spark its rows, cached now
    (``_cached``); otherwise a temporary view, cached: the view binds a table built in memory
    (the capacity) to this backend, where a bare ``cache()`` would run it on Ibis' default
    backend.
    """
    unique = f"{name}_{uuid.uuid4().hex[:12]}"
    if is_spark(backend):
        return _cached(backend, unique, table)
    try:
        return backend.create_table(unique, table, temp=True)
    except NotImplementedError:
        return backend.create_view(unique, table).cache()


def reused_on_spark(backend: ibis.BaseBackend, name: str, table: ir.Table) -> ir.Table:
    """``table`` materialized on Spark, where every query would plan and run it again; as it is
    elsewhere (DuckDB runs it where it is read, cheaper than writing it)."""
    return materialize(backend, name, table) if is_spark(backend) else table


def small_on_spark(backend: ibis.BaseBackend, table: ir.Table) -> ir.Table:
    """On Spark, a small intermediate brought to the driver and handed back as an in-memory table:
    Spark then knows its size and broadcasts it to a join, where its estimate from the plan (the
    size of the large input it was filtered from) made it shuffle and sort the large side. As it
    is elsewhere."""
    return ibis.memtable(table.to_pyarrow()) if is_spark(backend) else table


def _cached(backend: ibis.BaseBackend, name: str, table: ir.Table) -> ir.Table:
    """``table`` computed now on the executors and kept there (memory, then disk), in Spark's
    columnar cache, as a view ``name``: a query reading a few of its columns scans those only,
    and Spark plans joins with its real size (a checkpoint kept whole rows: scanning 10M of them
    for two columns took 11 s of CPU; and it knew only the plan's estimate)."""
    backend._run_pre_execute_hooks(table)  # in-memory tables (the capacity) reach Spark first
    session = backend._session
    frame = session.sql(backend.compile(table)).cache()
    frame.count()  # computed now, once, not inside the first query that reads it
    frame.createOrReplaceTempView(name)
    _kept(backend).append((name, frame))
    return backend.table(name)


def _kept(backend: ibis.BaseBackend) -> list[tuple[str, Any]]:
    """The views and checkpointed frames this backend's ledgers made (released by ``release``)."""
    kept: list[tuple[str, Any]] | None = getattr(backend, "_gpuyield_kept", None)
    if kept is None:
        kept = []
        backend._gpuyield_kept = kept
    return kept


def release(backend: ibis.BaseBackend) -> None:
    """Drop what the ledger kept on Spark's executors: a driver that reports again (a service,
    a benchmark) would otherwise hold every report's intermediates until it stops."""
    kept = _kept(backend) if is_spark(backend) else []
    while kept:
        name, frame = kept.pop()
        backend._session.catalog.dropTempView(name)
        frame.unpersist()
