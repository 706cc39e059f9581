"""A lake as the store's tables, on DuckDB: one in-memory database whose tables are views over
the Parquet files the writers' manifests list.

The ledger and the report run on it unchanged, as on a store: same table names, same columns and
types. With several writing stores, each one's ingest ids and job keys move to a range of their
own (``layout.INGEST_ID_STRIDE``): the first store's stay as they are, so a lake written by one
store reports byte for byte what the store reports.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import duckdb

from gpuyield import store
from gpuyield.lake import layout
from gpuyield.lake.layout import WriterManifest
from gpuyield.sqltext import identifier, literal


@dataclass(frozen=True, kw_only=True, slots=True)
class WriterFiles:
    """One writer's files of one table, as absolute paths, and where its ids move."""

    index: int
    """The writer's index: ids move by ``index * INGEST_ID_STRIDE``."""
    paths: tuple[str, ...]


@dataclass(frozen=True, kw_only=True, slots=True)
class LakeContents:
    """What the manifests say a lake holds."""

    lake: Path
    writers: tuple[WriterManifest, ...]

    def files(self, table: str) -> tuple[WriterFiles, ...]:
        """The table's files, per writer that has any."""
        found = []
        for writer in self.writers:
            paths = tuple(str(self.lake / f.path) for f in writer.files if f.table == table)
            if paths:
                found.append(WriterFiles(index=writer.index, paths=paths))
        return tuple(found)

    @property
    def several_writers(self) -> bool:
        """True when more than one store wrote the lake (ids are then moved apart)."""
        return len(self.writers) > 1


def lake_contents(lake: str | Path) -> LakeContents:
    """The manifests of the lake at ``lake`` (an error naming the path if it holds none)."""
    path = Path(lake)
    return LakeContents(lake=path, writers=layout.read_manifests(path))


def moved_ids_sql(column: str, index: int) -> str | None:
    """SQL adding writer ``index``'s offset to an id column (None: the column is no id).

    The column names are unquoted: the expression is read by DuckDB and by Spark alike (Spark
    quotes identifiers with backticks, DuckDB with double quotes); they are the code's own."""
    if index == 0:
        return None
    if column == "ingest_id":
        return f"ingest_id + {literal(index * layout.INGEST_ID_STRIDE)}"
    if column == "job_key":
        return f"job_key + {literal(index * layout.JOB_KEY_STRIDE)}"
    if column == "job_ref":  # the utilization attribution's job runs: a sequence per store
        return f"job_ref + {literal(index * layout.JOB_KEY_STRIDE)}"
    return None


def _select_sql(columns: tuple[str, ...], index: int) -> str:
    return ", ".join(_column_sql(c, index) for c in columns)


def _column_sql(column: str, index: int) -> str:
    moved_sql = moved_ids_sql(column, index)
    return identifier(column) if moved_sql is None else f"{moved_sql} AS {identifier(column)}"


def table_columns(con: duckdb.DuckDBPyConnection, table: str) -> tuple[str, ...]:
    """A store table's columns, in order."""
    rows = con.execute(
        "SELECT column_name FROM duckdb_columns() WHERE table_name = ? AND schema_name = 'main' "
        "ORDER BY column_index",
        [table],
    ).fetchall()
    return tuple(name for (name,) in rows)


def _paths_sql(paths: tuple[str, ...]) -> str:
    return "[" + ", ".join(literal(p) for p in paths) + "]"


#: The view of every writer's release manifests, under the ``manifests`` view that picks one.
RAW_MANIFESTS = "gy_lake_manifests"
#: With several writers, the release manifest is the one ingested last by any of them (each
#: store numbers its own ingests, so ``stored_manifest``'s latest id would favour one store).
#: Read by DuckDB and by Spark: the names are the code's own and left unquoted (the engines quote
#: identifiers differently).
LATEST_MANIFEST_SQL = f"""
    SELECT m.ingest_id, m.document
    FROM {RAW_MANIFESTS} m JOIN ingests i ON i.ingest_id = m.ingest_id
    ORDER BY i.ingested_at DESC, m.ingest_id DESC LIMIT 1
"""


@contextmanager
def duckdb_lake(lake: str | Path) -> Iterator[duckdb.DuckDBPyConnection]:
    """An in-memory DuckDB whose store tables read the lake's Parquet files (closed after)."""
    contents = lake_contents(lake)
    spill = Path(tempfile.mkdtemp(prefix="gpuyield-lake-"))
    con = store.connect(None)
    try:
        # Past the memory limit DuckDB spills; an in-memory database has no store to spill beside.
        con.execute("SET temp_directory = ?", [str(spill)])
        for table in layout.store_tables():
            _view(con, contents, table)
        yield con
    finally:
        con.close()
        shutil.rmtree(spill, ignore_errors=True)


def _view(con: duckdb.DuckDBPyConnection, contents: LakeContents, table: str) -> None:
    """Replace the empty schema table by a view over the lake's files (none: it stays empty).

    The columns are the files' own: the partition directories' names (``cluster=``, ``day=``)
    organise the files, they are not read as columns (a cluster's name is escaped there).
    """
    files = contents.files(table)
    if not files:
        return
    columns = table_columns(con, table)
    union_sql = " UNION ALL ".join(
        f"SELECT {_select_sql(columns, f.index)} FROM read_parquet({_paths_sql(f.paths)}, "
        "hive_partitioning = false)"
        for f in files
    )
    con.execute(f"DROP TABLE {identifier(table)}")
    if table == "manifests" and contents.several_writers:
        con.execute(f"CREATE VIEW {RAW_MANIFESTS} AS {union_sql}")
        con.execute(f"CREATE VIEW {identifier(table)} AS {LATEST_MANIFEST_SQL}")
    else:
        con.execute(f"CREATE VIEW {identifier(table)} AS {union_sql}")
