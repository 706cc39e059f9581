"""DuckDB, imported as lightly as each use allows.

``import duckdb`` costs about four times its native engine alone (``_duckdb``): the package's Python
layer (relations, Arrow and Polars sources, version metadata) comes on top. ``gpuyield preflight``
runs at every ``sbatch`` and needs only the engine (connect, execute, fetch, the exception
classes), so it asks for ``engine()``. Everything else asks for ``package()``: the package adds
the relation methods (``con.sql``, ``.arrow()``) to the connection class when it is imported, and
code that uses them must not get a connection before that. The exception classes are the same
objects either way (the package re-exports the engine's).
"""

from __future__ import annotations

import sys
from types import ModuleType


def package() -> ModuleType:
    """The ``duckdb`` package, whole."""
    import duckdb

    return duckdb


def engine() -> ModuleType:
    """DuckDB's native engine: the package if something imported it already, else ``_duckdb``
    alone (the package where a DuckDB release no longer ships it under that name)."""
    loaded = sys.modules.get("duckdb")
    if loaded is not None:
        return loaded
    try:
        import _duckdb
    except ImportError:
        return package()
    return _duckdb
