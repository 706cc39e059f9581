"""Running jobs between captures: an unchanged capture taken later, and run tags Slurm keeps live.

**An unchanged capture taken later.** A running job's sacct row has no end; the ledger holds its
GPUs until the capture time of the ingest that stored the row (``ingests.as_of_s``). A collection
whose sacct output is byte for byte the one before (no job started, ended or changed state: collect
leaves out ``ElapsedRaw`` for that reason) must not be skipped as "seen" while its coverage moves
on, or every running job would stop at the earlier capture and its time would read as idle. Such a
capture is *carried forward* instead: a new ``ingests`` row for the same content at the new capture
time, and the rows of the earlier ingest (same content, so the same lines) re-pointed to it, in the
ingest's transaction with the coverage. Nothing is re-read; nothing is added. A capture whose time
does not move (the same file ingested again) stays a no-op.

**Run tags of running jobs.** Slurm's accounting stores a job's ``Comment`` when the job ends:
while it runs, sacct prints it empty, so a released run would read as an experiment until its end.
The controller knows the comment all along: ``scontrol -d -o show job`` prints it, as it stands
now (``scontrol update job ... Comment=`` changes it), and ``ingest/jobs_detail.py`` keeps the
latest one per run in ``job_comments``. A running job's row takes that comment (run and family tags
alike); once the job has ended, sacct's row replaces it and sacct's comment is final, so a tag that
changed or was wrong while the job ran is corrected, and the run is one row, counted once.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import duckdb

from gpuyield import store
from gpuyield.ingest import sacct as sacct_mod
from gpuyield.ingest.source import Content, IngestOutcome, register


def carried(
    con: duckdb.DuckDBPyConnection,
    results: Sequence[IngestOutcome],
    scanned: Mapping[str, Content],
    as_of_s: int | None,
    options: str,
) -> list[IngestOutcome]:
    """``results`` with a skipped (unchanged) sacct capture carried forward to ``as_of_s``
    (``scanned``: the ingest's inputs by kind; ``options``: the ingest's, as registered)."""
    out = list(results)
    info = scanned.get("sacct")
    if info is None or as_of_s is None:
        return out
    for i, result in enumerate(out):
        if result.source == sacct_mod.SOURCE and result.skipped:
            moved = carry_forward(con, result, info, as_of_s=as_of_s, options=options)
            out[i] = moved if moved is not None else result
    return out


def carry_forward(
    con: duckdb.DuckDBPyConnection,
    seen: IngestOutcome,
    info: Content,
    *,
    as_of_s: int,
    options: str,
) -> IngestOutcome | None:
    """Record an unchanged sacct capture (``seen`` names its earlier ingest) as taken at
    ``as_of_s``, moving its job rows to the new ingest; None when the capture time does not move
    (then the file is a plain no-op)."""
    rows = con.execute(
        "SELECT as_of_s, rows_read, rows_rejected, rows_skipped FROM ingests WHERE ingest_id = ?",
        [seen.ingest_id],
    ).fetchall()
    if not rows:
        return None
    before_s, read, rejected, skipped = rows[0]
    if before_s is not None and as_of_s <= int(before_s):
        return None
    ingest_id = store.next_ingest_id(con)
    # The same content: each row's line is the same line of the new capture.
    con.execute("UPDATE jobs SET ingest_id = ? WHERE ingest_id = ?", [ingest_id, seen.ingest_id])
    return register(
        con,
        sacct_mod.SOURCE,
        info,
        ingest_id,
        as_of_s,
        options,
        read=int(read or 0),
        rejected=int(rejected or 0),
        skipped=int(skipped or 0),
    )


def apply_live_comments(con: duckdb.DuckDBPyConnection) -> int:
    """Give running jobs the latest comment ``scontrol`` printed for the same run (cluster,
    JobIDRaw, start); returns how many rows changed."""
    row = con.execute(
        """WITH live AS (
               SELECT j.job_key, c.comment FROM jobs j JOIN job_comments c
               ON j.cluster = c.cluster AND j.job_id_raw = c.job_id_raw AND j.start_s = c.start_s
               WHERE j.end_s IS NULL AND c.comment <> ''
                 AND c.comment IS DISTINCT FROM j.comment)
           UPDATE jobs SET comment = live.comment FROM live WHERE jobs.job_key = live.job_key
           RETURNING jobs.job_key"""
    ).fetchall()
    return len(row)
