"""Saved ``query_range`` responses read by DuckDB's JSON reader: the fast path for large captures.

A cluster-day of a 100k-GPU cluster at one sample a minute is 144M points; Python's ``json`` reads
them at about 70k a second, DuckDB's reader in parallel at millions. The reader only takes what it
can check in SQL: a successful matrix whose series have the node and GPU labels and finite,
non-negative values. Anything else falls back to ``promjson`` (``None`` here), which reads the file
again to name the series and field at fault.
"""

from __future__ import annotations

import os
from pathlib import Path

import duckdb
import pyarrow as pa

from gpuyield.ingest.utilization.promjson import MetricNames, Role

# The reader's largest object: a 32-bit count of bytes (a larger response takes the slow path).
_MAX_OBJECT_BYTES = (1 << 32) - 1
_COLUMNS = (
    "{'status': 'VARCHAR', 'data': 'STRUCT(resultType VARCHAR, "
    'result STRUCT(metric MAP(VARCHAR, VARCHAR), "values" JSON[])[])\'}'
)


def readable(paths: list[Path], names: MetricNames) -> bool:
    """True when DuckDB can read every file and every point passes the checks.

    On a connection of its own: a reader error must not abort the store's transaction.
    """
    con = duckdb.connect()
    try:
        con.execute(f"SET memory_limit = '{os.environ.get('GPUYIELD_MEMORY_LIMIT', '3GB')}'")
        con.execute("SET enable_progress_bar = false")  # the CLI shows its own progress
        register_roles(con, names)
        checks = con.execute(
            f"SELECT count(*) FILTER (WHERE NOT ok) FROM ({points_sql(paths, names)})"
        ).fetchone()
        return (
            checks is not None
            and checks[0] == 0
            and _is_matrix(con, paths)
            and _series_complete(con, paths, names)
        )
    except duckdb.Error:
        return False
    finally:
        con.close()


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


def _is_matrix(con: duckdb.DuckDBPyConnection, paths: list[Path]) -> bool:
    row = con.execute(
        f"""SELECT bool_and(status = 'success' AND data.resultType = 'matrix'
                            AND data.result IS NOT NULL), count(*)
            FROM {_reader(paths)}"""
    ).fetchone()
    return row is not None and bool(row[0]) and row[1] == len(paths)


def _series_complete(con: duckdb.DuckDBPyConnection, paths: list[Path], names: MetricNames) -> bool:
    """Every series of a known metric has values and its node and GPU labels (a series without
    values has no points for the point checks to see)."""
    node = _first(names.node_labels)
    gpu = _first(names.gpu_labels)
    row = con.execute(
        f"""WITH doc AS (SELECT unnest(data.result) AS s FROM {_reader(paths)})
            SELECT count(*) FROM doc JOIN gy_metric_roles r ON r.name = s.metric['__name__']
            WHERE s."values" IS NULL OR {node.replace("m[", "s.metric[")} IS NULL
               OR TRY_CAST({gpu.replace("m[", "s.metric[")} AS BIGINT) IS NULL"""
    ).fetchone()
    return row is not None and row[0] == 0


def _first(labels: tuple[str, ...]) -> str:
    return "coalesce(" + ", ".join(f"nullif(m[{_quote(k)}], '')" for k in labels) + ")"


def _reader(paths: list[Path]) -> str:
    files = "[" + ", ".join(_quote(str(p)) for p in paths) + "]"
    size = max(_object_size(p) for p in paths)
    return f"read_json({files}, columns={_COLUMNS}, maximum_object_size={size}, filename=true)"


def points_sql(paths: list[Path], names: MetricNames) -> str:
    """Every point of the files as ``RAW_SCHEMA`` rows plus ``source`` (the file) and ``ok``."""

    host = _first(names.node_labels)
    # Slurm's short name: no :port, and no domain unless the host is an IP address.
    no_port = f"regexp_replace({host}, '^([^:]*):[0-9]+$', '\\1')"
    node = (
        f"CASE WHEN regexp_matches({no_port}, '^[0-9.]+$') THEN {no_port} "
        f"ELSE split_part({no_port}, '.', 1) END"
    )
    gpu = f"TRY_CAST({_first(names.gpu_labels)} AS BIGINT)"
    job = _first(names.job_labels)
    job_role = _quote(Role.JOB.value)
    return f"""
        WITH doc AS (
            SELECT filename AS source, unnest(data.result) AS s FROM {_reader(paths)}
        ), series AS (
            SELECT source, s.metric AS m, s."values" AS vs, r.role, r.scale
            FROM doc JOIN gy_metric_roles r ON r.name = s.metric['__name__']
        ), pts AS (
            SELECT source, m, role, scale, unnest(vs) AS v FROM series
        ), typed AS (
            SELECT source, role, scale, {node} AS node, {gpu} AS gpu, {job} AS label_job,
                   TRY_CAST(v->>0 AS DOUBLE) AS t, TRY_CAST(v->>1 AS DOUBLE) AS raw
            FROM pts
        )
        SELECT role, node, gpu,
               CASE WHEN role = {job_role}
                    THEN CASE WHEN raw > 0 THEN CAST(CAST(raw AS BIGINT) AS VARCHAR) END
                    ELSE label_job END AS job_id,
               CAST(t AS BIGINT) AS t_s,
               CASE WHEN role = {job_role} THEN CAST('NaN' AS DOUBLE) ELSE raw * scale END AS value,
               source,
               node IS NOT NULL AND gpu IS NOT NULL AND t IS NOT NULL AND t = floor(t)
                   AND (isnan(raw) OR (raw >= 0 AND isfinite(raw))) AS ok
        FROM typed
        WHERE raw IS NULL OR NOT isnan(raw) OR role = {job_role}
    """


def source_name(path: Path) -> str:
    """The file name as the reader's ``filename`` column gives it (the path as passed)."""
    return str(path)


def _object_size(path: Path) -> int:
    """The file's size: the reader allocates a buffer of the maximum object size per thread."""
    return min(_MAX_OBJECT_BYTES, max(1 << 24, path.stat().st_size + 1))


def _quote(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"
