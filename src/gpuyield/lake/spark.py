"""A lake as the store's tables, on Spark: temporary views over the Parquet files, for Ibis.

The driver is this process; the executors are wherever ``--spark-master`` says (a standalone
cluster's ``spark://host:7077``, or ``local[N]``). They read the Parquet files themselves, so the
lake must be at the same path for them (a shared file system). The ledger runs no Python on them
(no UDFs): they need Java and Spark, and gpuyield only where a deployment ships it anyway.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import ibis

from gpuyield import store
from gpuyield.errors import InputError, MissingExtraError
from gpuyield.lake import layout
from gpuyield.lake.read import (
    LATEST_MANIFEST_SQL,
    RAW_MANIFESTS,
    LakeContents,
    moved_ids_sql,
    table_columns,
)
from gpuyield.lake.spark_jvm import jvm_settings
from gpuyield.sqltext import identifier

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

#: Settings the ledger's plan needs whatever the cluster's defaults: one time zone (epoch
#: seconds must not shift), Arrow between the JVM and Python (results come back as Arrow),
#: adaptive execution (it merges the small shuffle partitions of a report's many small queries).
_SESSION_CONF = {
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    "spark.sql.adaptive.enabled": "true",
    "spark.sql.adaptive.coalescePartitions.enabled": "true",
}


def _require_pyspark() -> None:
    try:
        import pyspark  # noqa: F401
    except ImportError:
        raise MissingExtraError("spark", "pyspark") from None


@contextmanager
def spark_session(master: str | None) -> Iterator[SparkSession]:
    """A Spark session on ``master`` (default ``local[*]``); stopped after, unless it was
    already running in this process (then it belongs to whoever started it)."""
    _require_pyspark()
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None and (master is None or active.sparkContext.master == master):
        _configure(active)
        yield active
        return
    builder = SparkSession.builder.appName("gpuyield report").master(master or "local[*]")
    # Spark SQL's catalog would create ./spark-warehouse wherever the command runs: nothing here
    # writes tables, so it goes to a temporary directory.
    warehouse = tempfile.mkdtemp(prefix="gpuyield-spark-warehouse-")
    builder = builder.config("spark.sql.warehouse.dir", warehouse)
    # Shuffle partitions: a few per core the cluster offers, not Spark's 200 (most of a report's
    # queries are small; adaptive execution merges partitions but still plans 200 tasks).
    builder = builder.config("spark.sql.shuffle.partitions", _shuffle_partitions())
    for key, value in jvm_settings().items():
        builder = builder.config(key, value)
    try:
        session = builder.getOrCreate()
    except Exception as error:  # py4j and Spark raise plain exceptions
        shutil.rmtree(warehouse, ignore_errors=True)
        raise InputError(
            f"cannot start Spark on {master or 'local[*]'}: {str(error).splitlines()[0]}",
            hint="is the master running and reachable (spark://HOST:PORT), and is Java installed?",
        ) from None
    _configure(session)
    try:
        yield session
    finally:
        session.stop()
        shutil.rmtree(warehouse, ignore_errors=True)


def _shuffle_partitions() -> str:
    return os.environ.get("GPUYIELD_SPARK_SHUFFLE_PARTITIONS", "8")


def _configure(session: SparkSession) -> None:
    for key, value in _SESSION_CONF.items():
        session.conf.set(key, value)


def spark_backend(session: SparkSession, contents: LakeContents) -> ibis.BaseBackend:
    """An Ibis backend whose store tables are views over the lake's files."""
    from gpuyield.lake.spark_results import ExactSparkBackend

    schema = store.connect(None)  # the store's schema: types of empty tables, column order
    try:
        for table in layout.store_tables():
            frame = _table_frame(session, contents, table, schema)
            if table == "manifests":
                _manifest_views(session, frame, several_writers=contents.several_writers)
            else:
                frame.createOrReplaceTempView(table)
    finally:
        schema.close()
    return ExactSparkBackend.on(session)


def _manifest_views(session: SparkSession, frame: DataFrame, *, several_writers: bool) -> None:
    """Every writer's release manifests as ``RAW_MANIFESTS``, and ``manifests``: the one read.

    Spark quotes identifiers with backticks, not with sqltext's double quotes: this SQL names
    only the code's own constant views, unquoted.
    """
    frame.createOrReplaceTempView(RAW_MANIFESTS)
    query = LATEST_MANIFEST_SQL if several_writers else f"SELECT * FROM {RAW_MANIFESTS}"
    session.sql(query).createOrReplaceTempView("manifests")


def _table_frame(
    session: SparkSession, contents: LakeContents, table: str, schema: Any
) -> DataFrame:
    """The table's rows from every writer's files (ids moved per writer), or an empty frame of
    the store's schema when the lake has none of it."""
    from pyspark.sql import functions as F

    columns = table_columns(schema, table)
    files = contents.files(table)
    if not files:
        return _empty_frame(session, schema, table)
    frames = []
    for writer in files:
        # No partition discovery: the columns are the files' own (see read._view).
        frame = session.read.option("recursiveFileLookup", "true").parquet(*writer.paths)
        frame = frame.select(
            *[
                F.expr(moved_sql).alias(c)
                if (moved_sql := moved_ids_sql(c, writer.index))
                else F.col(c)
                for c in columns
            ]
        )
        frames.append(frame)
    result = frames[0]
    for frame in frames[1:]:
        result = result.unionByName(frame)
    return result


def _empty_frame(session: SparkSession, schema: Any, table: str) -> DataFrame:
    from pyspark.sql.pandas.types import from_arrow_schema

    arrow = schema.sql(f"SELECT * FROM {identifier(table)} LIMIT 0").to_arrow_table().schema
    return session.createDataFrame([], from_arrow_schema(arrow))
