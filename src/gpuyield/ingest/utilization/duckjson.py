"""Saved ``query_range`` responses read by DuckDB's JSON reader: the fast path for large captures.

A cluster-day of a 100k-GPU cluster at one sample a minute is 144M points; Python's ``json`` reads
them at about 70k a second, DuckDB's reader across files in parallel at millions. One pass reads
every file into the staged series (``promjson.SERIES_SCHEMA``, the temp table ``gy_series``): a
row per series with its labels read once, its times and values as two lists. Everything the
Python reader checks is checked in the same pass (a successful matrix; series with a metric, a
node, a GPU index of digits and values; whole-second times in range; finite non-negative values
or NaN; whole job ids): a point that fails raises (DuckDB's ``error()``), and the caller reads
the files again in Python (``promjson``), which names the file, series and field at fault. Both
readers stage the same rows, and everything after the staging is shared (stage.py).
"""

from __future__ import annotations

from pathlib import Path

import duckdb
import pyarrow as pa

from gpuyield.attribution import MAX_GPU_INDEX
from gpuyield.ingest.utilization.promjson import MAX_JOB_ID, MAX_TIME_S, MetricNames, Role
from gpuyield.sqltext import literal

# The reader's largest object (one answer): it allocates a buffer of this size per thread, so a
# file of many answers (NDJSON) must not make it the file's size. A larger answer is refused.
MAX_ANSWER_BYTES = 1 << 30
# ``[time, "value"]`` pairs read as two strings: cheaper than JSON values, and a number reads as
# its text.
_SERIES = 'STRUCT(metric MAP(VARCHAR, VARCHAR), "values" VARCHAR[][])'
_COLUMNS = f"{{'status': 'VARCHAR', 'data': 'STRUCT(resultType VARCHAR, result {_SERIES}[])'}}"
# Starts the message of every error the checks raise (seen only if the Python reader, which
# then reads the files to name the fault, were to accept what DuckDB refused).
REFUSED = "gpuyield: refused"
# What the checks raise (``error()``) or a cast of a malformed point raises: read the files in
# Python, which names what is wrong. Any other error (memory, disk) is the error to report.
CHECK_ERRORS = (duckdb.InvalidInputException, duckdb.ConversionException)


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


def stage_sql(paths: list[Path], names: MetricNames) -> str:
    """The staged series of the files (``SERIES_SCHEMA`` and ``ingest_id``), checked as they
    are read: anything ``promjson`` would refuse raises. ``gy_sources`` (``source, ingest_id,
    metric``) gives each file's ingest id, and the metric of its series that name none (a
    server's ``last_over_time`` answers).

    Each series' points become two lists of numbers (a pair that is not two items reads as
    null); the checks are on the lists as a whole (no null, least and greatest, times whole),
    which costs a fraction of a check per point.
    """
    job_sql = literal(Role.JOB.value)
    return f"""
        WITH doc AS (
            SELECT filename, f.ingest_id, f.metric AS default_metric,
                   CASE WHEN coalesce(status = 'success' AND data.resultType = 'matrix'
                                      AND data.result IS NOT NULL, false)
                        THEN data.result
                        ELSE {_refused_sql("not a successful matrix")} END AS result
            FROM {_reader_sql(paths)} JOIN gy_sources f ON f.source = filename
        ), series AS (
            SELECT filename, ingest_id, default_metric, unnest(result) AS s,
                   'data.result[' || (generate_subscripts(result, 1) - 1) || ']' AS field
            FROM doc
        ), known AS (
            SELECT filename, ingest_id, field, r.role, r.scale, {_node_sql(names)} AS node,
                   {_gpu_text_sql(names)} AS gpu_text, {_job_label_sql(names)} AS label,
                   nullif(s.metric['modelName'], '') AS model,
                   CASE WHEN s.metric IS NOT NULL THEN s."values"
                        ELSE {_refused_sql("a series without a metric")} END AS vs
            FROM series LEFT JOIN gy_metric_roles r
              ON r.name = coalesce(s.metric['__name__'], default_metric)
        ), typed AS (
            SELECT * EXCLUDE (vs), vs IS NOT NULL AS has_values,
                   list_transform(vs, lambda p: CASE WHEN len(p) = 2
                                                     THEN TRY_CAST(p[1] AS DOUBLE) END) AS tl,
                   list_transform(vs, lambda p: CASE WHEN len(p) = 2
                                                     THEN TRY_CAST(p[2] AS DOUBLE) END) AS rl
            -- A series of a metric not read is kept only for its ``modelName`` label (DCGM's
            -- name of the node's GPU model, ``gpu_models``): a row without role or times,
            -- unchecked, that no step after the staging reads as a series.
            FROM known WHERE role IS NOT NULL OR model IS NOT NULL
        )
        SELECT filename AS source, field, role,
               CASE WHEN role IS NULL OR ({_OK_SERIES}) THEN node
                    ELSE {_refused_sql("a series without node, GPU or values")} END AS node,
               TRY_CAST(gpu_text AS BIGINT) AS gpu,
               CASE WHEN role = {job_sql} THEN NULL ELSE label END AS job_label,
               CASE WHEN role IS NULL THEN NULL
                    WHEN {_OK_TIMES} THEN CAST(tl AS BIGINT[])
                    ELSE {_refused_sql("a malformed time")} END AS ts,
               CASE WHEN role IS NULL THEN NULL
                    WHEN NOT ({_OK_VALUES}) THEN {_refused_sql("a malformed value")}
                    WHEN role = {job_sql} AND NOT ({_OK_JOB_IDS})
                        THEN {_refused_sql("a malformed job id")}
                    WHEN role = {job_sql} OR scale = 1 THEN rl
                    ELSE list_transform(rl, lambda x: x * scale) END AS vs,
               NULL::BIGINT AS step_s, ingest_id, model
        FROM typed
    """


# The checks on a series, its times, its values and its job ids (``typed``'s columns).
_OK_SERIES = f"""node IS NOT NULL AND has_values
    AND coalesce(regexp_full_match(gpu_text, '[0-9]{{1,3}}'), false)
    AND TRY_CAST(gpu_text AS BIGINT) <= {MAX_GPU_INDEX}"""
_OK_TIMES = f"""list_count(tl) = len(tl) AND coalesce(list_min(tl) >= 0, true)
    AND coalesce(list_max(tl) <= {MAX_TIME_S}, true)
    AND tl = CAST(CAST(tl AS BIGINT[]) AS DOUBLE[])"""
_OK_VALUES = """list_count(rl) = len(rl) AND coalesce(list_min(rl) >= 0, true)
    AND NOT list_contains(rl, 'inf'::DOUBLE)"""
_OK_JOB_IDS = f"""list_bool_and(list_transform(rl,
    lambda x: isnan(x) OR (x = floor(x) AND x < {MAX_JOB_ID})))"""


def _refused_sql(why: str) -> str:
    """An error that sends the files to the Python reader (which names the fault)."""
    return f"error({literal(REFUSED + ': ' + why)})"


def _first_sql(labels: tuple[str, ...]) -> str:
    """The first of the labels that is present and not empty, of a series ``s``."""
    return "coalesce(" + ", ".join(f"nullif(s.metric[{literal(k)}], '')" for k in labels) + ")"


def _node_sql(names: MetricNames) -> str:
    """A series' node (Slurm's short name): no ``:port``, no domain; an address keeps its dots."""
    no_port_sql = f"regexp_replace({_first_sql(names.node_labels)}, '^([^:]*):[0-9]+$', '\\1')"
    return (
        f"CASE WHEN regexp_matches({no_port_sql}, '^[0-9.]+$') THEN {no_port_sql} "
        f"ELSE split_part({no_port_sql}, '.', 1) END"
    )


def _gpu_text_sql(names: MetricNames) -> str:
    """A series' GPU index label as given: the first present, even empty (the Python reader
    takes it so, then refuses it)."""
    return "coalesce(" + ", ".join(f"s.metric[{literal(k)}]" for k in names.gpu_labels) + ")"


def _job_label_sql(names: MetricNames) -> str:
    return _first_sql(names.job_labels)


def _reader_sql(paths: list[Path]) -> str:
    files_sql = "[" + ", ".join(literal(str(p)) for p in paths) + "]"
    size = max(_object_size(p) for p in paths)
    # ``unstructured``: one JSON value after another, as the Python reader reads them.
    return (
        f"read_json({files_sql}, columns={_COLUMNS}, maximum_object_size={literal(size)}, "
        "filename=true, format='unstructured', compression='none')"
    )


def _object_size(path: Path) -> int:
    """The file's size, at most ``MAX_ANSWER_BYTES``: the reader allocates a buffer of the
    maximum object size per thread."""
    return min(MAX_ANSWER_BYTES, max(1 << 24, path.stat().st_size + 1))


def source_name(path: Path) -> str:
    """The file name as the reader's ``filename`` column gives it (the path as passed)."""
    return str(path)
