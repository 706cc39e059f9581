"""Node and cluster events: ``sacctmgr -P show event All_Time [format=...]`` into the store.

Two layouts are read, by header: the default (``Cluster|NodeName|TimeStart|TimeEnd|State|Reason|User``)
and the long one with ``format=Cluster,ClusterNodes,NodeName,Event,EventRaw,State,StateRaw,Start,End,
Duration,Reason,User,TRES``. Rows without a node name are cluster events ("Cluster Registered TRES"):
they say from when the cluster existed and, in the long layout, how many GPUs it had.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from zoneinfo import ZoneInfo

import duckdb
import pyarrow as pa

from gpuyield import store
from gpuyield.errors import ParseError, UnknownFormat
from gpuyield.hostlist import (
    HOSTLIST_MACRO_SQL,
    MAX_HOSTLIST_NAMES,
    expand_hostlist,
    hostlist_size,
    spaceless,
)
from gpuyield.ingest._files import FileInfo
from gpuyield.ingest._sql import (
    NO_TIME_VALUES,
    TIME_HINT,
    Problem,
    bad_time_sql,
    epoch_sql,
    replace_rows,
    store_rejects,
)
from gpuyield.ingest.sacct.checks import EARLIEST_S, LATEST_S, descending_sql
from gpuyield.ingest.sacct.records import csv_source_sql, file_order_kept
from gpuyield.ingest.sacct.typed import NODE_LIST_RE
from gpuyield.sqltext import identifier, literal

SOURCE = "slurm.events"

_HEADER_ALIASES = {
    "cluster": "cluster",
    "cluster nodes": "cluster_nodes",
    "clusternodes": "cluster_nodes",
    "nodename": "node",
    "node name": "node",
    "event": "event",
    "state": "state",
    "timestart": "start",
    "start": "start",
    "timeend": "end",
    "end": "end",
    "reason": "reason",
    "user": "user",
    "tres": "tres",
}
_REQUIRED = ("node", "start", "end", "state", "reason")
# Maintenance is chosen, not suffered: the state says MAINT, or the reason says so in words.
_PLANNED_REASON = re.compile(r"\b(maint\w*|planned|scheduled|upgrade\w*|firmware)\b", re.IGNORECASE)
_GPU_TRES = re.compile(r"(?:^|,)gres/gpu=(\d+)(?:,|$)")
_HINT = "give the output of `sacctmgr -P show event All_Time` (with its header)"
# The fast path (read_events_fast) in DuckDB: the same rules in RE2's syntax.
_PLANNED_REASON_SQL = r"(?i)\b(maint\w*|planned|scheduled|upgrade\w*|firmware)\b"
_GPU_TRES_SQL = r"(?:^|,)gres/gpu=(\d+)(?:,|$)"
_CHUNK_BYTES = 8 << 20
# Bytes both readers treat alike; translate() deleting them leaves only the others.
_PLAIN = bytes(range(0x20, 0x7F)) + b"\t\n"
# What Python's str.strip() removes from such text.
_WHITESPACE = " \t"


@dataclass(frozen=True, kw_only=True, slots=True)
class EventsStage:
    """What reading one event file produced."""

    rows_read: int
    """Data rows in the file."""
    rows_rejected: int
    """Rows rejected in lenient mode."""
    node_events: pa.Table
    """Typed node events (columns as the ``node_events`` table, without ingest id)."""
    cluster_events: pa.Table
    """Typed cluster events (columns as the ``cluster_events`` table, without ingest id)."""
    as_of_s: int | None
    """Latest time in the file."""
    problems: tuple[Problem, ...]
    """Rows rejected in lenient mode, with why (stored in ``rejects`` by ``load_events``)."""


def is_planned(state: str, reason: str | None) -> bool:
    """Planned downtime (maintenance) versus a fault."""
    return "MAINT" in state.upper() or bool(reason and _PLANNED_REASON.search(reason))


def parse_time(text: str, tz: str) -> int | None:
    """Epoch seconds of a Slurm time, None for Unknown/None; ValueError when it is not a time."""
    text = text.strip()
    if text in NO_TIME_VALUES:
        return None
    if text.isascii() and text.isdigit():
        return int(text)  # SLURM_TIME_FORMAT=%s: epoch seconds, no zone applies
    value = datetime.fromisoformat(text.replace(" ", "T"))
    if value.tzinfo is not None:
        return int(value.timestamp())
    # As DuckDB reads sacct times (_sql.epoch_sql): a repeated local hour (clocks go back) as its
    # later occurrence, an hour that does not exist (clocks go forward) with the offset before
    # the change. Both are the later of the two instants the folds give.
    local = value.replace(tzinfo=ZoneInfo(tz))
    return int(max(local.replace(fold=0).timestamp(), local.replace(fold=1).timestamp()))


def time_field(text: str, tz: str, *, field: str) -> int | None:
    """``parse_time`` of one field of a record: a value that is not a time is a ParseError."""
    try:
        value = parse_time(text, tz)
    except (ValueError, OverflowError):
        raise ParseError(f"not a time: {text!r}", field=field, hint=TIME_HINT) from None
    if value is not None and not EARLIEST_S <= value <= LATEST_S:
        raise ParseError(f"time outside 2000..2100: {text.strip()!r}", field=field, hint=TIME_HINT)
    return value


def read_events(
    path: Path, *, tz: str, lenient: bool, default_cluster: str, info: FileInfo | None = None
) -> EventsStage:
    """Parse an sacctmgr event file into typed tables (strict: first bad row raises ParseError).

    With ``info`` (the file's scan) a strict read tries DuckDB's CSV reader first
    (``read_events_fast``), which takes clean files in bulk; the rest are read here, line by line.
    """
    if info is not None and not lenient:
        fast = _read_clean(path, info, tz=tz, default_cluster=default_cluster)
        if fast is not None:
            return fast
    lines = path.read_text(encoding="utf-8-sig").splitlines()
    if not lines:
        raise UnknownFormat(f"{path}: empty event file", hint=_HINT)
    keys = _keys(path, lines[0])
    reason_at = keys.index("reason")
    node_rows: list[dict[str, object]] = []
    cluster_rows: list[dict[str, object]] = []
    problems: list[Problem] = []
    latest: int | None = None
    data_lines = [(n, t) for n, t in enumerate(lines[1:], start=2) if t.strip()]
    for number, text in data_lines:
        try:
            row = _typed_row(_fields(text, len(keys), reason_at), keys, number, tz, default_cluster)
        except ParseError as error:
            if not lenient:
                raise ParseError(
                    error.reason,
                    path=path,
                    line=number,
                    field=error.field,
                    hint=error.hint or _HINT,
                ) from None
            problems.append(
                Problem(line=number, field=error.field or "", message=error.reason, raw=text)
            )
            continue
        times = [t for t in (row["start_s"], row["end_s"]) if isinstance(t, int)]
        latest = max([latest, *times]) if latest is not None else max(times)
        if row.pop("is_cluster"):
            cluster_rows.append(row)
        else:
            node_rows += _per_node(row)
    return EventsStage(
        rows_read=len(data_lines),
        rows_rejected=len(problems),
        node_events=rows_table(node_rows, NODE_COLUMNS),
        cluster_events=rows_table(cluster_rows, _CLUSTER_COLUMNS),
        as_of_s=latest,
        problems=tuple(problems),
    )


def _read_clean(path: Path, info: FileInfo, *, tz: str, default_cluster: str) -> EventsStage | None:
    """``read_events_fast`` when the header reads the same in DuckDB as in Python, else None."""
    with path.open(encoding="utf-8-sig") as handle:  # without a byte-order mark
        header = handle.readline().rstrip("\r\n")
    # A header Python would split or strip differently goes the line-by-line way.
    if not (header.isascii() and header.isprintable() and header.strip()):
        return None
    return read_events_fast(info, _keys(path, header), tz=tz, default_cluster=default_cluster)


def _fields(text: str, n_keys: int, reason_at: int) -> list[str]:
    """A record's fields; the pipes beyond the header's are inside the free-text reason."""
    parts = text.split("|")
    if len(parts) <= n_keys:
        return parts
    extra = len(parts) - n_keys
    return [
        *parts[:reason_at],
        "|".join(parts[reason_at : reason_at + extra + 1]),
        *parts[reason_at + extra + 1 :],
    ]


def read_events_fast(
    info: FileInfo, keys: list[str | None], *, tz: str, default_cluster: str
) -> EventsStage | None:
    """The event file read with DuckDB's CSV reader, or None: then read it line by line.

    A year of node events on a large cluster is a million rows; parsing them one by one in Python
    takes 17 us a row (2.1 s for the benchmark's 125k). DuckDB types them in bulk. This takes a
    file only when it is sure to give what the line-by-line reader gives: printable ASCII, tabs
    and LF only (so splitting lines, stripping and ``\\b`` mean the same in both), every line one
    record, every time readable and in order. Anything else (a pipe in a reason, a bad time, a
    blank line) returns None, and the line-by-line reader names the line and field of a problem.

    ``keys`` name the file's columns (``_keys``). Runs on its own in-memory DuckDB: nothing it
    does can abort the ingest's transaction.
    """
    if not _plain_ascii(info.path):
        return None
    con = store.duckdb_connect()
    try:
        con.execute("SET enable_progress_bar = false")
        con.execute(HOSTLIST_MACRO_SQL)
        raw_sql = csv_source_sql(info.path, len(keys), 1)
        con.execute(f"CREATE TEMP TABLE raw AS SELECT * FROM {raw_sql}")
        records, first_row_id = con.execute(
            "SELECT count(*), coalesce(min(rowid), 0) FROM raw"
        ).fetchall()[0]
        if records != info.num_lines - 1:
            return None  # a blank line, or a line with more or fewer fields than the header
        con.execute(_typed_table_sql(keys, tz, default_cluster, first_row_id))
        node_at = keys.index("node")
        if not file_order_kept(con, info, "SELECT line, raw_node FROM typed", node_at):
            return None
        unsure, latest = con.execute(
            "SELECT count(*) FILTER (WHERE unsure), max(greatest(start_s, end_s)) FROM typed"
        ).fetchall()[0]
        if unsure:
            return None
        return EventsStage(
            rows_read=int(records),
            rows_rejected=0,
            node_events=_fast_rows(con, "node <> ''", NODE_COLUMNS),
            cluster_events=_fast_rows(con, "node = ''", _CLUSTER_COLUMNS),
            as_of_s=None if latest is None else int(latest),
            problems=(),
        )
    finally:
        con.close()


def _column_sql(keys: list[str | None], key: str) -> str:
    """The raw field ``f<i>`` that holds ``key``."""
    return identifier(f"f{keys.index(key)}")


def _plain_ascii(path: Path) -> bool:
    """Printable ASCII, tabs and LF line ends only: what both readers read the same way."""
    with path.open("rb") as handle:
        while chunk := handle.read(_CHUNK_BYTES):
            if chunk.translate(None, _PLAIN):
                return False
    return True


def _typed_table_sql(
    keys: list[str | None], tz: str, default_cluster: str, first_row_id: int
) -> str:
    def field_sql(key: str) -> str:
        """The field stripped as Python strips it; '' when the file lacks the column."""
        if key not in keys:
            return "''"
        return f"trim(coalesce({_column_sql(keys, key)}, ''), {literal(_WHITESPACE)})"

    raw_node_sql = _column_sql(keys, "node")
    raw_tres_sql = f"coalesce({_column_sql(keys, 'tres')}, '')" if "tres" in keys else "''"
    return f"""
        CREATE TEMP TABLE typed AS SELECT *,
            -- Where the Python reader would stop (and name the problem): leave it to Python.
            start_s IS NULL OR {bad_time_sql("raw_start", "start_s")}
                OR {bad_time_sql("raw_end", "end_s")} OR end_s < start_s
                OR (node <> '' AND state = '')
                OR (node = '' AND gpu_text <> '' AND num_gpus IS NULL)
                -- A node hostlist, a long cluster list or an implausible time: Python says so.
                OR contains(node, '[') OR contains(node, ',')
                -- Blanks and descending ranges: the Python reader normalises or names them.
                OR regexp_matches(coalesce(node_list, ''), '\\s') OR {descending_sql("node_list")}
                OR (node = '' AND node_list IS NOT NULL AND (
                    NOT regexp_full_match(node_list, {literal(NODE_LIST_RE)})
                    OR hostlist_size(node_list) > {MAX_HOSTLIST_NAMES}))
                OR start_s NOT BETWEEN {EARLIEST_S} AND {LATEST_S}
                OR end_s NOT BETWEEN {EARLIEST_S} AND {LATEST_S} AS unsure
        FROM (
            SELECT *,
                {epoch_sql("raw_start", tz)} AS start_s,
                {epoch_sql("raw_end", tz)} AS end_s,
                TRY_CAST(gpu_text AS BIGINT) AS num_gpus
            FROM (
                SELECT rowid - {literal(first_row_id)} + 2 AS line,
                    nullif({raw_node_sql}, '') AS raw_node,
                    {field_sql("node")} AS node,
                    coalesce(nullif({field_sql("cluster")}, ''), {literal(default_cluster)})
                        AS cluster,
                    upper({field_sql("state")}) AS state,
                    nullif({field_sql("reason")}, '') AS reason,
                    nullif({field_sql("user")}, '') AS user_name,
                    nullif({field_sql("cluster_nodes")}, '') AS node_list,
                    -- Cluster rows only; unstripped, as the Python reader searches it.
                    CASE WHEN {field_sql("node")} = '' THEN
                        regexp_extract({raw_tres_sql}, {literal(_GPU_TRES_SQL)}, 1)
                    ELSE '' END AS gpu_text,
                    {field_sql("start")} AS raw_start,
                    {field_sql("end")} AS raw_end
                FROM raw
            )
        )"""


def _fast_rows(
    con: duckdb.DuckDBPyConnection, where_sql: str, columns: dict[str, pa.DataType]
) -> pa.Table:
    """The rows ``where_sql`` says, as the line-by-line reader's table (same columns, types,
    order)."""
    planned_sql = f"""(contains(state, 'MAINT')
        OR coalesce(regexp_matches(reason, {literal(_PLANNED_REASON_SQL)}), false))"""
    select_sql = ", ".join(
        f"{planned_sql} AS planned" if c == "planned" else identifier(c) for c in columns
    )
    table = con.sql(
        f"SELECT {select_sql} FROM typed WHERE {where_sql} ORDER BY line"
    ).to_arrow_table()
    return table.cast(pa.schema(columns))


def _keys(path: Path, header_line: str) -> list[str | None]:
    """What each column of the header is (None: not read); UnknownFormat if one needed is not."""
    keys = [_HEADER_ALIASES.get(h.strip().lower()) for h in header_line.split("|")]
    missing = [k for k in _REQUIRED if k not in keys]
    if missing:
        raise UnknownFormat(f"{path}: not an sacctmgr event listing (no {missing[0]})", hint=_HINT)
    return keys


def _per_node(row: dict[str, object]) -> list[dict[str, object]]:
    """An event of a hostlist (``NodeName=n[3-4]``, as sacctmgr prints nodes that changed state
    together) as one event per node: stored literally it would match no node and be ignored."""
    node = str(row["node"])
    if "[" not in node and "," not in node:
        return [row]
    return [{**row, "node": name} for name in expand_hostlist(node)]


def _check_hostlist(text: str, field: str) -> None:
    """A hostlist in an event must be readable and hold at most the documented cap of names,
    counted before anything is expanded."""
    try:
        size = hostlist_size(text)
    except ValueError as error:
        raise ParseError(str(error), field=field) from None
    if size > MAX_HOSTLIST_NAMES:
        raise ParseError(
            f"hostlist names {size:,} nodes, more than {MAX_HOSTLIST_NAMES:,}",
            field=field,
            hint="a hostlist cannot name more nodes than the cluster has; check the range",
        )


def _typed_row(
    parts: list[str], keys: list[str | None], number: int, tz: str, default_cluster: str
) -> dict[str, object]:
    if len(parts) != len(keys):
        raise ParseError(f"row has {len(parts)} fields, header has {len(keys)}", field="(record)")
    raw = {k: v for k, v in zip(keys, parts, strict=True) if k is not None}
    times = {
        key: time_field(raw[key], tz, field=name)
        for key, name in (("start", "TimeStart"), ("end", "TimeEnd"))
    }
    if times["start"] is None:
        raise ParseError("event without a start time", field="TimeStart")
    end = times["end"]
    if end is not None and end < times["start"]:
        raise ParseError("event ends before it starts", field="TimeEnd")
    node = raw["node"].strip()
    cluster = raw.get("cluster", "").strip() or default_cluster
    common = {"cluster": cluster, "start_s": times["start"], "end_s": end, "line": number}
    if not node:
        _check_hostlist(raw.get("cluster_nodes", ""), "ClusterNodes")
        gpus = _GPU_TRES.search(raw.get("tres", ""))
        return {
            **common,
            "is_cluster": True,
            "num_gpus": int(gpus.group(1)) if gpus else None,
            # Stored as Slurm reads it: "n[1-2], n[3-4]" is the four nodes n1-n4.
            "node_list": spaceless(raw.get("cluster_nodes", "")) or None,
        }
    _check_hostlist(node, "NodeName")
    node = spaceless(node)
    state = raw["state"].strip().upper()
    if not state:
        raise ParseError("node event without a state", field="State")
    reason = raw["reason"].strip() or None
    return {
        **common,
        "is_cluster": False,
        "node": node,
        "state": state,
        "reason": reason,
        "user_name": raw.get("user", "").strip() or None,
        "planned": is_planned(state, reason),
    }


NODE_COLUMNS = {
    "cluster": pa.string(),
    "node": pa.string(),
    "state": pa.string(),
    "reason": pa.string(),
    "user_name": pa.string(),
    "start_s": pa.int64(),
    "end_s": pa.int64(),
    "planned": pa.bool_(),
    "line": pa.int64(),
}
_CLUSTER_COLUMNS = {
    "cluster": pa.string(),
    "start_s": pa.int64(),
    "end_s": pa.int64(),
    "num_gpus": pa.int64(),
    "node_list": pa.string(),
    "line": pa.int64(),
}


def rows_table(rows: list[dict[str, object]], columns: dict[str, pa.DataType]) -> pa.Table:
    """Parsed rows (dicts) as an Arrow table of ``columns`` (name -> type), in that order."""
    return pa.table({c: pa.array([r[c] for r in rows], t) for c, t in columns.items()})


def load_events(
    con: duckdb.DuckDBPyConnection, stage: EventsStage, ingest_id: int, path: Path
) -> None:
    """Replace events by natural key and store rejects; runs inside the ingest transaction."""
    store_rejects(con, ingest_id, path, list(stage.problems))
    replace_node_events(con, stage.node_events, ingest_id)
    replace_rows(
        con,
        "cluster_events",
        _distinct_registrations(con, stage.cluster_events, path),
        key=("cluster", "start_s"),
        columns=("cluster", "start_s", "end_s", "num_gpus", "node_list"),
        ingest_id=ingest_id,
    )


def _distinct_registrations(con: duckdb.DuckDBPyConnection, rows: pa.Table, path: Path) -> pa.Table:
    """One registration per cluster and start: a capture concatenated twice repeats them (kept
    once); two that differ at the same second contradict each other (an error naming the line)."""
    con.register("registrations", rows)
    try:
        clash = con.execute(
            """SELECT max(line), min(line) FROM registrations GROUP BY cluster, start_s
               HAVING count(DISTINCT (end_s, num_gpus, node_list)) > 1 ORDER BY 1 LIMIT 1"""
        ).fetchall()
        if clash:
            raise ParseError(
                f"a different cluster registration at the same time as line {clash[0][1]}",
                path=path,
                line=int(clash[0][0]),
                field="TimeStart",
                hint="ingest node events from one sacctmgr capture of this cluster",
            )
        kept = con.sql(
            """SELECT * FROM registrations QUALIFY row_number() OVER (
                   PARTITION BY cluster, start_s ORDER BY line) = 1 ORDER BY line"""
        ).to_arrow_table()
        return kept.cast(rows.schema)
    finally:
        con.unregister("registrations")


def replace_node_events(con: duckdb.DuckDBPyConnection, rows: pa.Table, ingest_id: int) -> None:
    """Node events (``NODE_COLUMNS``) replace earlier ones of the same node, start and state."""
    replace_rows(
        con,
        "node_events",
        rows,
        key=("cluster", "node", "start_s", "state"),
        columns=tuple(c for c in NODE_COLUMNS if c != "line"),
        ingest_id=ingest_id,
    )
