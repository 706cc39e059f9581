"""Ibis' PySpark backend with its results brought back as Arrow straight from the JVM.

Ibis' own ``to_pyarrow`` on PySpark goes through pandas, where a whole-number column holding a
null turns into floats: a job key past 2**53 came back rounded to another job's key. A lake two
stores wrote moves the second store's job keys by 2**60 (``layout.JOB_KEY_STRIDE``), and a job
breakdown, whose folded rest has a null key, then looked up a job that does not exist (a
KeyError). Spark's ``toArrow`` keeps every column's type, nulls and all.

Imported only once pyspark is known to be there (``spark.spark_backend``): Ibis' backend imports it.
"""

from __future__ import annotations

from typing import Any

import ibis
import ibis.expr.types as ir
import pyarrow as pa
from ibis.backends.pyspark import Backend
from ibis.formats.pyarrow import PyArrowData
from pyspark.sql import SparkSession


class ExactSparkBackend(Backend):
    """Ibis' PySpark backend whose ``to_pyarrow`` is Spark's Arrow, exact for every type."""

    @classmethod
    def on(cls, session: SparkSession) -> ExactSparkBackend:
        """The backend over ``session``. Ibis registers a backend's options (its compiler reads
        ``options.pyspark``) when ``ibis.pyspark`` is first loaded, not when the class is made:
        registered here when nothing has yet, leaving a user's own settings alone."""
        if getattr(ibis.options, cls.name, None) is None:
            cls.register_options()
        backend = cls().connect(session)
        assert isinstance(backend, ExactSparkBackend)
        return backend

    def to_pyarrow(
        self,
        expr: ir.Expr,
        /,
        *,
        params: Any = None,
        limit: int | str | None = None,
        **kwargs: Any,
    ) -> pa.Table:
        """``expr``'s rows as Arrow, of ``expr``'s schema."""
        table_expr = expr.as_table()
        self._run_pre_execute_hooks(table_expr)
        query = self.compile(table_expr, params=params, limit=limit, **kwargs)
        arrow = self._session.sql(query).toArrow()
        return expr.__pyarrow_result__(PyArrowData.convert_table(arrow, table_expr.schema()))
