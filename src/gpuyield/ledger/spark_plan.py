"""Where the ledger's plan on Spark differs from DuckDB's (chosen here, never by the caller).

Ibis hands Spark each query as SQL text over the ledger's expressions, which nest deeply (a
segment is a job clipped, allocated, blamed, split): Spark analyses and optimises the whole tree
of every query again, and a report runs a few dozen queries. An intermediate the ledger reuses is
therefore computed once and its lineage cut (``localCheckpoint``): later queries start from its
rows, not from its plan. DuckDB, which plans a query in milliseconds, stores the same
intermediates as temporary tables.
"""

from __future__ import annotations

import ibis
import ibis.expr.types as ir


def is_spark(backend: ibis.BaseBackend) -> bool:
    """True for Ibis' PySpark backend."""
    return backend.name == "pyspark"


def checkpoint(backend: ibis.BaseBackend, name: str, table: ir.Table) -> ir.Table:
    """``table`` computed now on the executors, kept there (memory, then disk), as a view
    ``name`` whose plan is a scan of those rows."""
    backend._run_pre_execute_hooks(table)  # in-memory tables (the capacity) reach Spark first
    session = backend._session
    frame = session.sql(backend.compile(table)).localCheckpoint(eager=True)
    frame.createOrReplaceTempView(name)
    return backend.table(name)
