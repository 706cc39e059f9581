"""Saved ``query_range`` responses read by DuckDB's JSON reader: the fast path for large captures.

A cluster-day of a 100k-GPU cluster at one sample a minute is 144M points; Python's ``json`` reads
them at about 70k a second, DuckDB's reader across files in parallel at millions. Two passes:

1. ``survey`` reads the labels only (not the points): which nodes and metrics each file holds, so
   files of disjoint nodes load apart and a file of one metric skips the pivot (the pivot, a hash
   aggregate over every point, costs several times the read);
2. ``points_sql`` reads the points and checks everything ``promjson`` checks (a successful matrix,
   series with node and GPU labels and values, whole-second times, finite non-negative values) in
   the same pass: a point that fails raises (DuckDB's ``error()``) and the caller reads the files
   again in Python, which names the series and field at fault.

Labels are read once per series, not once per point.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import duckdb
import pyarrow as pa

from gpuyield import store
from gpuyield.ingest.utilization.promjson import MetricNames, Role
from gpuyield.sqltext import literal

# The reader's largest object: a 32-bit count of bytes (a larger response takes the slow path).
_MAX_OBJECT_BYTES = (1 << 32) - 1
# ``[time, "value"]`` pairs read as two strings: cheaper than JSON values, and a number reads as
# its text.
_SERIES = 'STRUCT(metric MAP(VARCHAR, VARCHAR), "values" VARCHAR[][])'
_COLUMNS = f"{{'status': 'VARCHAR', 'data': 'STRUCT(resultType VARCHAR, result {_SERIES}[])'}}"
# The survey keeps each series' points as JSON text: the reader copies it but builds no lists,
# and the first and last times are read off its two ends.
_LABELS = 'STRUCT(metric MAP(VARCHAR, VARCHAR), "values" JSON)'
_LABEL_COLUMNS = (
    f"{{'status': 'VARCHAR', 'data': 'STRUCT(resultType VARCHAR, result {_LABELS}[])'}}"
)
_FIRST_TIME = r"""'^\s*\[\s*\[\s*"?(-?[0-9.eE+]+)'"""
_LAST_TIME = r"""'\[\s*"?(-?[0-9.eE+]+)"?\s*,\s*"[^"]*"\s*\]\s*\]\s*$'"""


def _dense_enough_sql(step_s: int) -> str:
    """A series holds at most one point per step between its ends (Prometheus writes one per
    step and leaves out the steps with no data): more points than that means a time repeats.
    Checked from the two ends, not point by point (a count of distinct times costs as much as
    the read); a repeat inside a series that also has gaps is not caught this way, and no
    Prometheus writes either."""
    return (
        "len(vs) - 1 <= (TRY_CAST(vs[-1][1] AS DOUBLE) - TRY_CAST(vs[1][1] AS DOUBLE)) / "
        + literal(step_s)
    )


# Starts the message of every error the checks raise (seen only if the Python reader, which
# then reads the files to name the fault, were to accept what DuckDB refused).
REFUSED = "gpuyield: refused"
# What the checks raise (``error()``) or a cast of a malformed point raises: read the files in
# Python, which names what is wrong. Any other error (memory, disk) is the error to report.
CHECK_ERRORS = (duckdb.InvalidInputException, duckdb.ConversionException)


@dataclass(frozen=True, kw_only=True, slots=True)
class FileSurvey:
    """What the labels of one file say, before its points are read."""

    nodes: frozenset[str]
    """Nodes of the series gpuyield reads (known metrics)."""
    roles: frozenset[str]
    """Roles (``Role`` values) of those series."""
    overlapping_series: bool
    """Two series of one node, GPU and role cover some time in common (two exporters scraping
    one GPU). Series that follow each other (the job label changed) do not."""

    def loads_without_pivot(self) -> bool:
        """One metric, no overlapping series: every point is already one GPU sample. (The
        job-id metric alone measures nothing: it goes through the pivot with the rest.)"""
        return (
            len(self.roles) == 1
            and Role.JOB.value not in self.roles
            and not self.overlapping_series
        )


def survey(paths: list[Path], names: MetricNames) -> dict[str, FileSurvey] | None:
    """Per file (by ``source_name``), what its labels say; None when DuckDB cannot read every
    file as a Prometheus response (the Python reader then says why).

    On a connection of its own: a reader error must not abort the store's transaction.
    """
    con = duckdb.connect()
    try:
        store.limit_memory(con)
        con.execute("SET enable_progress_bar = false")  # the CLI shows its own progress
        register_roles(con, names)
        rows = con.execute(_survey_sql(paths, names)).fetchall()
    except duckdb.Error:
        return None
    finally:
        con.close()
    if len(rows) != len(paths):
        return None
    return {
        str(source): FileSurvey(
            nodes=frozenset(n for n in nodes or () if n is not None),
            roles=frozenset(r for r in roles or () if r is not None),
            overlapping_series=bool(overlapping),
        )
        for source, nodes, roles, overlapping in rows
    }


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


def register_ingest_ids(con: duckdb.DuckDBPyConnection, ingest_ids: dict[str, int]) -> None:
    """The file -> ingest id table ``points_sql`` joins (``gy_ingest_ids``), once per file."""
    ids = pa.table({"source": list(ingest_ids), "ingest_id": list(ingest_ids.values())})
    con.register("gy_ingest_ids", ids)


def _survey_sql(paths: list[Path], names: MetricNames) -> str:
    """Per file: its nodes, its roles, and whether two series of one GPU and role overlap in
    time (Prometheus returns each series' points in time order: its ends give its span; an end
    that cannot be read counts as overlapping). A file with no series still gives a (null) row,
    so every file is accounted for."""
    node_sql, gpu_sql, _ = _labels(names)
    return f"""
        WITH doc AS (
            SELECT filename AS source,
                   unnest(CASE WHEN len(data.result) > 0 THEN data.result
                               ELSE [NULL::{_LABELS}] END) AS s
            FROM {_reader_sql(paths, _LABEL_COLUMNS)}
        ), series AS (
            SELECT source, r.role, {node_sql} AS node, {gpu_sql} AS gpu,
                   TRY_CAST(regexp_extract(left(s."values"::VARCHAR, 64), {_FIRST_TIME}, 1)
                            AS DOUBLE) AS first_t,
                   TRY_CAST(regexp_extract(right(s."values"::VARCHAR, 256), {_LAST_TIME}, 1)
                            AS DOUBLE) AS last_t
            FROM doc LEFT JOIN gy_metric_roles r ON r.name = s.metric['__name__']
        ), spans AS (
            SELECT *, max(last_t) OVER (
                PARTITION BY source, node, gpu, role ORDER BY first_t
                ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS before_t
            FROM series
        )
        SELECT source,
               list(DISTINCT node) FILTER (WHERE role IS NOT NULL),
               list(DISTINCT role) FILTER (WHERE role IS NOT NULL),
               coalesce(bool_or(first_t IS NULL OR last_t IS NULL OR before_t >= first_t)
                        FILTER (WHERE role IS NOT NULL), false)
        FROM spans GROUP BY source
    """


def points_sql(
    paths: list[Path], names: MetricNames, *, pivot: bool = True, step_s: int = 60
) -> str:
    """Every point of the files as ``promjson.RAW_SCHEMA`` rows plus ``ingest_id`` (from
    ``gy_ingest_ids``), checked as they are read: anything ``promjson`` would refuse raises.
    Without the ``pivot`` (which keeps one sample per GPU and time) a series with more points
    than ``step_s`` steps between its ends raises too (a time repeats: the Python reader then
    merges the repeats)."""
    dense_sql = "true" if pivot else f"(len(vs) <= 1 OR {_dense_enough_sql(step_s)})"
    node_sql, gpu_sql, job_sql = _labels(names)
    job_role = literal(Role.JOB.value)
    ok_point_sql = (
        "len(v) = 2 AND t IS NOT NULL AND isfinite(t) AND t = floor(t) "
        "AND raw IS NOT NULL AND (isnan(raw) OR (raw >= 0 AND isfinite(raw)))"
    )
    return f"""
        WITH doc AS (
            SELECT i.ingest_id,
                   CASE WHEN coalesce(status = 'success' AND data.resultType = 'matrix'
                                      AND data.result IS NOT NULL, false)
                        THEN data.result
                        ELSE error({literal(REFUSED + ": not a successful matrix")}) END AS result
            FROM {_reader_sql(paths, _COLUMNS)} JOIN gy_ingest_ids i ON i.source = filename
        ), series AS (
            SELECT ingest_id, unnest(result) AS s FROM doc
        ), known AS (
            SELECT ingest_id, r.role, r.scale, {node_sql} AS node, {gpu_sql} AS gpu,
                   {job_sql} AS label_job,
                   s."values" AS vs
            FROM series JOIN gy_metric_roles r ON r.name = s.metric['__name__']
        ), checked AS (
            SELECT ingest_id, role, scale, label_job,
                   CASE WHEN node IS NOT NULL AND gpu IS NOT NULL AND vs IS NOT NULL
                             AND {dense_sql} THEN node
                        ELSE error({literal(REFUSED + ": a series without labels or values")})
                   END AS node, gpu, vs
            FROM known
        ), pts AS (
            SELECT ingest_id, role, scale, node, gpu, label_job, unnest(vs) AS v FROM checked
        ), typed AS (
            SELECT *, TRY_CAST(v[1] AS DOUBLE) AS t, TRY_CAST(v[2] AS DOUBLE) AS raw FROM pts
        )
        SELECT role, node, gpu,
               CASE WHEN role = {job_role}
                    THEN CASE WHEN raw > 0 THEN CAST(CAST(raw AS BIGINT) AS VARCHAR) END
                    ELSE label_job END AS job_id,
               CASE WHEN {ok_point_sql} THEN CAST(t AS BIGINT)
                    ELSE error({literal(REFUSED + ": a malformed point")}) END AS t_s,
               CASE WHEN role = {job_role} THEN CAST('NaN' AS DOUBLE) ELSE raw * scale END AS value,
               ingest_id
        FROM typed
        -- A NaN is no measurement (the interval stays unmeasured); a null (unreadable) point
        -- must reach the check above, not be filtered out before it.
        WHERE NOT coalesce(isnan(raw), false) OR role = {job_role}
    """


def _labels(names: MetricNames) -> tuple[str, str, str]:
    """SQL for a series' node (Slurm's short name), GPU index and job label, from ``s.metric``."""

    def first_sql(labels: tuple[str, ...]) -> str:
        return "coalesce(" + ", ".join(f"nullif(s.metric[{literal(k)}], '')" for k in labels) + ")"

    host_sql = first_sql(names.node_labels)
    no_port_sql = f"regexp_replace({host_sql}, '^([^:]*):[0-9]+$', '\\1')"
    node_sql = (
        f"CASE WHEN regexp_matches({no_port_sql}, '^[0-9.]+$') THEN {no_port_sql} "
        f"ELSE split_part({no_port_sql}, '.', 1) END"
    )
    gpu_sql = f"TRY_CAST({first_sql(names.gpu_labels)} AS BIGINT)"
    return node_sql, gpu_sql, first_sql(names.job_labels)


def _reader_sql(paths: list[Path], columns_sql: str) -> str:
    files_sql = "[" + ", ".join(literal(str(p)) for p in paths) + "]"
    size = max(_object_size(p) for p in paths)
    return (
        f"read_json({files_sql}, columns={columns_sql}, "
        f"maximum_object_size={literal(size)}, filename=true)"
    )


def source_name(path: Path) -> str:
    """The file name as the reader's ``filename`` column gives it (the path as passed)."""
    return str(path)


def _object_size(path: Path) -> int:
    """The file's size: the reader allocates a buffer of the maximum object size per thread."""
    return min(_MAX_OBJECT_BYTES, max(1 << 24, path.stat().st_size + 1))
