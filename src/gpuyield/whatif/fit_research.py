"""The research workload: size classes, arrivals, durations, time limits, end states.

Every job outside the release lineage is research. A job (one ``JobIDRaw``, all its reruns) is
counted once: it arrived at its first submit, and its end state is its last row's (a requeued
job's ``REQUEUED`` row is a rerun unless maintenance drained its node at that instant). Sizes are
put in the classes the simulator can lay out: a divisor of the node's GPUs, or whole nodes.

End states are shares of the jobs that started early enough to have surely ended (two time
limits before the window end), so long outcomes are not under-counted; durations are fitted with
the truncation the window imposes (``durations.py``).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

import duckdb
import numpy as np

from gpuyield.ledger import Window
from gpuyield.sqltext import identifier
from gpuyield.whatif.durations import fit_lognormal
from gpuyield.whatif.params import Parameter, Status, fitted, stated, too_few
from gpuyield.whatif.stats import (
    log_normal_estimate,
    poisson_rate,
    proportion,
)

#: The simulator's research end states, and the Slurm state each ends in.
END_STATES = {
    "completed": "COMPLETED",
    "failed": "FAILED",
    "preempted": "PREEMPTED",
    "requeued": "REQUEUED",
    "timeout": "TIMEOUT",
    "oom": "OUT_OF_MEMORY",
    "cancelled": "CANCELLED",
}
#: At most this many completed jobs per class enter the duration fit (a fixed sample by job id).
DURATION_SAMPLE = 20_000
#: A class needs this many completed jobs to fit its durations.
MIN_DURATIONS = 10


def size_class(gpus: int, gpus_per_node: int) -> int:
    """The class a job of ``gpus`` GPUs runs in: the smallest divisor of a node's GPUs that holds
    it, or whole nodes."""
    if gpus <= gpus_per_node:
        return next(d for d in range(max(gpus, 1), gpus_per_node + 1) if gpus_per_node % d == 0)
    return -(-gpus // gpus_per_node) * gpus_per_node


def research_table(con: duckdb.DuckDBPyConnection, jobs: str, gpus_per_node: int) -> str:
    """One row per research job (all its reruns): arrival, first start, last row, class."""
    name = f"gy_whatif_research_{uuid.uuid4().hex[:12]}"
    name_sql, jobs_sql = identifier(name), identifier(jobs)
    # Each size's class, worked out once per distinct size and looked up in the query (an UPDATE
    # per size rewrote the table once per size: minutes on 10M jobs).
    sizes = [
        int(g)
        for (g,) in con.execute(
            f"SELECT DISTINCT coalesce(num_gpus, 0) FROM {jobs_sql} WHERE NOT lineage"
        ).fetchall()
    ]
    con.execute(
        f"""CREATE TEMP TABLE {name_sql} AS
        WITH drained AS (
            SELECT DISTINCT j.job_key FROM {jobs_sql} j
            JOIN job_nodes n USING (job_key)
            JOIN node_events e ON e.node = n.node AND e.planned AND e.start_s = j.end_s
            WHERE j.state = 'REQUEUED' AND NOT j.lineage),
        per_job AS (
            SELECT job_id_raw,
                   min(submit_s) AS first_submit_s,
                   min(start_s) AS first_start_s,
                   arg_max(state, submit_s) AS last_state,
                   arg_max(start_s, submit_s) AS last_start_s,
                   arg_max(end_s, submit_s) AS last_end_s,
                   max(coalesce(num_gpus, 0)) AS gpus,
                   bool_or(diverged) AS diverged,
                   bool_or(state = 'REQUEUED' AND job_key NOT IN (SELECT job_key FROM drained))
                       AS requeued
            FROM {jobs_sql} WHERE NOT lineage GROUP BY job_id_raw)
        SELECT *, (?::BIGINT[])[list_position(?::BIGINT[], gpus)] AS cls FROM per_job""",
        [[size_class(g, gpus_per_node) for g in sizes], sizes],
    )
    return name


def arrival_parameters(
    con: duckdb.DuckDBPyConnection, table: str, window: Window
) -> list[Parameter]:
    """Jobs arriving per day in each class (a Poisson count over the window)."""
    start_s, end_s = window.start_s, window.end_s
    days = (end_s - start_s) / 86400
    rows = con.execute(
        f"""SELECT cls, count(*) FROM {identifier(table)}
            WHERE first_submit_s >= ? AND first_submit_s < ? AND cls > 0
            GROUP BY cls ORDER BY cls""",
        [start_s, end_s],
    ).fetchall()
    return [
        fitted(
            f"research.arrivals.{cls}",
            poisson_rate(int(count), days),
            unit="jobs per day",
            events=int(count),
            evidence=f"{count:,} jobs of {cls} GPUs first submitted in {days:,.1f} days",
        )
        for cls, count in rows
    ]


def limit_parameter(
    con: duckdb.DuckDBPyConnection, table: str, cls: int, window_s: int
) -> Parameter:
    """A class's time limit: the median run of its TIMEOUT jobs (Slurm stops them at it).

    Without a TIMEOUT job the limit did not show in the window: it is taken as the window's
    length (or the longest run seen, if longer), so that no duration the window could show is
    cut short; the longest run itself would cut the long tail of a class with few jobs.
    """
    timeouts, longest = con.execute(
        f"""SELECT median(last_end_s - last_start_s) FILTER (WHERE last_state = 'TIMEOUT'),
                   max(last_end_s - last_start_s)
            FROM {identifier(table)} WHERE cls = ? AND last_end_s IS NOT NULL""",
        [cls],
    ).fetchone() or (None, None)
    key = f"research.classes.{cls}.time_limit_s"
    if timeouts is not None:
        return stated(
            key,
            float(timeouts),
            unit="s",
            status=Status.FITTED,
            evidence="median run of the class's TIMEOUT jobs",
        )
    return stated(
        key,
        float(max(longest or 0, window_s)),
        unit="s",
        status=Status.ASSUMED,
        evidence="no TIMEOUT job: the window's length (no run the window shows is cut short)",
    )


def duration_parameters(
    con: duckdb.DuckDBPyConnection, table: str, cls: int, end_s: int, limit_s: float
) -> list[Parameter]:
    """Median and sigma of the class's full durations, from its completed jobs."""
    rows = con.execute(
        f"""SELECT last_end_s - last_start_s, ? - last_start_s FROM {identifier(table)}
            WHERE cls = ? AND last_state = 'COMPLETED' AND last_start_s IS NOT NULL
            ORDER BY hash(job_id_raw) LIMIT ?""",
        [end_s, cls, DURATION_SAMPLE],
    ).fetchall()
    array = np.array(rows, dtype=float).reshape(-1, 2)
    fit = fit_lognormal(array[:, 0], array[:, 1], limit_s, min_n=MIN_DURATIONS)
    key = f"research.classes.{cls}"
    if fit is None:
        median = float(np.median(array[:, 0])) if len(array) else 3600.0
        evidence = f"{len(array)} completed jobs: {MIN_DURATIONS} needed to fit their durations"
        return [
            too_few(
                f"{key}.median_duration_s", median, unit="s", events=len(array), evidence=evidence
            ),
            too_few(f"{key}.duration_sigma", 1.0, unit="", events=len(array), evidence=evidence),
        ]
    n = fit.n
    evidence = (
        f"log-normal fit to {n:,} completed jobs (truncated by the window end, clipped at the "
        "limit)"
    )
    sigma = log_normal_estimate(fit.sigma, fit.se_log_sigma)
    return [
        fitted(
            f"{key}.median_duration_s",
            log_normal_estimate(fit.median_s, fit.se_mu),
            unit="s",
            events=n,
            evidence=evidence,
            needs=MIN_DURATIONS,
        ),
        fitted(
            f"{key}.duration_sigma",
            sigma,
            unit="",
            events=n,
            evidence=evidence,
            needs=MIN_DURATIONS,
        ),
    ]


@dataclass(frozen=True, kw_only=True, slots=True)
class EndStates:
    """The end-state and divergence shares, and the jobs left out of them."""

    params: list[Parameter]
    unsettled: int
    """Jobs too recent (or unfinished) to show their end state."""


def end_state_parameters(
    con: duckdb.DuckDBPyConnection, table: str, window: Window, limits: dict[int, float]
) -> EndStates:
    """Shares of each end state and of diverged runs over the settled jobs (first submitted in
    the window, first started two time limits before its end); also how many jobs were left out."""
    counts = _outcome_counts(con, table, window, limits)
    settled = sum(v for k, v in counts.items() if k != "unsettled")
    diverged = counts.get("diverged", 0)
    plain = settled - diverged
    where = f"of {plain:,} settled jobs not diverged"
    params = [
        fitted(
            f"research.end_states.{state}",
            proportion(counts.get(state, 0), plain),
            unit="share",
            events=counts.get(state, 0),
            evidence=f"{counts.get(state, 0):,} ended {slurm} {where}",
        )
        for state, slurm in END_STATES.items()
    ]
    params.append(
        fitted(
            "research.diverged_share",
            proportion(diverged, settled),
            unit="share",
            events=diverged,
            evidence=f"{diverged:,} jobs of runs the manifest lists as diverged, of {settled:,}",
        )
    )
    return EndStates(params=params, unsettled=counts.get("unsettled", 0))


def _outcome_counts(
    con: duckdb.DuckDBPyConnection, table: str, window: Window, limits: dict[int, float]
) -> dict[str, int]:
    start_s, end_s = window.start_s, window.end_s
    table_sql, cutoffs_sql = identifier(table), identifier(f"{table}_cutoffs")
    con.execute(f"CREATE OR REPLACE TEMP TABLE {cutoffs_sql} (cls BIGINT, cutoff_s BIGINT)")
    con.executemany(
        f"INSERT INTO {cutoffs_sql} VALUES (?, ?)",
        [[cls, int(end_s - 2 * limit)] for cls, limit in limits.items()],
    )
    rows = con.execute(
        f"""SELECT CASE
                WHEN r.first_start_s IS NULL OR r.first_start_s > c.cutoff_s THEN 'unsettled'
                WHEN r.diverged THEN 'diverged'
                WHEN r.requeued AND r.last_state = 'COMPLETED' THEN 'requeued'
                WHEN r.last_state IN ?::VARCHAR[] THEN r.last_state
                ELSE 'unsettled' END AS outcome,
                count(*)
            FROM {table_sql} r JOIN {cutoffs_sql} c USING (cls)
            WHERE r.first_submit_s >= ? GROUP BY ALL""",
        [[s for k, s in END_STATES.items() if k != "requeued"], start_s],
    ).fetchall()
    by_state = {slurm: state for state, slurm in END_STATES.items() if state != "requeued"}
    return {by_state.get(outcome, outcome): int(count) for outcome, count in rows}


def ran_on(con: duckdb.DuckDBPyConnection, jobs: str, nodes: list[str]) -> bool:
    """True when a research job ran on one of ``nodes`` (the lineage runs' nodes)."""
    if not nodes:
        return False
    found = con.execute(
        f"""SELECT count(*) FROM {identifier(jobs)} j JOIN job_nodes n USING (job_key)
            WHERE NOT j.lineage AND list_contains(?::VARCHAR[], n.node)""",
        [nodes],
    ).fetchone()
    return bool(found and found[0])
