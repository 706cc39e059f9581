"""Waiting jobs: their GPU count is what they asked for (ReqTRES), and only theirs comes from there."""

from __future__ import annotations

from pathlib import Path

import duckdb

from gpuyield.ingest.slurm import SlurmInputs, ingest_slurm
from gpuyield.ledger import backend_for
from gpuyield.ledger.now import waiting_at

HEADER = "JobIDRaw|State|Submit|Start|End|AllocTRES|ReqTRES|NodeList|NNodes\n"
ROWS = (
    # Waiting: AllocTRES empty, asks for 4 GPUs.
    "1|PENDING|2026-11-30T10:00:00|Unknown|Unknown||cpu=8,gres/gpu=4,node=1|None assigned|1\n"
    # Running: the allocation counts, not the request.
    "2|RUNNING|2026-11-30T10:00:00|2026-11-30T10:01:00|Unknown|cpu=8,gres/gpu=2,node=1|cpu=8,gres/gpu=8,node=1|n1|1\n"
    # Cancelled while waiting: never held anything, no longer waits after its end.
    "3|CANCELLED by 0|2026-11-30T10:00:00|None|2026-11-30T10:05:00||gres/gpu=8|None assigned|1\n"
    # Waiting for no GPU at all.
    "4|PENDING|2026-11-30T10:02:00|Unknown|Unknown||cpu=1,node=1|None assigned|1\n"
)


def test_pending_jobs_take_their_gpus_from_reqtres(
    fresh_db: duckdb.DuckDBPyConnection, tmp_path: Path
) -> None:
    sacct = tmp_path / "sacct.psv"
    sacct.write_text(HEADER + ROWS)
    ingest_slurm(None, SlurmInputs(sacct=sacct), con=fresh_db, until_s=1796036400)
    gpus = dict(fresh_db.execute("SELECT job_id_raw, num_gpus FROM jobs").fetchall())
    assert gpus == {"1": 4, "2": 2, "3": None, "4": 0}
    waiting = waiting_at(backend_for(fresh_db), 1796036400)
    assert (waiting.jobs, waiting.gpus) == (2, 4)
