"""A lake to report on, and the engine that reads it: the one thing a report needs to open it."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import ibis

from gpuyield.errors import FieldError
from gpuyield.lake.read import duckdb_lake, lake_contents

#: Engines that read a lake: DuckDB in this process, or Spark (local, or a cluster's master).
ENGINES = ("duckdb", "spark")


@dataclass(frozen=True, kw_only=True, slots=True)
class LakeSource:
    """``gpuyield report --lake DIR --engine E [--spark-master URL]``."""

    path: Path
    """The lake directory."""
    engine: str = "duckdb"
    """``duckdb`` or ``spark``."""
    spark_master: str | None = None
    """With ``spark``: the master (``spark://host:7077``, ``local[2]``); None: ``local[*]``."""

    def __post_init__(self) -> None:
        if self.engine not in ENGINES:
            raise FieldError("lake.engine", f"must be one of {', '.join(ENGINES)}", example="spark")
        if self.spark_master is not None and self.engine != "spark":
            raise FieldError(
                "lake.spark_master", "needs the spark engine", example="spark://127.0.0.1:7077"
            )

    def describe(self) -> str:
        """How the source reads, for progress messages."""
        where = f" on {self.spark_master}" if self.spark_master else ""
        return f"the lake {self.path} ({self.engine}{where})"


@contextmanager
def lake_backend(source: LakeSource) -> Iterator[ibis.BaseBackend]:
    """An Ibis backend whose store tables are the lake's (closed, or Spark stopped, after)."""
    contents = lake_contents(source.path)  # before Spark starts: a wrong path fails fast
    if source.engine == "duckdb":
        with duckdb_lake(source.path) as con:
            yield ibis.duckdb.from_connection(con)
        return
    from gpuyield.lake.spark import spark_backend, spark_session

    with spark_session(source.spark_master) as session:
        yield spark_backend(session, contents)
