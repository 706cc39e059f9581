"""Saved ``query_range`` responses read by DuckDB's JSON reader: the fast path for large captures.

A cluster-day of a 100k-GPU cluster at one sample a minute is 144M points; Python's ``json`` reads
them at about 70k a second, DuckDB's reader across files in parallel at millions. Two passes: one on
a connection of its own checks everything ``promjson`` checks (a successful matrix, series with node
and GPU labels and values, whole-second times, finite non-negative values), then the store's
connection loads. Anything the check refuses goes to ``promjson``, which names the series and field
at fault. Labels are read once per series, not once per point.
"""

from __future__ import annotations

import os
from pathlib import Path

import duckdb
import pyarrow as pa

from gpuyield.ingest.utilization.promjson import MetricNames, Role

# The reader's largest object: a 32-bit count of bytes (a larger response takes the slow path).
_MAX_OBJECT_BYTES = (1 << 32) - 1
# ``[time, "value"]`` pairs read as two strings: cheaper than JSON values, and a number reads as
# its text.
_SERIES = 'STRUCT(metric MAP(VARCHAR, VARCHAR), "values" VARCHAR[][])'
_COLUMNS = f"{{'status': 'VARCHAR', 'data': 'STRUCT(resultType VARCHAR, result {_SERIES}[])'}}"


def readable(paths: list[Path], names: MetricNames) -> dict[str, frozenset[str]] | None:
    """The nodes of every file (by ``source_name``) when DuckDB reads every file and everything
    in them passes the checks; None otherwise.

    On a connection of its own: a reader error must not abort the store's transaction.
    """
    con = duckdb.connect()
    try:
        con.execute(f"SET memory_limit = '{os.environ.get('GPUYIELD_MEMORY_LIMIT', '3GB')}'")
        con.execute("SET enable_progress_bar = false")  # the CLI shows its own progress
        register_roles(con, names)
        rows = con.execute(_check_sql(paths, names)).fetchall()
    except duckdb.Error:
        return None
    finally:
        con.close()
    if len(rows) != len(paths) or not all(r[1] and r[2] == 0 for r in rows):
        return None
    return {str(r[0]): frozenset(n for n in r[3] if n is not None) for r in rows}


def register_roles(con: duckdb.DuckDBPyConnection, names: MetricNames) -> None:
    """The metric -> role and scale table the reader's SQL joins (``gy_metric_roles``)."""
    roles = pa.table(
        {
            "name": list(names.metrics),
            "role": [r.value for r, _ in names.metrics.values()],
            "scale": [s for _, s in names.metrics.values()],
        }
    )
    con.register("gy_metric_roles", roles)


def _check_sql(paths: list[Path], names: MetricNames) -> str:
    """Per file: a successful matrix?, how many series or points are bad, its nodes. A file or a
    series with nothing in it still gives one (null) row, so it is counted and checked."""
    node, gpu, _ = _labels(names)
    return f"""
        WITH doc AS (
            SELECT filename AS source,
                   coalesce(status = 'success' AND data.resultType = 'matrix'
                            AND data.result IS NOT NULL, false) AS doc_ok,
                   unnest(CASE WHEN len(data.result) > 0 THEN data.result
                               ELSE [NULL::{_SERIES}] END) AS s
            FROM {_reader(paths)}
        ), series AS (
            SELECT source, doc_ok, r.role IS NOT NULL AS known, {node} AS node, {gpu} AS gpu,
                   s."values" IS NOT NULL AS has_values,
                   CASE WHEN len(s."values") > 0 THEN s."values"
                        ELSE [NULL::VARCHAR[]] END AS vs
            FROM doc LEFT JOIN gy_metric_roles r ON r.name = s.metric['__name__']
        ), pts AS (
            SELECT source, doc_ok, known, node, gpu, has_values, unnest(vs) AS v FROM series
        ), typed AS (
            SELECT *, TRY_CAST(v[1] AS DOUBLE) AS t, TRY_CAST(v[2] AS DOUBLE) AS raw FROM pts
        )
        SELECT source, bool_and(doc_ok),
               count(*) FILTER (WHERE known AND NOT coalesce(
                   has_values AND node IS NOT NULL AND gpu IS NOT NULL
                   AND (v IS NULL OR (len(v) = 2 AND t IS NOT NULL AND t = floor(t)
                        AND raw IS NOT NULL AND (isnan(raw) OR (raw >= 0 AND isfinite(raw))))),
                   false)),
               list(DISTINCT node) FILTER (WHERE known)
        FROM typed GROUP BY source
    """


def points_sql(paths: list[Path], names: MetricNames) -> str:
    """Every point of the files as ``promjson.RAW_SCHEMA`` rows plus ``source`` (the file);
    only for files ``readable`` passed."""
    node, gpu, job = _labels(names)
    job_role = _quote(Role.JOB.value)
    return f"""
        WITH doc AS (
            SELECT filename AS source, unnest(data.result) AS s FROM {_reader(paths)}
        ), series AS (
            SELECT source, r.role, r.scale, {node} AS node, {gpu} AS gpu, {job} AS label_job,
                   s."values" AS vs
            FROM doc JOIN gy_metric_roles r ON r.name = s.metric['__name__']
        ), pts AS (
            SELECT source, role, scale, node, gpu, label_job, unnest(vs) AS v FROM series
        ), typed AS (
            SELECT source, role, scale, node, gpu, label_job,
                   CAST(CAST(v[1] AS DOUBLE) AS BIGINT) AS t_s, CAST(v[2] AS DOUBLE) AS raw
            FROM pts
        )
        SELECT role, node, gpu,
               CASE WHEN role = {job_role}
                    THEN CASE WHEN raw > 0 THEN CAST(CAST(raw AS BIGINT) AS VARCHAR) END
                    ELSE label_job END AS job_id,
               t_s,
               CASE WHEN role = {job_role} THEN CAST('NaN' AS DOUBLE) ELSE raw * scale END AS value,
               source
        FROM typed
        WHERE NOT isnan(raw) OR role = {job_role}
    """


def _labels(names: MetricNames) -> tuple[str, str, str]:
    """SQL for a series' node (Slurm's short name), GPU index and job label, from ``s.metric``."""

    def first(labels: tuple[str, ...]) -> str:
        return "coalesce(" + ", ".join(f"nullif(s.metric[{_quote(k)}], '')" for k in labels) + ")"

    host = first(names.node_labels)
    no_port = f"regexp_replace({host}, '^([^:]*):[0-9]+$', '\\1')"
    node = (
        f"CASE WHEN regexp_matches({no_port}, '^[0-9.]+$') THEN {no_port} "
        f"ELSE split_part({no_port}, '.', 1) END"
    )
    gpu = f"TRY_CAST({first(names.gpu_labels)} AS BIGINT)"
    return node, gpu, first(names.job_labels)


def _reader(paths: list[Path]) -> str:
    files = "[" + ", ".join(_quote(str(p)) for p in paths) + "]"
    size = max(_object_size(p) for p in paths)
    return f"read_json({files}, columns={_COLUMNS}, maximum_object_size={size}, filename=true)"


def source_name(path: Path) -> str:
    """The file name as the reader's ``filename`` column gives it (the path as passed)."""
    return str(path)


def _object_size(path: Path) -> int:
    """The file's size: the reader allocates a buffer of the maximum object size per thread."""
    return min(_MAX_OBJECT_BYTES, max(1 << 24, path.stat().st_size + 1))


def _quote(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"
