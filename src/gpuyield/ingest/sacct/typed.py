"""Raw sacct fields (``f0, f1, ...``) to typed job rows in one SQL SELECT: ids, states, times,
GPU counts and node lists, with a code for every problem a row has.
"""

from __future__ import annotations

from gpuyield.hostlist import MAX_HOSTLIST_NAMES
from gpuyield.ingest._sql import bad_time_sql, epoch_sql
from gpuyield.ingest.sacct import checks as sacct_checks
from gpuyield.sqltext import identifier, literal

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


# The latest time a job row knows of: the default capture time for running jobs (for a run still
# going, its start plus its elapsed time, which sacct clips at its -E).
LATEST_TIME_SQL = """greatest(submit_s, start_s, end_s,
    CASE WHEN end_s IS NULL THEN start_s + elapsed_s END)"""


def _field_sql(columns: dict[str, int], key: str) -> str:
    """SQL for a raw field, NULL when the file lacks it; empty strings become NULL."""
    if key not in columns:
        return "CAST(NULL AS VARCHAR)"
    return f"nullif({identifier(f'f{columns[key]}')}, '')"


NOT_A_TIME = "not a time: "


ENDS_BEFORE_START = "job ends before it starts"


# What each problem code in a typed row's ``problems`` means: (field key, message about the value).
ROW_PROBLEMS = {
    "id_missing": ("jobidraw", "missing job id"),
    "id_bad": ("jobidraw", "not a Slurm job id: {value}"),
    "state": ("state", "unknown job state: {value}"),
    "submit": ("submit", NOT_A_TIME + "{value}"),
    "start": ("start", NOT_A_TIME + "{value}"),
    "end": ("end", NOT_A_TIME + "{value}"),
    "order": ("end", ENDS_BEFORE_START),
    "gpus": ("alloctres", "GPU count is not a whole number: {value}"),
    "elapsed": ("elapsedraw", "not a number of seconds: {value}"),
    "elapsed_text": ("elapsed", "not a duration ([D-][HH:]MM:SS): {value}"),
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
    source_sql: str,
    with_line: bool,
    codes: bool = True,
    max_nodes: int = MAX_HOSTLIST_NAMES,
) -> str:
    """One SELECT from raw fields (``f0``...) to typed job columns plus ``problems``.

    ``problems`` is a comma-separated list of codes (``ROW_PROBLEMS``), empty for a good row, so
    parsing and every check take one pass over the file. With ``codes=False`` it only says whether
    a row has a problem ('' or '?'): cheaper, for the direct load, which stops at the first one.

    Three nested SELECTs: the innermost (``_raw_typed_sql``) types each field as read, the middle
    one derives Unknown starts and ends from ElapsedRaw, the outer one names each row's problems.
    """
    tres_sql = _gpu_tres_sql(columns)
    checks = _check_conditions(columns, tres_sql, max_nodes=max_nodes)
    problems_sql = _problems_sql(checks, codes=codes)
    typed_sql = _raw_typed_sql(
        columns, tz, default_cluster, tres_sql=tres_sql, source_sql=source_sql
    )
    line = "line, " if with_line else ""
    return f"""
        SELECT {line}cluster, job_id, job_id_raw, submit_s, name, user_name, account,
            partition, qos, state, state_raw, exit_code, start_s, end_s, elapsed_s, num_gpus,
            gpu_types, num_nodes, node_list, comment, reason, is_step,
            {problems_sql} AS problems
        FROM (
            SELECT * EXCLUDE (start_parsed, end_parsed),
                {sacct_checks.start_sql("start_parsed", "end_parsed", "elapsed_s")} AS start_s,
                {sacct_checks.end_sql("start_parsed", "end_parsed", "elapsed_s", "state")} AS end_s,
                start_parsed, end_parsed
            FROM (
            {typed_sql}
            )
        )
    """


def _gpu_tres_sql(columns: dict[str, int]) -> str:
    """SQL for the TRES string a job's GPU count and type are read from."""
    tres_sql = _field_sql(columns, "alloctres")
    # A job still waiting holds nothing, so sacct leaves AllocTRES empty: its GPU count is what it
    # asked for (ReqTRES), the number `gpuyield serve` reports as GPUs waiting. Nothing else
    # reads the GPU count of a job that never started.
    if "reqtres" in columns:
        state_sql = _field_sql(columns, "state")
        requested_sql = _field_sql(columns, "reqtres")
        pending_sql = f"upper(split_part({state_sql}, ' ', 1)) = 'PENDING' AND {tres_sql} IS NULL"
        tres_sql = f"CASE WHEN {pending_sql} THEN {requested_sql} ELSE {tres_sql} END"
    return tres_sql


def _check_conditions(
    columns: dict[str, int], tres_sql: str, *, max_nodes: int
) -> list[tuple[str, str]]:
    """(code, condition) pairs: the row has the problem ``code`` when ``condition`` is true."""
    states = ", ".join(literal(s) for s in KNOWN_STATES)

    def bad_time(key: str) -> tuple[str, str]:
        # Start and End as read, before Unknown ones are derived from ElapsedRaw.
        parsed = "submit_s" if key == "submit" else f"{key}_parsed"
        return key, bad_time_sql(_field_sql(columns, key), parsed)

    checks = [
        ("id_missing", "job_id_raw IS NULL"),
        # A pending job array prints its tasks as one id, 123_[4-10%2], when there is no
        # JobIDRaw to give its own number.
        (
            "id_bad",
            r"NOT regexp_full_match(job_id_raw, '\d+([_+]\d+)?(\.\S+)?|\d+_\[[0-9,:%-]+\]')",
        ),
        ("state", f"NOT is_step AND (state IS NULL OR state NOT IN ({states}))"),
        bad_time("start"),
        bad_time("end"),
        ("order", "end_s < start_s"),
        (
            "gpus",
            f"""(contains({tres_sql}, 'gres/gpu=') OR contains({tres_sql}, 'gres/gpu:'))
                AND (num_gpus IS NULL OR {sacct_checks.bad_typed_sql(tres_sql)})""",
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
    if "elapsedraw" in columns or "elapsed" in columns:
        code = "elapsed" if "elapsedraw" in columns else "elapsed_text"
        elapsed_sql = _field_sql(columns, "elapsedraw" if code == "elapsed" else "elapsed")
        checks.append((code, f"{elapsed_sql} IS NOT NULL AND (elapsed_s IS NULL OR elapsed_s < 0)"))
    if "nnodes" in columns:
        nnodes_sql = _field_sql(columns, "nnodes")
        checks.append(
            ("nnodes", f"{nnodes_sql} IS NOT NULL AND (num_nodes IS NULL OR num_nodes < 0)")
        )
    gres_sql = _field_sql(columns, "allocgres")
    return checks + sacct_checks.checks(
        gres_sql, has_nnodes="nnodes" in columns, max_nodes=max_nodes
    )


def _problems_sql(checks: list[tuple[str, str]], *, codes: bool) -> str:
    """SQL for a row's ``problems``: the codes of its failed checks, or only '?' when any failed.

    ``checks``: (code, condition) pairs, each condition SQL built by this module's *_sql code."""
    if codes:
        cases = [f"CASE WHEN {cond_sql} THEN {literal(code)} END" for code, cond_sql in checks]
        return "concat_ws(',', " + ", ".join(cases) + ")"
    any_sql = " OR ".join(f"({cond_sql})" for _, cond_sql in checks)
    return f"CASE WHEN {any_sql} THEN '?' ELSE '' END"


def _gpu_text_sql(tres_sql: str) -> str:
    """SQL for the text of a job's ``gres/gpu=`` count over ``gpu_at`` (where it starts); NULL
    without one. Taken once per row: the count's check and cast both read it."""
    return f"""CASE
        -- The value after the first "gres/gpu=" when it starts a key (first, or after a comma):
        -- string functions on its position, twice cheaper than splitting the whole list.
        WHEN gpu_at = 1 OR (gpu_at > 1 AND substr({tres_sql}, gpu_at - 1, 1) = ',') THEN
             split_part(substr({tres_sql}, gpu_at + 9), ',', 1)
        -- Not a key there (some other key ends in it): the value after ",gres/gpu=" anywhere.
        WHEN gpu_at > 0 THEN split_part(split_part(',' || {tres_sql}, ',gres/gpu=', 2), ',', 1)
    END"""


def _num_gpus_sql(tres_sql: str) -> str:
    """SQL for a job's GPU count over ``gpu_text`` (``_gpu_text_sql``) and ``gres_gpus``."""
    # gres/gpu=N when present; typed entries only without it (Slurm prints both: never add them).
    return f"""CASE
        WHEN gpu_text IS NOT NULL THEN {sacct_checks.whole_sql("gpu_text")}
        WHEN contains({tres_sql}, 'gres/gpu:') THEN {sacct_checks.typed_gpus_sql(tres_sql)}
        WHEN {tres_sql} IS NOT NULL THEN 0
        ELSE gres_gpus
    END"""


def _elapsed_sql(columns: dict[str, int]) -> str:
    """SQL for a job's elapsed seconds: ElapsedRaw, else Elapsed (``1-06:51:32``) as older
    ``--format`` lists print it, else NULL."""
    if "elapsedraw" in columns:
        return sacct_checks.whole_sql(_field_sql(columns, "elapsedraw"))
    if "elapsed" in columns:
        return sacct_checks.elapsed_sql(_field_sql(columns, "elapsed"))
    return "CAST(NULL AS BIGINT)"


def _spaceless_sql(node_list_sql: str) -> str:
    """SQL: a node list with whitespace dropped as Slurm's hostlist parser drops it (``c1,
    c[2-3]`` is ``c1,c[2-3]``; a blank between names separates them like a comma)."""
    return f"""CASE WHEN strpos({node_list_sql}, ' ') > 0 OR strpos({node_list_sql}, chr(9)) > 0
        THEN nullif(regexp_replace(trim({node_list_sql}), '\\s*[,\\s]\\s*', ',', 'g'), '')
        ELSE {node_list_sql} END"""


def _raw_typed_sql(
    columns: dict[str, int], tz: str, default_cluster: str, *, tres_sql: str, source_sql: str
) -> str:
    """The innermost SELECT: every raw field typed as read (times parsed, counts as integers)."""

    def f_sql(key: str) -> str:
        return _field_sql(columns, key)

    raw_id_sql = f_sql("jobidraw")
    id_sql = f_sql("jobid") if "jobid" in columns else raw_id_sql
    return f"""SELECT *,
                coalesce({f_sql("cluster")}, {literal(default_cluster)}) AS cluster,
                {id_sql} AS job_id, {raw_id_sql} AS job_id_raw,
                {f_sql("jobname")} AS name, {f_sql("user")} AS user_name, {f_sql("account")} AS account,
                {f_sql("partition")} AS partition, {f_sql("qos")} AS qos, {f_sql("state")} AS state_raw,
                upper(split_part({f_sql("state")}, ' ', 1)) AS state, {f_sql("exitcode")} AS exit_code,
                {epoch_sql(f_sql("submit"), tz)} AS submit_s,
                {epoch_sql(f_sql("start"), tz)} AS start_parsed,
                {epoch_sql(f_sql("end"), tz)} AS end_parsed,
                {_elapsed_sql(columns)} AS elapsed_s,
                {sacct_checks.whole_sql(f_sql("nnodes"))} AS num_nodes,
                {_num_gpus_sql(tres_sql)} AS num_gpus,
                {sacct_checks.gpu_types_sql(tres_sql, f_sql("allocgres"))} AS gpu_types,
                CASE WHEN {f_sql("nodelist")} IN ('None assigned', '(null)', 'None') THEN NULL
                     ELSE {_spaceless_sql(f_sql("nodelist"))} END AS node_list,
                {f_sql("comment")} AS comment, {f_sql("reason")} AS reason,
                strpos({id_sql}, '.') > 0 OR strpos({raw_id_sql}, '.') > 0 AS is_step
            FROM (SELECT *, {_gpu_text_sql(tres_sql)} AS gpu_text
                  FROM (SELECT *, strpos({tres_sql}, 'gres/gpu=') AS gpu_at,
                          {sacct_checks.gres_gpus_sql(f_sql("allocgres"))} AS gres_gpus
                        FROM {source_sql}))"""
