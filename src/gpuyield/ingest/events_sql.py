"""Reading an event file with DuckDB's CSV reader: the fast path of ``events.read_events``.

A year of node events on a large cluster is a million rows; parsing them one by one in Python
takes 17 us a row (2.1 s for the benchmark's 125k). DuckDB types them in bulk. The fast path takes
a file only when it is sure to give what the Python reader gives: printable ASCII, tabs and LF
only (so splitting lines, stripping and ``\\b`` mean the same in both), every line one record,
every time readable and in order. Anything else (a pipe in a reason, a bad time, a blank line)
returns None, and the Python reader, which names the line and field of any problem, reads it.
"""

from __future__ import annotations

from pathlib import Path

import duckdb
import pyarrow as pa

from gpuyield.ingest._files import FileInfo
from gpuyield.ingest._sql import NO_TIME_VALUES, epoch_sql, sql_quote
from gpuyield.ingest.sacct import csv_source, file_order_kept

_CHUNK_BYTES = 8 << 20
# Bytes both readers treat alike; translate() deleting them leaves only the others.
_PLAIN = bytes(range(0x20, 0x7F)) + b"\t\n"
# What Python's str.strip() removes from such text.
_WHITESPACE = " \t"
# Words in a reason that make downtime planned: events._PLANNED_REASON, in RE2's syntax.
_PLANNED_REASON_SQL = r"(?i)\b(maint\w*|planned|scheduled|upgrade\w*|firmware)\b"
# events._GPU_TRES in RE2's syntax.
_GPU_TRES_SQL = r"(?:^|,)gres/gpu=(\d+)(?:,|$)"


def read_events_sql(
    info: FileInfo,
    keys: list[str | None],
    *,
    tz: str,
    default_cluster: str,
    node_columns: dict[str, pa.DataType],
    cluster_columns: dict[str, pa.DataType],
) -> tuple[int, pa.Table, pa.Table, int | None] | None:
    """(rows read, node events, cluster events, latest time), or None for the Python reader.

    ``keys`` name the file's columns (``events._HEADER_ALIASES``; None for one not read).
    Runs on its own in-memory DuckDB: nothing it does can abort the ingest's transaction.
    """
    if not _plain_ascii(info.path):
        return None
    con = duckdb.connect()
    try:
        con.execute("SET enable_progress_bar = false")
        con.execute(f"CREATE TEMP TABLE raw AS SELECT * FROM {csv_source(info.path, len(keys), 1)}")
        records, first_row_id = con.execute(
            "SELECT count(*), coalesce(min(rowid), 0) FROM raw"
        ).fetchall()[0]
        if records != info.num_lines - 1:
            return None  # a blank line, or a line with more or fewer fields than the header
        con.execute(_typed_table(keys, tz, default_cluster, first_row_id))
        node_at = keys.index("node")
        if not file_order_kept(con, info, "SELECT line, raw_node FROM typed", node_at):
            return None
        unsure, latest = con.execute(
            "SELECT count(*) FILTER (WHERE unsure), max(greatest(start_s, end_s)) FROM typed"
        ).fetchall()[0]
        if unsure:
            return None
        nodes = _table(con, "node <> ''", node_columns)
        clusters = _table(con, "node = ''", cluster_columns)
        return int(records), nodes, clusters, None if latest is None else int(latest)
    finally:
        con.close()


def _plain_ascii(path: Path) -> bool:
    """Printable ASCII, tabs and LF line ends only: what both readers read the same way."""
    with path.open("rb") as handle:
        while chunk := handle.read(_CHUNK_BYTES):
            if chunk.translate(None, _PLAIN):
                return False
    return True


def _typed_table(keys: list[str | None], tz: str, default_cluster: str, first_row_id: int) -> str:
    def field(key: str) -> str:
        """The field stripped as Python strips it; '' when the file lacks the column."""
        if key not in keys:
            return "''"
        return f"trim(coalesce(f{keys.index(key)}, ''), {sql_quote(_WHITESPACE)})"

    no_time = ", ".join(sql_quote(v) for v in NO_TIME_VALUES)

    def bad_time(raw: str, parsed: str) -> str:
        return f"({raw} NOT IN ({no_time}) AND {parsed} IS NULL)"

    node_at = keys.index("node")
    raw_tres = f"coalesce(f{keys.index('tres')}, '')" if "tres" in keys else "''"
    return f"""
        CREATE TEMP TABLE typed AS SELECT *,
            -- Where the Python reader would stop (and name the problem): leave it to Python.
            start_s IS NULL OR {bad_time("raw_start", "start_s")}
                OR {bad_time("raw_end", "end_s")} OR end_s < start_s
                OR (node <> '' AND state = '')
                OR (node = '' AND gpu_text <> '' AND num_gpus IS NULL) AS unsure
        FROM (
            SELECT *,
                {epoch_sql("raw_start", tz)} AS start_s,
                {epoch_sql("raw_end", tz)} AS end_s,
                TRY_CAST(gpu_text AS BIGINT) AS num_gpus
            FROM (
                SELECT rowid - {first_row_id} + 2 AS line,
                    nullif(f{node_at}, '') AS raw_node,
                    {field("node")} AS node,
                    coalesce(nullif({field("cluster")}, ''), {sql_quote(default_cluster)})
                        AS cluster,
                    upper({field("state")}) AS state,
                    nullif({field("reason")}, '') AS reason,
                    nullif({field("user")}, '') AS user_name,
                    nullif({field("cluster_nodes")}, '') AS node_list,
                    -- Cluster rows only; unstripped, as the Python reader searches it.
                    CASE WHEN {field("node")} = '' THEN
                        regexp_extract({raw_tres}, {sql_quote(_GPU_TRES_SQL)}, 1)
                    ELSE '' END AS gpu_text,
                    {field("start")} AS raw_start,
                    {field("end")} AS raw_end
                FROM raw
            )
        )"""


def _table(con: duckdb.DuckDBPyConnection, where: str, columns: dict[str, pa.DataType]) -> pa.Table:
    """The rows ``where`` says, as the Python reader's table (same columns, types, order)."""
    planned = f"""(contains(state, 'MAINT')
        OR coalesce(regexp_matches(reason, {sql_quote(_PLANNED_REASON_SQL)}), false))"""
    exprs = {"planned": f"{planned} AS planned"}
    select = ", ".join(exprs.get(c, c) for c in columns)
    table = con.sql(f"SELECT {select} FROM typed WHERE {where} ORDER BY line").to_arrow_table()
    return table.cast(pa.schema(columns))
