"""Storing sacct records in ``jobs`` and each job's nodes in ``job_nodes``.

Two ways in. The direct load (strict mode, one record per line) inserts straight from DuckDB's CSV
reader into ``jobs``: one pass, one write, no temporary copy of the file (at 10M jobs it peaks at
1.3 GB instead of 3.3 GB, in about the same time: the write to the store dominates). Any row it cannot take (a bad value, a misshapen line) sends the ingest back to the staged
path (``staging.stage_sacct`` then ``load_staged``), which finds and names every problem.

``job_key`` (ingest id and line, one integer) links ``job_nodes`` to ``jobs``: joins on it are
several times cheaper than on the natural key's strings.
"""

from __future__ import annotations

import duckdb

from gpuyield.hostlist import HOSTLIST_MACRO_SQL, MAX_HOSTLIST_NAMES
from gpuyield.ingest._files import FileInfo
from gpuyield.ingest._sql import statement_progress
from gpuyield.ingest.sacct import checks
from gpuyield.ingest.sacct.header import column_map, read_header
from gpuyield.ingest.sacct.records import csv_source_sql, file_order_kept
from gpuyield.ingest.sacct.staging import JOBS_VIEW, REPLACED_TABLE, SacctStage
from gpuyield.ingest.sacct.typed import LATEST_TIME_SQL, typed_select
from gpuyield.progress import NoProgress, Progress
from gpuyield.sqltext import literal

# job_key = ingest_id << JOB_KEY_LINE_BITS | line: unique in the store, and says where the row came from.
JOB_KEY_LINE_BITS = 40
_NATURAL_KEY = "(cluster, job_id_raw, submit_s)"
# DuckDB's error() inside the direct insert: a row the staged path must look at.
_NEEDS_STAGING = "gpuyield: a record needs the staged path"


class DirectLoadFailed(Exception):
    """The direct load met a row it cannot take: redo the ingest's transaction the staged way."""


def _job_key_sql(ingest_id: int, line_sql: str) -> str:
    return f"(CAST({literal(ingest_id)} AS BIGINT) << {JOB_KEY_LINE_BITS}) + {line_sql}"


def _job_columns_sql(ingest_id: int, line_sql: str) -> str:
    """The ``jobs`` columns, in table order, from a typed sacct select."""
    return f"""cluster, coalesce(job_id, job_id_raw), job_id_raw,
        coalesce(submit_s, start_s, -1), name, user_name, account, partition, qos, state,
        state_raw, exit_code, start_s,
        -- No end: still running (or pending) at the capture; the ledger clips it at as_of.
        end_s, num_gpus, gpu_types, coalesce(num_nodes, CAST({checks.node_count_sql("node_list")} AS BIGINT)),
        node_list, comment, reason, {literal(ingest_id)}, {line_sql},
        {_job_key_sql(ingest_id, line_sql)}, elapsed_s"""


def load_direct(
    con: duckdb.DuckDBPyConnection,
    info: FileInfo,
    *,
    ingest_id: int,
    fields: list[str] | None,
    tz: str,
    default_cluster: str,
    progress: Progress | None = None,
    max_nodes: int = MAX_HOSTLIST_NAMES,
) -> SacctStage | None:
    """Insert the file's records straight into ``jobs``; None when a line is misshapen.

    Raises ``DirectLoadFailed`` when a record has a problem: the transaction is then aborted
    (DuckDB's ``error()``), and the caller redoes it the staged way, which names the problem.
    """
    if info.mixed_line_ends:
        return None
    header = read_header(info.path, fields)
    columns = column_map(info.path, header.field_names)
    typed_sql = typed_select(
        columns,
        tz,
        default_cluster,
        source_sql=csv_source_sql(info.path, len(header.field_names), header.header_lines),
        with_line=False,
        codes=False,
        max_nodes=max_nodes,
    )
    _insert_direct(con, info, typed_sql, ingest_id, progress or NoProgress())
    mine_sql = f"ingest_id = {literal(ingest_id)}"
    records, first_row_id = con.execute(
        f"SELECT count(*), coalesce(min(rowid), 0) FROM jobs WHERE {mine_sql}"
    ).fetchall()[0]
    if records != info.num_lines - header.header_lines:
        con.execute(f"DELETE FROM jobs WHERE {mine_sql}")
        return None
    _number_lines(con, ingest_id, first_row_id - header.header_lines - 1)
    rows_sql = f"SELECT line, job_id_raw FROM jobs WHERE {mine_sql}"
    if not file_order_kept(con, info, rows_sql, columns["jobidraw"]):
        raise DirectLoadFailed("the CSV reader did not keep file order")
    steps = _deleted(
        con,
        f"DELETE FROM jobs WHERE {mine_sql} AND (strpos(job_id, '.') > 0 OR strpos(job_id_raw, '.') > 0)",
    )
    return SacctStage(
        rows_read=records,
        rows_rejected=0,
        rows_skipped=steps + _drop_duplicates(con, mine_sql),
        as_of_s=_latest_time(con, mine_sql),
        gpu_count_missing="alloctres" not in columns and "allocgres" not in columns,
        loaded=True,
    )


def _insert_direct(
    con: duckdb.DuckDBPyConnection,
    info: FileInfo,
    typed_sql: str,
    ingest_id: int,
    progress: Progress,
) -> None:
    """The one insert from the CSV reader into ``jobs``; any row with a problem aborts it."""
    con.execute(HOSTLIST_MACRO_SQL)
    try:
        with statement_progress(
            con, progress, f"loading {info.path.name}", total_bytes=info.size_bytes
        ):
            con.execute(
                f"""INSERT INTO jobs SELECT {_job_columns_sql(ingest_id, "0")} FROM ({typed_sql})
                    WHERE problems = '' OR error({literal(_NEEDS_STAGING)})"""
            )
    except duckdb.Error as error:
        raise DirectLoadFailed(str(error)) from error


def _latest_time(con: duckdb.DuckDBPyConnection, mine_sql: str) -> int | None:
    """The latest time the loaded rows know of (``LATEST_TIME_SQL``)."""
    # jobs.submit_s is -1 for a run with no submit or start time (the natural key needs one).
    as_of = con.execute(
        f"""SELECT max({LATEST_TIME_SQL}) FROM (
                SELECT nullif(submit_s, -1) AS submit_s, start_s, end_s, elapsed_s
                FROM jobs WHERE {mine_sql})"""
    ).fetchall()[0][0]
    return None if as_of is None else int(as_of)


def _number_lines(con: duckdb.DuckDBPyConnection, ingest_id: int, row_id_of_line_0: int) -> None:
    """Give the directly loaded rows their lines and keys. The insert kept file order and its row
    ids are consecutive (uncommitted rows start at a large base): record n is line n + header,
    as in the staged path."""
    line_sql = f"rowid - ({literal(row_id_of_line_0)})"
    con.execute(
        f"UPDATE jobs SET line = {line_sql}, job_key = {_job_key_sql(ingest_id, line_sql)} "
        f"WHERE ingest_id = {literal(ingest_id)}"
    )


def _deleted(con: duckdb.DuckDBPyConnection, delete_sql: str) -> int:
    return int(con.execute(delete_sql).fetchall()[0][0])


def _drop_duplicates(con: duckdb.DuckDBPyConnection, mine_sql: str) -> int:
    """A run printed twice with the same values (sacct never does; a concatenated capture can)
    is stored once; records of one run that disagree go to the staged path, which refuses them."""
    rows, hashes = con.execute(
        f"SELECT count(*), count(DISTINCT hash{_NATURAL_KEY}) FROM jobs WHERE {mine_sql}"
    ).fetchall()[0]
    if rows == hashes:
        return 0
    if checks.conflicting_duplicates(con, f"SELECT * FROM jobs WHERE {mine_sql}", limit=1):
        raise DirectLoadFailed("records of one run disagree")  # the staged path names them
    return _deleted(
        con,
        f"""DELETE FROM jobs WHERE {mine_sql} AND line IN (
                SELECT line FROM (
                    SELECT line, row_number() OVER (
                        PARTITION BY {_NATURAL_KEY[1:-1]} ORDER BY line DESC) AS rn
                    FROM jobs WHERE {mine_sql})
                WHERE rn > 1)""",
    )


def finish_direct(con: duckdb.DuckDBPyConnection, ingest_id: int) -> None:
    """After ``load_direct``: earlier rows of the same runs go, and the new jobs' nodes come in."""
    mine_sql = f"ingest_id = {literal(ingest_id)}"
    if con.execute(f"SELECT count(*) FROM jobs WHERE NOT {mine_sql}").fetchall()[0][0]:
        # The replaced_sql runs' keys found once, by a join, for both deletes: in a daily collect
        # into a large store, finding them twice by a tuple IN was most of the collect's time.
        con.execute(
            f"""CREATE OR REPLACE TEMP TABLE {REPLACED_TABLE} AS SELECT old.job_key FROM jobs old
                JOIN (SELECT {_NATURAL_KEY[1:-1]} FROM jobs WHERE {mine_sql}) new
                USING {_NATURAL_KEY} WHERE NOT old.{mine_sql}"""
        )
        replaced_sql = f"SELECT job_key FROM {REPLACED_TABLE}"
        con.execute(f"DELETE FROM job_nodes WHERE job_key IN ({replaced_sql})")
        con.execute(f"DELETE FROM jobs WHERE job_key IN ({replaced_sql})")
        con.execute(f"DROP TABLE {REPLACED_TABLE}")
    _insert_job_nodes(con, f"SELECT job_key, node_list, start_s FROM jobs WHERE {mine_sql}")


def load_staged(con: duckdb.DuckDBPyConnection, ingest_id: int) -> None:
    """Replace the staged job runs (``JOBS_VIEW``) in ``jobs`` by natural key, with their nodes."""
    con.execute(HOSTLIST_MACRO_SQL)
    if con.execute("SELECT count(*) FROM jobs").fetchall()[0][0]:
        staged_keys_sql = (
            "SELECT cluster, job_id_raw, coalesce(submit_s, start_s, -1) AS submit_s "
            f"FROM {JOBS_VIEW}"
        )
        replaced_sql = f"SELECT job_key FROM jobs WHERE {_NATURAL_KEY} IN ({staged_keys_sql})"
        con.execute(f"DELETE FROM job_nodes WHERE job_key IN ({replaced_sql})")
        con.execute(f"DELETE FROM jobs WHERE {_NATURAL_KEY} IN ({staged_keys_sql})")
    con.execute(f"INSERT INTO jobs SELECT {_job_columns_sql(ingest_id, 'line')} FROM {JOBS_VIEW}")
    _insert_job_nodes(
        con,
        f"SELECT {_job_key_sql(ingest_id, 'line')} AS job_key, node_list, start_s FROM {JOBS_VIEW}",
    )


#: SQL over a job's columns: the job has rows in ``job_nodes`` (it ran, on nodes it names).
HAS_JOB_NODES_SQL = "node_list IS NOT NULL AND start_s IS NOT NULL"
#: SQL over a job's columns: its node list names one node, stored in ``job_nodes`` as it is
#: (no list to expand). Such a job has exactly one ``job_nodes`` row, whose node is ``node_list``.
ONE_NODE_SQL = "NOT (contains(node_list, '[') OR contains(node_list, ','))"


# A node list of one range, ``prefix[low-high]``: most lists of several nodes a scheduler prints.
_ONE_RANGE_SQL = checks.one_range_sql("node_list")
_LOW_SQL = checks.range_low_sql("node_list")
_HIGH_SQL = checks.range_high_sql("node_list")


def _insert_job_nodes(con: duckdb.DuckDBPyConnection, jobs_sql: str) -> None:
    """One row per job and node; most jobs run on one node, which needs no list expanded."""
    con.execute(
        f"""INSERT INTO job_nodes SELECT job_key, node_list FROM ({jobs_sql})
            WHERE {HAS_JOB_NODES_SQL} AND {ONE_NODE_SQL}"""
    )
    several_sql = f"{HAS_JOB_NODES_SQL} AND NOT {ONE_NODE_SQL}"
    # One range: its numbers unnested as rows and named by plain expressions, the names
    # hostlist_expand gives (zero-padded to the low end's width): its per-name lambdas cost 3x
    # the CPU (2.6 s against 0.8 s for the 1.3M names of 230k lists at 10M jobs).
    con.execute(
        f"""INSERT INTO job_nodes SELECT job_key, split_part(node_list, '[', 1) || CASE
                WHEN length(CAST(i AS VARCHAR)) >= length({_LOW_SQL}) THEN CAST(i AS VARCHAR)
                ELSE lpad(CAST(i AS VARCHAR), CAST(length({_LOW_SQL}) AS INTEGER), '0') END
            FROM (SELECT job_key, node_list,
                    unnest(range(CAST({_LOW_SQL} AS BIGINT), CAST({_HIGH_SQL} AS BIGINT) + 1)) AS i
                  FROM ({jobs_sql}) WHERE {several_sql} AND {_ONE_RANGE_SQL})"""
    )
    con.execute(
        f"""INSERT INTO job_nodes SELECT job_key, unnest(hostlist_expand(node_list))
            FROM ({jobs_sql}) WHERE {several_sql} AND NOT {_ONE_RANGE_SQL}"""
    )
