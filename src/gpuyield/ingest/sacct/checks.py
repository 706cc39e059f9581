"""The sacct checks that keep a wrong number out of the store (docs/ledger.md, "what gpuyield
refuses, and why"): strict whole numbers, plausible times, node lists that agree with NNodes and
the inventory, the documented answer when Start or End is Unknown, and conflicting duplicates.

Each piece is SQL over the typed sacct select (``typed.typed_select``), so every check runs in the
same single pass over the file as parsing.
"""

from __future__ import annotations

import duckdb

from gpuyield.errors import ParseError
from gpuyield.hostlist import MAX_HOSTLIST_NAMES
from gpuyield.sqltext import literal

# Times before any plausible GPU cluster, or past what the ledger can hold, are typos or a wrong
# SLURM_TIME_FORMAT: a job at epoch 0 would stretch the window over 56 years and empty the report.
EARLIEST_S = 946_684_800  # 2000-01-01T00:00:00Z
LATEST_S = 4_102_444_800  # 2100-01-01T00:00:00Z
# States in which a job has ended: with End=Unknown its end is Start + ElapsedRaw (sacct's own
# elapsed time), never "still running at the capture time".
FINISHED_STATES = (
    "BOOT_FAIL",
    "CANCELLED",
    "COMPLETED",
    "DEADLINE",
    "FAILED",
    "LAUNCH_FAILED",
    "NODE_FAIL",
    "OUT_OF_MEMORY",
    "PREEMPTED",
    "REQUEUED",
    "SPECIAL_EXIT",
    "TIMEOUT",
)
# A GPU count, node count or elapsed time: decimal digits only. DuckDB's casts round "1.4" to 1
# and read "0x10" as 16; nine digits are more than any cluster has GPUs.
_WHOLE = "[0-9]{1,12}"

PROBLEMS = {
    "submit_range": ("submit", "time outside 2000..2100: {value}"),
    "start_range": ("start", "time outside 2000..2100: {value}"),
    "end_range": ("end", "time outside 2000..2100: {value}"),
    "gres": ("allocgres", "GPU count is not a whole number: {value}"),
    "nnodes_list": ("nnodes", "NNodes {value} does not match the nodes NodeList names"),
    "nodes_cap": ("nodelist", "NodeList names more nodes than the cluster has: {value}"),
    "nodes_order": ("nodelist", "NodeList has a descending range (high-low): {value}"),
    "no_end": ("end", "a finished job without an end time or ElapsedRaw: {value}"),
    "no_nodes": ("nodelist", "a job that held GPUs for a while names no node: {value!r}"),
}


def elapsed_sql(expr_sql: str) -> str:
    """SQL: sacct's ``Elapsed`` (``[D-][HH:]MM:SS``) as seconds, for files without ElapsedRaw
    (older ``--format`` lists); NULL when it is not a duration."""
    pattern = "^(?:([0-9]{1,6})-)?(?:([0-9]{1,3}):)?([0-9]{1,3}):([0-9]{1,2})$"

    def group_sql(group: int) -> str:
        return (
            f"coalesce(TRY_CAST(nullif(regexp_extract({expr_sql}, {literal(pattern)}, "
            f"{literal(group)}), '') AS BIGINT), 0)"
        )

    return f"""CASE WHEN regexp_full_match({expr_sql}, {literal(pattern)})
        THEN {group_sql(1)} * 86400 + {group_sql(2)} * 3600 + {group_sql(3)} * 60 + {group_sql(4)}
    END"""


def descending_sql(node_list_sql: str) -> str:
    """SQL: whether a node list has a range that runs down (``n[3-1]``): Slurm refuses one, and
    counting it as zero nodes would leave the job's GPU time on no node."""
    ranges_sql = (
        f"flatten(list_transform(regexp_extract_all({node_list_sql}, '\\[([^\\]]*)\\]', 1), "
        "lambda g: string_split(g, ',')))"
    )
    return f"""coalesce(list_bool_or(list_transform({ranges_sql}, lambda r:
        TRY_CAST(nullif(split_part(r, '-', 2), '') AS DOUBLE)
            < TRY_CAST(split_part(r, '-', 1) AS DOUBLE))), false)"""


def whole_sql(expr_sql: str) -> str:
    """SQL: ``expr_sql`` as a BIGINT when it is only decimal digits, else NULL."""
    return (
        f"CASE WHEN regexp_full_match({expr_sql}, '{_WHOLE}') THEN CAST({expr_sql} AS BIGINT) END"
    )


def typed_gpus_sql(tres_sql: str) -> str:
    """SQL: the sum of ``gres/gpu:TYPE=N`` entries; NULL when one count is not a whole number."""
    values = f"regexp_extract_all({tres_sql}, '(?:^|,)gres/gpu:[^=,]+=([^,]*)', 1)"
    return f"""CASE WHEN list_bool_or(list_transform({values},
                        lambda x: NOT regexp_full_match(x, '{_WHOLE}'))) THEN NULL
                    ELSE list_sum(list_transform({values}, lambda x: CAST(x AS BIGINT))) END"""


def gpu_types_sql(tres_sql: str, gres_sql: str) -> str:
    """SQL: every GPU type a job holds with its count, ``a100=4,h100=8`` (sorted by type), from
    AllocTRES's ``gres/gpu:TYPE=N`` entries, or AllocGRES's ``gpu:TYPE:N`` items when the TRES
    names none; NULL when neither names a type. Slurm prints every type a job holds (a job on an
    H100 and an A100 node: ``gres/gpu:a100=1,gres/gpu:h100=1,gres/gpu=2``), and the ledger spreads
    a job's GPUs over its nodes by type with them (ledger/down.py)."""
    # Entries whose count is not whole are left out here: the "gpus" check refuses their row.
    typed = f"""list_filter(regexp_extract_all({tres_sql}, '(?:^|,)gres/gpu:([^=,]+=[^,]*)', 1),
                            lambda x: regexp_full_match(x, '[^=]+={_WHOLE}'))"""
    items = f"""list_filter(regexp_extract_all({gres_sql}, '(?:^|,)gpu:([^:,(]+:[^,(]*)', 1),
                            lambda x: regexp_full_match(x, '[^:]+:{_WHOLE}'))"""
    from_gres = f"list_transform({items}, lambda x: replace(x, ':', '='))"
    return f"""CASE WHEN contains({tres_sql}, 'gres/gpu:') THEN
                    nullif(array_to_string(list_sort({typed}), ','), '')
                WHEN {tres_sql} IS NULL AND {gres_sql} IS NOT NULL THEN
                    nullif(array_to_string(list_sort({from_gres}), ','), '')
           END"""


def bad_typed_sql(tres_sql: str) -> str:
    """SQL: a ``gres/gpu:TYPE=N`` entry whose count is not a whole number (the job's total may
    still read, but its split by type would be wrong)."""
    values = f"regexp_extract_all({tres_sql}, '(?:^|,)gres/gpu:[^=,]+=([^,]*)', 1)"
    # Only a TRES naming a typed entry has one to check: the CASE keeps the list work off the
    # others (most rows; 0.2 s of CPU at 1M jobs), where an AND in a projection would not.
    return f"""CASE WHEN contains({tres_sql}, 'gres/gpu:') THEN
                    coalesce(list_bool_or(list_transform({values},
                        lambda x: NOT regexp_full_match(x, '{_WHOLE}'))), false)
                ELSE false END"""


def gres_gpus_sql(gres_sql: str) -> str:
    """SQL: GPUs of an ``AllocGRES`` value (``gpu:4``, ``gpu:a100:4(IDX:0-3)``); NULL when a gpu
    item's count is not a whole number, 0 when no item is a GPU."""
    counts = rf"regexp_extract_all({gres_sql}, '(?:^|,)gpu(?::[^:,(]+)?:([^,(:]*)(?:\(|,|$)', 1)"
    return f"""CASE WHEN NOT regexp_matches({gres_sql}, '(?:^|,)gpu(?:[:,(]|$)') THEN 0
                    WHEN len({counts}) = 0 OR list_bool_or(list_transform({counts},
                        lambda x: NOT regexp_full_match(x, '{_WHOLE}'))) THEN NULL
                    ELSE list_sum(list_transform({counts}, lambda x: CAST(x AS BIGINT))) END"""


def start_sql(began_sql: str, ended_sql: str, elapsed_sql: str) -> str:
    """SQL: the start; with Start=Unknown but End and ElapsedRaw > 0 known, End - ElapsedRaw (sacct
    printed how long the job ran: dropping it would lose its GPU time). ElapsedRaw 0 is a job that
    never started (a pending job cancelled or past its deadline): it keeps no start."""
    return (
        f"coalesce({began_sql}, CASE WHEN {elapsed_sql} > 0 THEN {ended_sql} - {elapsed_sql} END)"
    )


def end_sql(began_sql: str, ended_sql: str, elapsed_sql: str, state_sql: str) -> str:
    """SQL: the end; a finished job with End=Unknown ended at Start + ElapsedRaw (not at the
    capture time, which would charge it every second since)."""
    finished = ", ".join(literal(s) for s in FINISHED_STATES)
    return f"""coalesce({ended_sql},
        CASE WHEN {state_sql} IN ({finished}) THEN {began_sql} + {elapsed_sql} END)"""


def one_range_sql(node_list_sql: str) -> str:
    """SQL: whether a node list is one name with one range (``n[05709-05724]``), the form Slurm
    prints for every job on consecutive nodes; its size and names need no list functions."""
    return rf"regexp_full_match({node_list_sql}, '[^,\[\]]*\[\d+-\d+\]')"


def range_low_sql(node_list_sql: str) -> str:
    """SQL: the low end of a ``one_range_sql`` list, as printed (``05709``)."""
    return f"split_part(split_part({node_list_sql}, '[', 2), '-', 1)"


def range_high_sql(node_list_sql: str) -> str:
    """SQL: the high end of a ``one_range_sql`` list, as printed (``05724``); the prefix may hold
    a ``-`` (``gpu-n[1-4]``), the range's own is the last one."""
    return f"rtrim(split_part({node_list_sql}, '-', -1), ']')"


def node_count_sql(node_list_sql: str) -> str:
    """SQL: ``hostlist_size`` of a node list, without its regular expressions for the list of one
    name most jobs have (no ``,``, ``[`` or ``]``), which names one node; NULL or '' names none. At 1M
    jobs the macro's per-row list work was a tenth of the direct load's CPU time. A list of one
    range counts as its high end less its low end plus one, as the macro counts it (DOUBLE, at
    least 0): at 1M jobs the two checks that count nodes took 0.44 s of CPU with the macro on
    those lists, 0.13 s without it."""
    multi_sql = " OR ".join(f"contains({node_list_sql}, {literal(c)})" for c in ",[]")
    low_sql = f"TRY_CAST({range_low_sql(node_list_sql)} AS DOUBLE)"
    high_sql = f"TRY_CAST({range_high_sql(node_list_sql)} AS DOUBLE)"
    return f"""(CASE WHEN {node_list_sql} IS NULL OR {node_list_sql} = '' THEN CAST(0 AS DOUBLE)
        WHEN NOT ({multi_sql}) THEN CAST(1 AS DOUBLE)
        WHEN {one_range_sql(node_list_sql)} THEN greatest(0.0, {high_sql} - {low_sql} + 1)
        ELSE hostlist_size({node_list_sql}) END)"""


def checks(gres_sql: str, *, has_nnodes: bool, max_nodes: int) -> list[tuple[str, str]]:
    """(code, condition) pairs over the typed columns, added to ``sacct.typed_select``'s own."""
    finished = ", ".join(literal(s) for s in FINISHED_STATES)
    found = [
        (f"{key}_range", f"{key}_s NOT BETWEEN {EARLIEST_S} AND {LATEST_S}")
        for key in ("submit", "start", "end")
    ]
    found += [
        ("gres", f"{gres_sql} IS NOT NULL AND gres_gpus IS NULL"),
        # Counted from the ranges, never expanded: n[0-9999999999] costs nothing to refuse.
        ("nodes_cap", f"{node_count_sql('node_list')} > {literal(max_nodes)}"),
        ("nodes_order", f"contains(node_list, '-') AND {descending_sql('node_list')}"),
        (
            "no_end",
            f"NOT is_step AND end_s IS NULL AND start_s IS NOT NULL AND state IN ({finished})",
        ),
        # Its GPU time would be counted by job but on no node: the ledger could not conserve.
        # Slurm names the nodes of every job that ran; a job that ran 0 seconds held nothing.
        (
            "no_nodes",
            "NOT coalesce(is_step, false) AND coalesce(node_list, '') = '' AND start_s IS NOT NULL "
            "AND coalesce(num_gpus, 0) > 0 AND NOT coalesce(end_s = start_s OR elapsed_s = 0, false)",
        ),
    ]
    if has_nnodes:
        found.append(
            (
                "nnodes_list",
                "num_nodes IS NOT NULL AND node_list IS NOT NULL AND NOT is_step "
                f"AND num_nodes <> {node_count_sql('node_list')} "
                # A job that ran 0 seconds held nothing: Slurm prints NNodes 0 for some of
                # them beside the node it was placed on; no GPU time depends on the count.
                "AND NOT coalesce(end_s = start_s OR elapsed_s = 0, false)",
            )
        )
    return found


def node_cap(con: duckdb.DuckDBPyConnection, inventory_nodes: int) -> int:
    """The most nodes one job's NodeList may name: the inventory (stored or being ingested), or
    the documented cap without one."""
    stored = con.execute("SELECT count(*) FROM nodes").fetchall()[0][0]
    known = max(int(stored), inventory_nodes)
    return known if known else MAX_HOSTLIST_NAMES


# The columns that make two records of one run the same record (everything but the line).
_DATA_COLUMNS = (
    "job_id, name, user_name, account, partition, qos, state_raw, exit_code, start_s, end_s, "
    "elapsed_s, num_gpus, gpu_types, num_nodes, node_list, comment, reason"
)
_KEY = "cluster, job_id_raw, coalesce(submit_s, start_s, -1)"


def conflicting_duplicates(
    con: duckdb.DuckDBPyConnection, rows_sql: str, *, limit: int = 20
) -> list[tuple[int, int]]:
    """(earlier line, later line) of records of the same run (cluster, JobIDRaw, Submit) that
    differ: which one is right cannot be known. Identical repeats (concatenated captures) are
    fine. ``rows_sql`` selects the records with a ``line`` column."""
    rows = con.execute(
        f"""SELECT min(line), max(line) FROM ({rows_sql})
            GROUP BY {_KEY} HAVING count(DISTINCT ({_DATA_COLUMNS})) > 1
            ORDER BY max(line) LIMIT {literal(limit)}"""
    ).fetchall()
    return [(int(a), int(b)) for a, b in rows]


def duplicate_error(path: object, pairs: list[tuple[int, int]]) -> ParseError:
    """The error for ``conflicting_duplicates``, naming the later line and the earlier one."""
    first, later = pairs[0]
    return ParseError(
        f"same JobIDRaw and Submit as line {first}, with different values "
        f"({len(pairs)} such run(s))",
        path=str(path),
        line=later,
        field="JobIDRaw",
        hint="the file mixes two captures that disagree; capture once with sacct -D and ingest it",
    )


def conflicting_lines(con: duckdb.DuckDBPyConnection, rows_sql: str) -> list[int]:
    """Every line of a run whose records disagree (lenient mode rejects them all)."""
    rows = con.execute(
        f"""SELECT line FROM ({rows_sql}) WHERE ({_KEY}) IN (
                SELECT ({_KEY}) FROM ({rows_sql})
                GROUP BY {_KEY} HAVING count(DISTINCT ({_DATA_COLUMNS})) > 1)
            ORDER BY line"""
    ).fetchall()
    return [int(r[0]) for r in rows]
