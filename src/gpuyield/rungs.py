"""Which family each job belongs to, the completed rungs table, and the submit-time ladder check.

``preflight`` runs inside a Slurm ``job_submit`` hook or a prolog, so it must answer in well under a
second on a store of ten million jobs. Finding families means a regex over every job's comment and
run name (about a second at 10M jobs), so each ingest writes the small table ``ladder_completed``:
one row per COMPLETED job of a family (family, run, GPUs, end). ``meta`` records which ingest it
was built from; a store ingested since (or written by an older gpuyield) is answered from the jobs
directly, slower but never stale.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from gpuyield.errors import EmptyDataError
from gpuyield.families import COMMENT_FAMILY_PATTERN, any_pattern, first_match
from gpuyield.ladder_verdict import Evidence, PreflightResult
from gpuyield.manifest import SOURCE as MANIFEST_SOURCE
from gpuyield.manifest import Manifest, stored_manifest
from gpuyield.sqltext import literal
from gpuyield.store import StoreRef, reading

if TYPE_CHECKING:
    import duckdb

SUMMARY_TABLE = "ladder_completed"
FAMILIES_TABLE = "ladder_families"  # every family some job names, and how many jobs it has
_META_KEY = "ladder_completed_from"
# Ingests that change the jobs or the manifest, which the summary table is derived from.
_SUMMARY_SOURCES = ("slurm.sacct", MANIFEST_SOURCE)


def family_jobs_sql(manifest: Manifest) -> str:
    """SELECT of every started GPU job with a family: job_key, run, family, num_gpus, state, times.

    A job without a run name is a run of its own (``job:<id>``). A run's family is the ``family=``
    some job of it carries in its comment, else the first ``[[families]]`` pattern its name matches.
    """
    match = manifest.match
    column = "comment" if match.field == "comment" else "name"
    cases_sql = " ".join(
        f"WHEN regexp_matches(t.run, {literal(p)}) THEN {literal(f.name)}"
        for f in manifest.families
        for p in f.patterns
    )
    # One alternation first (RE2 runs it as one automaton): most runs are in no family, and for
    # them the per-family patterns never run.
    either = any_pattern(manifest.families)
    by_pattern_sql = (
        f"CASE WHEN regexp_matches(t.run, {literal(either)}) THEN CASE {cases_sql} END END"
        if cases_sql
        else "NULL::VARCHAR"
    )
    # The family= key is rare: the regex runs only where the text is there. The run-level family
    # is a GROUP BY over those few rows joined back, not a window over every job (10M jobs:
    # the window alone took two thirds of the time).
    return f"""
        WITH tagged AS (
            SELECT job_key, job_id, state, num_gpus, start_s, end_s,
                coalesce(nullif(regexp_extract({column}, {literal(match.pattern)}, {literal(match.group)}),
                         ''), 'job:' || job_id_raw) AS run,
                CASE WHEN contains(comment, 'family=') THEN nullif(regexp_extract(
                    comment, {literal(COMMENT_FAMILY_PATTERN)}, 1), '') END AS own_family
            FROM jobs WHERE start_s IS NOT NULL AND num_gpus > 0
        ), own AS (
            SELECT run AS own_run, max(own_family) AS own_run_family FROM tagged
            WHERE own_family IS NOT NULL GROUP BY run
        ), named AS (
            SELECT t.*, coalesce(o.own_run_family, {by_pattern_sql}) AS family
            FROM tagged t LEFT JOIN own o ON o.own_run = t.run
        )
        SELECT job_key, job_id, run, family, num_gpus, state, start_s, end_s
        FROM named WHERE family IS NOT NULL
    """


def _completed_sql(manifest: Manifest) -> str:
    return f"""
        SELECT family, run, num_gpus AS gpus, end_s
        FROM ({family_jobs_sql(manifest)})
        WHERE state = 'COMPLETED' AND end_s IS NOT NULL
    """


# Bumped whenever the summary tables change shape: a store built by another version is then
# answered from the jobs until its next ingest rebuilds them.
_SUMMARY_FORMAT = 2


def _fingerprint(con: duckdb.DuckDBPyConnection) -> str:
    row = con.execute(
        "SELECT max(ingest_id) FROM ingests WHERE source IN (SELECT unnest(?))",
        [list(_SUMMARY_SOURCES)],
    ).fetchone()
    return f"{_SUMMARY_FORMAT}:{row[0] if row else None}"


def refresh_summary(con: duckdb.DuckDBPyConnection) -> None:
    """Rebuild the summary tables from the jobs under the stored manifest (inside an ingest),
    unless neither has changed since they were built."""
    manifest = stored_manifest(con)
    if manifest.ladder is None:
        con.execute(f"DROP TABLE IF EXISTS {SUMMARY_TABLE}")
        con.execute(f"DROP TABLE IF EXISTS {FAMILIES_TABLE}")
        con.execute("DELETE FROM meta WHERE key = ?", [_META_KEY])
        return
    if summary_is_current(con):
        return  # no jobs and no manifest since it was built (events, nodes or telemetry only)
    con.execute(f"CREATE OR REPLACE TEMP TABLE gy_ladder_jobs AS {family_jobs_sql(manifest)}")
    # Sorted by family so that a lookup of one family reads few row groups.
    con.execute(
        f"""CREATE OR REPLACE TABLE {SUMMARY_TABLE} AS
            SELECT family, run, num_gpus AS gpus, end_s FROM gy_ladder_jobs
            WHERE state = 'COMPLETED' AND end_s IS NOT NULL ORDER BY family, end_s"""
    )
    con.execute(
        f"""CREATE OR REPLACE TABLE {FAMILIES_TABLE} AS
            SELECT family, count(*) AS jobs FROM gy_ladder_jobs GROUP BY family ORDER BY family"""
    )
    con.execute("DROP TABLE gy_ladder_jobs")
    con.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", [_META_KEY, _fingerprint(con)])


def summary_is_current(con: duckdb.DuckDBPyConnection) -> bool:
    """True when the summary tables were built, in this format, from the latest jobs and manifest."""
    rows = con.execute("SELECT value FROM meta WHERE key = ?", [_META_KEY]).fetchall()
    return bool(rows) and rows[0][0] == _fingerprint(con)


def family_of_run(con: duckdb.DuckDBPyConnection, run: str) -> str | None:
    """The family the stored manifest's ``[[families]]`` patterns give a run name (or None)."""
    manifest = _ladder_manifest(con)
    owners = [f.name for f in manifest.families for _ in f.patterns]
    index = first_match([p for f in manifest.families for p in f.patterns], run, con=con)
    return None if index is None else owners[index]


def _ladder_manifest(con: duckdb.DuckDBPyConnection) -> Manifest:
    manifest = stored_manifest(con)
    if manifest.ladder is None:
        raise EmptyDataError(
            "the stored manifest declares no [ladder] and no [[families]]",
            hint="add them to the manifest (docs/ladder.md) and ingest it: "
            "gpuyield ingest slurm --manifest FILE --db DB",
        )
    return manifest


def preflight(db: StoreRef, *, family: str, gpus: int, at_s: int | None = None) -> PreflightResult:
    """Check a launch against the ladder of the stored manifest (read-only); ``db`` is the
    store's path or an open connection to it."""
    with reading(db) as con:
        return _preflight(con, family=family, gpus=gpus, at_s=at_s)


def _preflight(
    con: duckdb.DuckDBPyConnection, *, family: str, gpus: int, at_s: int | None
) -> PreflightResult:
    started = time.perf_counter()
    manifest = _ladder_manifest(con)
    policy = manifest.ladder
    assert policy is not None  # _ladder_manifest checked it
    at = int(time.time()) if at_s is None else at_s
    current = summary_is_current(con)
    source = SUMMARY_TABLE if current else f"({_completed_sql(manifest)})"
    rows = con.execute(
        f"""SELECT run, gpus, end_s FROM {source}
            WHERE family = ? AND end_s <= ? AND end_s >= ?
            ORDER BY gpus DESC, end_s DESC, run LIMIT 1""",
        [family, at, at - policy.within_s],
    ).fetchall()
    evidence = Evidence(run=rows[0][0], gpus=rows[0][1], end_s=rows[0][2]) if rows else None
    known = evidence is not None or any(f.name == family for f in manifest.families)
    if not known:
        named = FAMILIES_TABLE if current else f"({family_jobs_sql(manifest)})"
        known = bool(
            con.execute(f"SELECT 1 FROM {named} WHERE family = ? LIMIT 1", [family]).fetchall()
        )
    return PreflightResult(
        family=family,
        gpus=gpus,
        at_s=at,
        policy=policy,
        required_gpus=policy.required_gpus(gpus),
        evidence=evidence,
        from_summary=current,
        known_family=known,
        elapsed_s=time.perf_counter() - started,
    )
