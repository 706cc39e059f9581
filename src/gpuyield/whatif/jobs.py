"""Jobs read back from the store with the run each belongs to, for the fit.

The run comes from the manifest's rule (``[runs] match``), applied in SQL as the ledger applies it
(``gpuyield.ledger.sql_pattern``); every value reaches SQL as a parameter. Pending jobs are kept
(they are arrivals the research queue had not served yet), which the ledger's clipped jobs are not.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

import duckdb

from gpuyield.ledger import sql_pattern
from gpuyield.manifest import Manifest
from gpuyield.sqltext import identifier


@dataclass(frozen=True, kw_only=True, slots=True)
class JobRow:
    """One sacct row (one run of a job) of a release-lineage run."""

    job_id: str
    submit_s: int
    start_s: int | None
    #: None while the job still runs at the capture.
    end_s: int | None
    state: str
    #: ``CANCELLED by 0`` and the like: who cancelled.
    state_raw: str
    num_gpus: int
    nodes: tuple[str, ...]


def jobs_table(con: duckdb.DuckDBPyConnection, manifest: Manifest) -> str:
    """A temporary table of the store's jobs (the columns the fit reads) with ``run``,
    ``lineage`` and ``diverged``; its name."""
    name = f"gy_whatif_jobs_{uuid.uuid4().hex[:12]}"
    column = "comment" if manifest.match.field == "comment" else "name"
    lineage = sorted(manifest.lineage_runs)
    diverged = sorted(d.run for d in manifest.diverged)
    con.execute(
        f"""CREATE TEMP TABLE {identifier(name)} AS
        WITH runs AS (
            SELECT job_key, job_id_raw, submit_s, start_s, end_s, state,
                   coalesce(state_raw, state) AS state_raw, num_gpus,
                   nullif(regexp_extract({column}, ?, ?), '') AS run
            FROM jobs)
        SELECT *, coalesce(list_contains(?::VARCHAR[], run), false) AS lineage,
               coalesce(list_contains(?::VARCHAR[], run), false) AS diverged
        FROM runs""",
        [sql_pattern(manifest.match.pattern), int(manifest.match.group), lineage, diverged],
    )
    return name


def lineage_rows(
    con: duckdb.DuckDBPyConnection, view: str, start_s: int, end_s: int
) -> dict[str, list[JobRow]]:
    """Rows of each lineage run that overlap the window, in submit order."""
    rows = con.execute(
        f"""SELECT v.run, v.job_id_raw, v.submit_s, v.start_s, v.end_s, v.state, v.state_raw,
                   coalesce(v.num_gpus, 0),
                   list(n.node ORDER BY n.node)
            FROM {identifier(view)} v LEFT JOIN job_nodes n USING (job_key)
            WHERE v.lineage AND v.submit_s < ? AND coalesce(v.end_s, ?) >= ?
            GROUP BY ALL ORDER BY v.run, v.submit_s, v.job_id_raw""",
        [end_s, end_s, start_s],
    ).fetchall()
    runs: dict[str, list[JobRow]] = {}
    for run, job_id, submit, start, end, state, raw, gpus, nodes in rows:
        runs.setdefault(run, []).append(
            JobRow(
                job_id=job_id,
                submit_s=submit,
                start_s=start,
                end_s=end,
                state=state,
                state_raw=raw,
                num_gpus=int(gpus),
                nodes=tuple(n for n in nodes if n is not None),
            )
        )
    return runs


def unused_nodes(con: duckdb.DuckDBPyConnection, view: str, start_s: int, end_s: int) -> int:
    """Inventory nodes on which no job ran in the window: in the ledger they sat idle (or down)
    throughout, as a run's unused hot spares do."""
    row = con.execute(
        f"""SELECT count(*) FROM nodes WHERE node NOT IN (
                SELECT n.node FROM {identifier(view)} v JOIN job_nodes n USING (job_key)
                WHERE v.start_s IS NOT NULL AND v.start_s < ? AND coalesce(v.end_s, ?) > ?)""",
        [end_s, end_s, start_s],
    ).fetchone()
    return int(row[0]) if row else 0


def telemetry_of(con: duckdb.DuckDBPyConnection, run: str) -> list[tuple[str, float, float | None]]:
    """(event, t_s, duration_s) of a run's telemetry, in time order."""
    return [
        (event, float(t), None if duration is None else float(duration))
        for event, t, duration in con.execute(
            """SELECT event, t_s, duration_s FROM telemetry
               WHERE run = ? AND t_s IS NOT NULL ORDER BY t_s""",
            [run],
        ).fetchall()
    ]
