"""Slurm job accounting, part two: raw sacct fields to typed job rows in SQL, and the checks.

``sacct.py`` reassembles records from the text (multi-line and pipe-bearing fields) and stages them
as raw string fields ``f0, f1, ...``; this module types them in one SELECT (ids, states, times, GPU
counts, node lists), names every problem a row has, and finishes the stage (rejects, duplicates,
the capture time).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import duckdb

from gpuyield.hostlist import MAX_HOSTLIST_NAMES
from gpuyield.ingest import sacct_checks
from gpuyield.ingest._files import FileInfo
from gpuyield.ingest._sql import (
    Problem,
    bad_time_sql,
    epoch_sql,
    sql_quote,
    store_rejects,
)

# Every state sacct can print (Slurm's job_state_string: the base states, then the flags it
# prints instead of them); anything else is a parse error rather than a guess.
KNOWN_STATES = (
    "BOOT_FAIL",
    "CANCELLED",
    "COMPLETED",
    "COMPLETING",
    "CONFIGURING",
    "DEADLINE",
    "EXPEDITING",
    "FAILED",
    "LAUNCH_FAILED",
    "NODE_FAIL",
    "OUT_OF_MEMORY",
    "PENDING",
    "POWER_UP_NODE",
    "PREEMPTED",
    "RECONFIG_FAIL",
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
    "UPDATE_DB",
)


@dataclass(frozen=True, kw_only=True, slots=True)
class SacctStage:
    """What reading one sacct file produced (rows in the temp view ``stage_jobs`` or in ``jobs``)."""

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
    loaded: bool = False
    """True when the rows are in ``jobs`` already (the direct load), not in ``stage_jobs``."""


# The latest time a job row knows of: the default capture time for running jobs (for a run still
# going, its start plus its elapsed time, which sacct clips at its -E).
LATEST_TIME_SQL = """greatest(submit_s, start_s, end_s,
    CASE WHEN end_s IS NULL THEN start_s + elapsed_s END)"""


def _field(columns: dict[str, int], key: str) -> str:
    """SQL for a raw field, NULL when the file lacks it; empty strings become NULL."""
    return f"nullif(f{columns[key]}, '')" if key in columns else "CAST(NULL AS VARCHAR)"


NOT_A_TIME = "not a time: "


ENDS_BEFORE_START = "job ends before it starts"


# What each problem code in ``sacct_stage.problems`` means: (field key, message about the value).
_PROBLEMS = {
    "id_missing": ("jobidraw", "missing job id"),
    "id_bad": ("jobidraw", "not a Slurm job id: {value}"),
    "state": ("state", "unknown job state: {value}"),
    "submit": ("submit", NOT_A_TIME + "{value}"),
    "start": ("start", NOT_A_TIME + "{value}"),
    "end": ("end", NOT_A_TIME + "{value}"),
    "order": ("end", ENDS_BEFORE_START),
    "gpus": ("alloctres", "GPU count is not a whole number: {value}"),
    "elapsed": ("elapsedraw", "not a number of seconds: {value}"),
    "nnodes": ("nnodes", "not a node count: {value}"),
    "nodelist": ("nodelist", "cannot read node list: {value}"),
    **sacct_checks.PROBLEMS,
}


NODE_LIST_RE = (
    r"([^,\[\]]+(\[\d+(-\d+)?(,\d+(-\d+)?)*\])?[^,\[\]]*)"
    r"(,[^,\[\]]+(\[\d+(-\d+)?(,\d+(-\d+)?)*\])?[^,\[\]]*)*"
)


def typed_select(
    columns: dict[str, int],
    tz: str,
    default_cluster: str,
    *,
    source: str,
    with_line: bool,
    codes: bool = True,
    max_nodes: int = MAX_HOSTLIST_NAMES,
) -> str:
    """One SELECT from raw fields (``f0``...) to typed job columns plus ``problems``.

    ``problems`` is a comma-separated list of codes (``_PROBLEMS``), empty for a good row, so
    parsing and every check take one pass over the file. With ``codes=False`` it only says whether
    a row has a problem ('' or '?'): cheaper, for the direct load, which stops at the first one.

    Three nested SELECTs: the innermost (``_raw_typed_sql``) types each field as read, the middle
    one derives Unknown starts and ends from ElapsedRaw, the outer one names each row's problems.
    """
    tres = _gpu_tres_sql(columns)
    checks = _check_conditions(columns, tres, max_nodes=max_nodes)
    problems = _problems_sql(checks, codes=codes)
    typed = _raw_typed_sql(columns, tz, default_cluster, tres=tres, source=source)
    line = "line, " if with_line else ""
    return f"""
        SELECT {line}cluster, job_id, job_id_raw, submit_s, name, user_name, account,
            partition, qos, state, state_raw, exit_code, start_s, end_s, elapsed_s, num_gpus,
            gpu_types, num_nodes, node_list, comment, reason, is_step,
            {problems} AS problems
        FROM (
            SELECT * EXCLUDE (start_parsed, end_parsed),
                {sacct_checks.start_sql("start_parsed", "end_parsed", "elapsed_s")} AS start_s,
                {sacct_checks.end_sql("start_parsed", "end_parsed", "elapsed_s", "state")} AS end_s,
                start_parsed, end_parsed
            FROM (
            {typed}
            )
        )
    """


def _gpu_tres_sql(columns: dict[str, int]) -> str:
    """SQL for the TRES string a job's GPU count and type are read from."""
    tres = _field(columns, "alloctres")
    # A job still waiting holds nothing, so sacct leaves AllocTRES empty: its GPU count is what it
    # asked for (ReqTRES), the number `gpuyield serve` reports as GPUs waiting. Nothing else
    # reads the GPU count of a job that never started.
    if "reqtres" in columns:
        state, requested = _field(columns, "state"), _field(columns, "reqtres")
        pending = f"upper(split_part({state}, ' ', 1)) = 'PENDING' AND {tres} IS NULL"
        tres = f"CASE WHEN {pending} THEN {requested} ELSE {tres} END"
    return tres


def _check_conditions(
    columns: dict[str, int], tres: str, *, max_nodes: int
) -> list[tuple[str, str]]:
    """(code, condition) pairs: the row has the problem ``code`` when ``condition`` is true."""
    states = ", ".join(sql_quote(s) for s in KNOWN_STATES)

    def bad_time(key: str) -> tuple[str, str]:
        # Start and End as read, before Unknown ones are derived from ElapsedRaw.
        parsed = "submit_s" if key == "submit" else f"{key}_parsed"
        return key, bad_time_sql(_field(columns, key), parsed)

    checks = [
        ("id_missing", "job_id_raw IS NULL"),
        ("id_bad", r"NOT regexp_full_match(job_id_raw, '\d+([_+]\d+)?(\.\S+)?')"),
        ("state", f"NOT is_step AND (state IS NULL OR state NOT IN ({states}))"),
        bad_time("start"),
        bad_time("end"),
        ("order", "end_s < start_s"),
        (
            "gpus",
            f"""(contains({tres}, 'gres/gpu=') OR contains({tres}, 'gres/gpu:'))
                AND (num_gpus IS NULL OR {sacct_checks.bad_typed_sql(tres)})""",
        ),
        # Only lists with brackets or commas can be malformed; one plain name always reads.
        (
            "nodelist",
            f"""(contains(node_list, '[') OR contains(node_list, ',') OR contains(node_list, ']'))
                AND NOT regexp_full_match(node_list, '{NODE_LIST_RE}')""",
        ),
    ]
    if "submit" in columns:
        checks.append(bad_time("submit"))
    if "elapsedraw" in columns:
        elapsed = _field(columns, "elapsedraw")
        checks.append(
            ("elapsed", f"{elapsed} IS NOT NULL AND (elapsed_s IS NULL OR elapsed_s < 0)")
        )
    if "nnodes" in columns:
        nnodes = _field(columns, "nnodes")
        checks.append(("nnodes", f"{nnodes} IS NOT NULL AND (num_nodes IS NULL OR num_nodes < 0)"))
    gres = _field(columns, "allocgres")
    return checks + sacct_checks.checks(gres, has_nnodes="nnodes" in columns, max_nodes=max_nodes)


def _problems_sql(checks: list[tuple[str, str]], *, codes: bool) -> str:
    """SQL for a row's ``problems``: the codes of its failed checks, or only '?' when any failed."""
    if codes:
        return (
            "concat_ws(',', "
            + ", ".join(f"CASE WHEN {cond} THEN '{code}' END" for code, cond in checks)
            + ")"
        )
    return "CASE WHEN " + " OR ".join(f"({cond})" for _, cond in checks) + " THEN '?' ELSE '' END"


def _num_gpus_sql(tres: str) -> str:
    """SQL for a job's GPU count over ``gpu_at`` (where ``gres/gpu=`` starts) and ``gres_gpus``."""
    # gres/gpu=N when present; typed entries only without it (Slurm prints both: never add them).
    return f"""CASE
        -- The value after the first "gres/gpu=" when it starts a key (first, or after a comma):
        -- string functions on its position, twice cheaper than splitting the whole list.
        WHEN gpu_at = 1 OR (gpu_at > 1 AND substr({tres}, gpu_at - 1, 1) = ',') THEN
             {sacct_checks.whole_sql(f"split_part(substr({tres}, gpu_at + 9), ',', 1)")}
        -- Not a key there (some other key ends in it): the value after ",gres/gpu=" anywhere.
        WHEN gpu_at > 0 THEN
             {sacct_checks.whole_sql(f"split_part(split_part(',' || {tres}, ',gres/gpu=', 2), ',', 1)")}
        WHEN contains({tres}, 'gres/gpu:') THEN {sacct_checks.typed_gpus_sql(tres)}
        WHEN {tres} IS NOT NULL THEN 0
        ELSE gres_gpus
    END"""


def _raw_typed_sql(
    columns: dict[str, int], tz: str, default_cluster: str, *, tres: str, source: str
) -> str:
    """The innermost SELECT: every raw field typed as read (times parsed, counts as integers)."""
    f = lambda key: _field(columns, key)  # noqa: E731
    job_id_raw = f("jobidraw")
    job_id = f("jobid") if "jobid" in columns else job_id_raw
    gres = f("allocgres")
    return f"""SELECT *,
                coalesce({f("cluster")}, {sql_quote(default_cluster)}) AS cluster,
                {job_id} AS job_id, {job_id_raw} AS job_id_raw,
                {f("jobname")} AS name, {f("user")} AS user_name, {f("account")} AS account,
                {f("partition")} AS partition, {f("qos")} AS qos, {f("state")} AS state_raw,
                upper(split_part({f("state")}, ' ', 1)) AS state, {f("exitcode")} AS exit_code,
                {epoch_sql(f("submit"), tz)} AS submit_s,
                {epoch_sql(f("start"), tz)} AS start_parsed,
                {epoch_sql(f("end"), tz)} AS end_parsed,
                {sacct_checks.whole_sql(f("elapsedraw"))} AS elapsed_s,
                {sacct_checks.whole_sql(f("nnodes"))} AS num_nodes,
                {_num_gpus_sql(tres)} AS num_gpus,
                {sacct_checks.gpu_types_sql(tres, gres)} AS gpu_types,
                CASE WHEN {f("nodelist")} IN ('None assigned', '(null)', 'None') THEN NULL
                     ELSE {f("nodelist")} END AS node_list,
                {f("comment")} AS comment, {f("reason")} AS reason,
                strpos({job_id}, '.') > 0 OR strpos({job_id_raw}, '.') > 0 AS is_step
            FROM (SELECT *, strpos({tres}, 'gres/gpu=') AS gpu_at,
                    {sacct_checks.gres_gpus_sql(gres)} AS gres_gpus FROM {source})"""


def row_problems(
    con: duckdb.DuckDBPyConnection,
    path: Path,
    names: Sequence[str],
    columns: dict[str, int],
    *,
    fast: bool,
    limit: int | None,
) -> list[Problem]:
    """The staged rows with problems, as messages naming the field and the raw value."""
    limit_sql = "" if limit is None else f" LIMIT {int(limit)}"
    rows = con.execute(
        f"SELECT line, problems FROM sacct_staged WHERE problems <> '' ORDER BY line{limit_sql}"
    ).fetchall()
    if not rows:
        return []
    lines = sorted({int(r[0]) for r in rows})
    if fast:
        raw = {n: (text, text.split("|")) for n, text in _read_lines(path, set(lines)).items()}
    else:
        fields = ", ".join(f"f{i}" for i in range(len(names)))
        raw = {
            int(r[0]): (r[1], list(r[2:]))
            for r in con.execute(
                f"SELECT line, raw, {fields} FROM sacct_records WHERE line IN (SELECT unnest(?))",
                [lines],
            ).fetchall()
        }
    problems: list[Problem] = []
    for line, codes in rows:
        record, values = raw.get(int(line), ("", []))
        for code in codes.split(","):
            key, message = _PROBLEMS[code]
            index = columns.get(key)
            value = (values[index] or "") if index is not None and index < len(values) else ""
            field = names[index] if index is not None else _FIELD_LABELS.get(key, key)
            problems.append(
                Problem(
                    line=int(line),
                    field=field,
                    message=message.format(value=value),
                    raw=record,
                )
            )
    return problems


# How a problem's field is named when the file lacks the column (the check is about its absence).
_FIELD_LABELS = {"alloctres": "AllocTRES"}


def _read_lines(path: Path, wanted: set[int]) -> dict[int, str]:
    """The text of some lines of a file (1-based), for error messages."""
    found: dict[int, str] = {}
    last = max(wanted)
    with path.open(encoding="utf-8", newline="") as handle:
        for number, text in enumerate(handle, start=1):
            if number in wanted:
                found[number] = text.rstrip("\r\n")
            if number >= last:
                break
    return found


def finish_stage(
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
    store_rejects(con, ingest_id, info.path, all_problems)
    keep = "NOT is_step AND problems = ''"
    stage_table = "sacct_stage"
    conflicting = sorted({p.line for p in problems if p.field == "JobIDRaw" and p.raw is None})
    if conflicting:  # lenient: runs whose records disagree are rejected, every record of them
        keep += f" AND line NOT IN ({', '.join(map(str, conflicting))})"
        stage_table = "sacct_staged"  # the fast path's table has no line column, its view does
    summary = con.execute(
        f"""SELECT count(*), count(*) FILTER (WHERE is_step AND problems = ''),
                   count(*) FILTER (WHERE {keep}),
                   count(DISTINCT hash(cluster, job_id_raw, coalesce(submit_s, start_s, -1)))
                       FILTER (WHERE {keep}),
                   max({LATEST_TIME_SQL}) FILTER (WHERE {keep})
            FROM {stage_table}"""
    ).fetchall()[0]
    records, steps, valid_runs, distinct_hashes, as_of = summary
    # Distinct hashes first (an integer aggregate, 4x cheaper than on the key's strings); only
    # when they say there are duplicates (or two keys share a hash) count them exactly.
    duplicates = 0
    if valid_runs != distinct_hashes:
        duplicates = (
            valid_runs
            - con.execute(
                f"""SELECT count(DISTINCT (cluster, job_id_raw, coalesce(submit_s, start_s, -1)))
                FROM {stage_table} WHERE {keep}"""
            ).fetchall()[0][0]
        )
    if duplicates:
        # A run printed twice with the same values (a concatenated capture) is stored once;
        # records that disagree were refused or rejected above (_duplicate_problems).
        con.execute(
            f"""CREATE OR REPLACE TEMP VIEW stage_jobs AS
                SELECT * EXCLUDE (rn) FROM (
                    SELECT *, row_number() OVER (
                        PARTITION BY cluster, job_id_raw, coalesce(submit_s, start_s, -1)
                        ORDER BY line DESC) AS rn
                    FROM sacct_staged WHERE {keep})
                WHERE rn = 1"""
        )
    else:
        con.execute(
            f"CREATE OR REPLACE TEMP VIEW stage_jobs AS SELECT * FROM sacct_staged WHERE {keep}"
        )
    rejected = len({p.line for p in all_problems})
    return SacctStage(
        rows_read=records + len(shape_problems),
        rows_rejected=rejected,
        rows_skipped=steps + duplicates,
        as_of_s=None if as_of is None else int(as_of),
        gpu_count_missing="alloctres" not in columns and "allocgres" not in columns,
    )
