"""Slurm job accounting: ``sacct -a -P [-X] [-D] --format=...`` text into the ``jobs`` table.

What real Slurm prints and this module handles (see ``shared/data/slurm-local/README.md``):
- ``-P`` does no quoting: a multi-line ``SubmitLine`` spreads one record over several lines, and a
  pipe inside ``SubmitLine`` adds a field. Records are reassembled by counting separators.
- Times are local without a zone (``--tz``); ``Unknown``/``None`` mean "no such time".
- States carry words (``CANCELLED by 0``); the first word is the state.
- Without ``-X`` each job has step rows (``.batch``, ``.extern``, ``.0``): they are not extra
  allocations and are skipped (counted). With ``-D`` the runs of a requeued job share ``JobIDRaw``.
- GPUs come from ``AllocTRES``: ``gres/gpu=N`` when present, else the sum of ``gres/gpu:TYPE=N``
  (Slurm prints both for typed GRES; adding them would double count).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import duckdb
import pyarrow as pa

from gpuyield.errors import ParseError, UnknownFormat
from gpuyield.ingest._files import FileInfo
from gpuyield.ingest._sql import (
    Problem,
    bad_time_sql,
    collect_problems,
    epoch_sql,
    load_lines,
    raise_first,
    sql_quote,
    store_rejects,
)
from gpuyield.ingest.hostlist import HOSTLIST_MACRO_SQL

SOURCE = "slurm.sacct"

# Every state sacct can print; anything else is a parse error rather than a guess.
KNOWN_STATES = (
    "BOOT_FAIL",
    "CANCELLED",
    "COMPLETED",
    "COMPLETING",
    "CONFIGURING",
    "DEADLINE",
    "FAILED",
    "NODE_FAIL",
    "OUT_OF_MEMORY",
    "PENDING",
    "PREEMPTED",
    "REQUEUED",
    "REQUEUE_FED",
    "REQUEUE_HOLD",
    "RESIZING",
    "RESV_DEL_HOLD",
    "REVOKED",
    "RUNNING",
    "SIGNALING",
    "SPECIAL_EXIT",
    "STAGE_OUT",
    "STOPPED",
    "SUSPENDED",
    "TIMEOUT",
)

# Fields the ledger cannot work without, by any of the names sacct may print them under.
_REQUIRED = {
    "jobidraw": ("jobidraw", "jobid"),
    "state": ("state",),
    "start": ("start",),
    "end": ("end",),
    "nodelist": ("nodelist",),
}
_OPTIONAL = (
    "jobid",
    "jobname",
    "user",
    "account",
    "partition",
    "qos",
    "exitcode",
    "submit",
    "elapsedraw",
    "alloctres",
    "allocgres",
    "nnodes",
    "comment",
    "reason",
    "cluster",
)
# A pipe found inside a record goes to the first of these present: free text most likely to hold one.
_FREE_TEXT = ("submitline", "comment", "jobname", "workdir")

_HINT = "check the file is `sacct -P` output with its header line (or pass --fields for --noheader)"


@dataclass(frozen=True, kw_only=True, slots=True)
class SacctStage:
    """What staging one sacct file produced (rows are in the temp table ``stage_jobs``)."""

    rows_read: int
    """Records in the file (a multi-line record counts once; header excluded)."""
    rows_rejected: int
    """Records rejected in lenient mode (kept in ``rejects``)."""
    rows_skipped: int
    """Step rows and duplicate records: not allocations, so not loaded."""
    as_of_s: int | None
    """Latest time the file knows of: the default end for running jobs."""
    gpu_count_missing: bool
    """True when the file has no ``AllocTRES``/``AllocGRES`` column at all."""


def read_header(path: Path, fields: list[str] | None) -> tuple[list[str], int]:
    """The field names and how many lines they take (0 with ``--fields``)."""
    if fields:
        return fields, 0
    with path.open(encoding="utf-8") as handle:
        first = handle.readline().rstrip("\r\n")
    names = first.split("|")
    if len(names) < 2 or any(not n or not n.replace("_", "").isalnum() for n in names):
        raise UnknownFormat(
            f"{path}: line 1 is not an sacct -P header: {first[:80]!r}",
            hint="run sacct with -P (--parsable2); for --noheader output pass --fields",
        )
    return names, 1


def _column_map(path: Path, names: list[str]) -> dict[str, int]:
    lowered = [n.lower() for n in names]
    columns: dict[str, int] = {}
    for key, aliases in _REQUIRED.items():
        found = next((lowered.index(a) for a in aliases if a in lowered), None)
        if found is None:
            raise UnknownFormat(
                f"{path}: sacct output lacks the field {aliases[0]!r}",
                hint="include JobIDRaw,State,Start,End,NodeList,AllocTRES,Submit in --format",
            )
        columns[key] = found
    for key in (*_OPTIONAL, *_FREE_TEXT):
        if key in lowered:
            columns[key] = lowered.index(key)
    return columns


def stage_sacct(
    con: duckdb.DuckDBPyConnection,
    info: FileInfo,
    *,
    ingest_id: int,
    fields: list[str] | None,
    tz: str,
    lenient: bool,
    default_cluster: str,
) -> SacctStage:
    """Parse ``info.path`` into the temp table ``stage_jobs`` (typed, validated, one row per run)."""
    names, header_lines = read_header(info.path, fields)
    columns = _column_map(info.path, names)
    load_lines(con, info.path, "sacct_lines")
    n_fields = len(names)
    misshapen, blank = con.execute(
        f"""SELECT count(*) FILTER (WHERE text IS NOT NULL
                   AND length(text) - length(replace(text, '|', '')) <> {n_fields - 1}),
                   count(*) FILTER (WHERE text IS NULL)
            FROM sacct_lines WHERE line > {header_lines}"""
    ).fetchall()[0]
    if misshapen == 0 and blank == 0:
        _split_fast(con, info.path, n_fields, header_lines)
        raw_from = "sacct_raw"
        shape_problems = []
    else:
        shape_problems = _split_records(con, info.path, names, columns, header_lines)
        raw_from = "sacct_records"
    if shape_problems and not lenient:
        raise ParseError(
            shape_problems[0][1], path=info.path, line=shape_problems[0][0], field=None, hint=_HINT
        )
    _type_records(con, names, columns, tz, default_cluster)
    problems = collect_problems(
        con, _checks(names, columns), limit=None if lenient else 1, raw_from=raw_from
    )
    if problems and not lenient:
        raise_first(problems[0], info.path, _HINT)
    return _finish(con, info, ingest_id, problems, shape_problems, columns)


def _split_fast(
    con: duckdb.DuckDBPyConnection, path: Path, n_fields: int, header_lines: int
) -> None:
    """Every line is one record: DuckDB's CSV reader splits the fields (parallel, streaming).

    Rows keep file order, and with no blank lines (checked by the caller) row n is line n + header.
    """
    columns = ", ".join(f"'f{i}': 'VARCHAR'" for i in range(n_fields))
    con.execute(
        f"""CREATE OR REPLACE TEMP TABLE sacct_records AS
            SELECT row_number() OVER () + {header_lines} AS line, *
            FROM read_csv({sql_quote(str(path))}, columns={{{columns}}}, delim='|', quote='',
                          escape='', header={"true" if header_lines else "false"},
                          auto_detect=false, strict_mode=true, null_padding=false)"""
    )
    # Raw records of rejected lines come from the lines themselves.
    con.execute(
        "CREATE OR REPLACE TEMP VIEW sacct_raw AS SELECT line, text AS raw FROM sacct_lines"
    )


def _split_records(
    con: duckdb.DuckDBPyConnection,
    path: Path,
    names: list[str],
    columns: dict[str, int],
    header_lines: int,
) -> list[tuple[int, str, str]]:
    """Reassemble records that span lines; returns (line, message, raw) for records that cannot be."""
    n_sep = len(names) - 1
    free = next((columns[k] for k in _FREE_TEXT if k in columns), None)
    lines = path.read_text(encoding="utf-8").split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    records: list[tuple[int, list[str], str]] = []
    problems: list[tuple[int, str, str]] = []
    buf: list[str] = []
    buf_line = 0
    buf_seps = 0

    def close() -> None:
        text = "\n".join(buf)
        parts = text.split("|")
        if len(parts) == n_sep + 1:
            records.append((buf_line, parts, text))
        elif len(parts) > n_sep + 1 and free is not None:
            extra = len(parts) - n_sep - 1
            merged = [*parts[:free], "|".join(parts[free : free + extra + 1])]
            records.append((buf_line, merged + parts[free + extra + 1 :], text))
        else:
            problems.append(
                (buf_line, f"record has {len(parts)} fields, header has {n_sep + 1}", text)
            )
        buf.clear()

    for number, raw in enumerate(lines[header_lines:], start=header_lines + 1):
        text = raw[:-1] if raw.endswith("\r") else raw
        seps = text.count("|")
        if buf and buf_seps >= n_sep and seps == 0:
            buf.append(text)  # more lines of a free-text field at the end of the record
            continue
        if buf and (buf_seps >= n_sep or seps == n_sep):
            close()  # a complete record, or a truncated one followed by a whole new record
        if not buf:
            if not text:
                continue
            buf_line, buf_seps = number, 0
        buf.append(text)
        buf_seps += seps
    if buf:
        close()
    table = pa.table(
        {
            "line": pa.array([r[0] for r in records], pa.int64()),
            **{
                f"f{i}": pa.array([r[1][i] for r in records], pa.string()) for i in range(n_sep + 1)
            },
            "raw": pa.array([r[2] for r in records], pa.string()),
        }
    )
    con.register("sacct_records_arrow", table)
    con.execute("CREATE OR REPLACE TEMP TABLE sacct_records AS SELECT * FROM sacct_records_arrow")
    con.unregister("sacct_records_arrow")
    return problems


def _field(columns: dict[str, int], key: str) -> str:
    """SQL for a raw field, NULL when the file lacks it; empty strings become NULL."""
    return f"nullif(f{columns[key]}, '')" if key in columns else "CAST(NULL AS VARCHAR)"


def _type_records(
    con: duckdb.DuckDBPyConnection,
    names: list[str],
    columns: dict[str, int],
    tz: str,
    default_cluster: str,
) -> None:
    f = lambda key: _field(columns, key)  # noqa: E731
    job_id = f("jobid") if "jobid" in columns else f("jobidraw")
    tres = f("alloctres")
    gpu_untyped = f"regexp_extract({tres}, '(?:^|,)gres/gpu=([^,]*)', 1)"
    gpu_typed = f"regexp_extract_all({tres}, '(?:^|,)gres/gpu:[^=,]+=([^,]*)', 1)"
    gres = f("allocgres")
    con.execute(
        f"""
        CREATE OR REPLACE TEMP VIEW stage_raw AS
        SELECT line,
            coalesce({f("cluster")}, {sql_quote(default_cluster)}) AS cluster,
            {job_id} AS job_id, {f("jobidraw")} AS job_id_raw,
            {f("jobname")} AS name, {f("user")} AS user_name, {f("account")} AS account,
            {f("partition")} AS partition, {f("qos")} AS qos, {f("state")} AS state_raw,
            upper(split_part({f("state")}, ' ', 1)) AS state, {f("exitcode")} AS exit_code,
            {f("submit")} AS submit_raw, {f("start")} AS start_raw, {f("end")} AS end_raw,
            {f("elapsedraw")} AS elapsed_raw, {tres} AS tres_raw, {gres} AS gres_raw,
            {f("nnodes")} AS nnodes_raw, {f("nodelist")} AS node_list_raw,
            {f("comment")} AS comment, {f("reason")} AS reason,
            {gpu_untyped} AS gpu_untyped, {gpu_typed} AS gpu_typed,
            regexp_extract({gres}, '(?:^|,)gpu(?::[^:,(]+)?:(\\d+)', 1) AS gres_count,
            strpos({job_id}, '.') > 0 OR strpos({f("jobidraw")}, '.') > 0 AS is_step
        FROM sacct_records
        """
    )
    con.execute(
        f"""
        CREATE OR REPLACE TEMP TABLE stage_typed AS
        SELECT *,
            {epoch_sql("submit_raw", tz)} AS submit_s,
            {epoch_sql("start_raw", tz)} AS start_s,
            {epoch_sql("end_raw", tz)} AS end_s,
            TRY_CAST(elapsed_raw AS BIGINT) AS elapsed_s,
            TRY_CAST(nnodes_raw AS BIGINT) AS num_nodes,
            CASE WHEN gpu_untyped <> '' THEN TRY_CAST(gpu_untyped AS BIGINT)
                 WHEN len(gpu_typed) > 0 THEN
                      list_sum(list_transform(gpu_typed, lambda x: TRY_CAST(x AS BIGINT)))
                 WHEN tres_raw IS NOT NULL THEN 0
                 WHEN gres_count <> '' THEN TRY_CAST(gres_count AS BIGINT)
                 WHEN gres_raw IS NOT NULL THEN 0
            END AS num_gpus,
            nullif(regexp_extract(tres_raw, '(?:^|,)gres/gpu:([^=,]+)=', 1), '') AS gpu_type,
            CASE WHEN node_list_raw IN ('None assigned', '(null)', 'None') THEN NULL
                 ELSE node_list_raw END AS node_list
        FROM stage_raw
        """
    )


def _checks(names: list[str], columns: dict[str, int]) -> list[str]:
    """Validation queries over ``stage_typed``: each row is one bad value."""
    name = lambda key: names[columns[key]] if key in columns else key  # noqa: E731
    states = ", ".join(sql_quote(s) for s in KNOWN_STATES)
    checks = [
        f"""SELECT line, {sql_quote(name("jobidraw"))}, 'missing job id', CAST(NULL AS VARCHAR) FROM stage_typed
            WHERE job_id_raw IS NULL""",
        f"""SELECT line, {sql_quote(name("jobidraw"))}, 'not a Slurm job id: ' || job_id_raw, CAST(NULL AS VARCHAR)
            FROM stage_typed WHERE NOT regexp_full_match(job_id_raw, '\\d+([_+]\\d+)?(\\.\\S+)?')""",
        f"""SELECT line, {sql_quote(name("state"))}, 'unknown job state: ' || coalesce(state_raw, ''),
            CAST(NULL AS VARCHAR) FROM stage_typed WHERE NOT is_step AND (state IS NULL OR state NOT IN ({states}))""",
        f"""SELECT line, {sql_quote(name("start"))}, 'not a time: ' || start_raw, CAST(NULL AS VARCHAR) FROM stage_typed
            WHERE {bad_time_sql("start_raw", "start_s")}""",
        f"""SELECT line, {sql_quote(name("end"))}, 'not a time: ' || end_raw, CAST(NULL AS VARCHAR) FROM stage_typed
            WHERE {bad_time_sql("end_raw", "end_s")}""",
        f"""SELECT line, {sql_quote(name("end"))}, 'job ends before it starts', CAST(NULL AS VARCHAR) FROM stage_typed
            WHERE end_s < start_s""",
        """SELECT line, 'AllocTRES', 'GPU count is not a whole number: ' || tres_raw, CAST(NULL AS VARCHAR)
            FROM stage_typed WHERE (gpu_untyped <> '' OR len(gpu_typed) > 0) AND num_gpus IS NULL""",
    ]
    if "submit" in columns:
        checks.append(
            f"""SELECT line, {sql_quote(name("submit"))}, 'not a time: ' || submit_raw, CAST(NULL AS VARCHAR)
                FROM stage_typed WHERE {bad_time_sql("submit_raw", "submit_s")}"""
        )
    if "elapsedraw" in columns:
        checks.append(
            f"""SELECT line, {sql_quote(name("elapsedraw"))}, 'not a number of seconds: '
                || elapsed_raw, CAST(NULL AS VARCHAR) FROM stage_typed
                WHERE elapsed_raw IS NOT NULL AND (elapsed_s IS NULL OR elapsed_s < 0)"""
        )
    if "nnodes" in columns:
        checks.append(
            f"""SELECT line, {sql_quote(name("nnodes"))}, 'not a node count: ' || nnodes_raw, CAST(NULL AS VARCHAR)
                FROM stage_typed WHERE nnodes_raw IS NOT NULL
                AND (num_nodes IS NULL OR num_nodes < 0)"""
        )
    checks.append(
        f"""SELECT line, {sql_quote(name("nodelist"))}, 'cannot read node list: ' || node_list, CAST(NULL AS VARCHAR)
            FROM stage_typed WHERE node_list IS NOT NULL
            AND NOT regexp_full_match(node_list,
                '([^,\\[\\]]+(\\[\\d+(-\\d+)?(,\\d+(-\\d+)?)*\\])?[^,\\[\\]]*)(,[^,\\[\\]]+(\\[\\d+(-\\d+)?(,\\d+(-\\d+)?)*\\])?[^,\\[\\]]*)*')"""
    )
    return checks


def _finish(
    con: duckdb.DuckDBPyConnection,
    info: FileInfo,
    ingest_id: int,
    problems: list[Problem],
    shape_problems: list[tuple[int, str, str]],
    columns: dict[str, int],
) -> SacctStage:
    all_problems = problems + [
        Problem(line=line, field="(record)", message=msg, raw=raw)
        for line, msg, raw in shape_problems
    ]
    if all_problems:
        store_rejects(con, ingest_id, info.path, all_problems)
    bad_lines = sorted({p.line for p in problems})
    keep = "NOT is_step" + (f" AND line NOT IN {_lines_sql(bad_lines)}" if bad_lines else "")
    summary = con.execute(
        f"""SELECT count(*), count(*) FILTER (WHERE is_step),
                   count(*) FILTER (WHERE {keep}),
                   count(DISTINCT (cluster, job_id_raw, coalesce(submit_s, start_s, -1)))
                       FILTER (WHERE {keep}),
                   max(greatest(submit_s, start_s, end_s,
                       CASE WHEN end_s IS NULL THEN start_s + elapsed_s END)) FILTER (WHERE {keep})
            FROM stage_typed"""
    ).fetchall()[0]
    records, steps, valid_runs, distinct_runs, as_of = summary
    duplicates = valid_runs - distinct_runs
    if duplicates:
        # Within one file the last record of a run wins (sacct never prints one twice; a
        # concatenated capture can): ties on (cluster, job_id_raw, submit_s) keep the later line.
        con.execute(
            f"""CREATE OR REPLACE TEMP VIEW stage_jobs AS
                SELECT * EXCLUDE (rn) FROM (
                    SELECT *, row_number() OVER (
                        PARTITION BY cluster, job_id_raw, coalesce(submit_s, start_s, -1)
                        ORDER BY line DESC) AS rn
                    FROM stage_typed WHERE {keep})
                WHERE rn = 1"""
        )
    else:
        con.execute(
            f"""CREATE OR REPLACE TEMP VIEW stage_jobs AS SELECT * FROM stage_typed
                WHERE {keep}"""
        )
    rejected = len({p.line for p in all_problems})
    return SacctStage(
        rows_read=records + len(shape_problems),
        rows_rejected=rejected,
        rows_skipped=steps + duplicates,
        as_of_s=None if as_of is None else int(as_of),
        gpu_count_missing="alloctres" not in columns and "allocgres" not in columns,
    )


def _lines_sql(lines: list[int]) -> str:
    """A SQL list literal of line numbers (a view cannot keep bound parameters)."""
    return "(" + ", ".join(str(int(n)) for n in lines) + ")" if lines else "(NULL)"


def load_jobs(con: duckdb.DuckDBPyConnection, ingest_id: int) -> None:
    """Replace the staged job runs in ``jobs`` (by natural key) and expand their node lists."""
    con.execute(HOSTLIST_MACRO_SQL)
    key = "(cluster, job_id_raw, submit_s)"
    staged_keys = (
        "SELECT cluster, job_id_raw, coalesce(submit_s, start_s, -1) AS submit_s FROM stage_jobs"
    )
    con.execute(f"DELETE FROM jobs WHERE {key} IN ({staged_keys})")
    con.execute(f"DELETE FROM job_nodes WHERE {key} IN ({staged_keys})")
    con.execute(
        f"""
        INSERT INTO jobs SELECT cluster, coalesce(job_id, job_id_raw), job_id_raw,
            coalesce(submit_s, start_s, -1), name, user_name, account, partition, qos, state,
            state_raw, exit_code, start_s,
            -- No end: still running (or pending) at the capture; the ledger clips it at as_of.
            end_s, num_gpus, gpu_type, coalesce(num_nodes, len(hostlist_expand(node_list))),
            node_list, comment, reason, {ingest_id}, line
        FROM stage_jobs
        """
    )
    con.execute(
        """
        INSERT INTO job_nodes
        SELECT cluster, job_id_raw, coalesce(submit_s, start_s, -1),
            -- Most jobs run on one node: only bracketed or comma lists need the expansion.
            unnest(CASE WHEN regexp_matches(node_list, '[\\[,]') THEN hostlist_expand(node_list)
                        ELSE [node_list] END)
        FROM stage_jobs WHERE node_list IS NOT NULL AND start_s IS NOT NULL
        """
    )
