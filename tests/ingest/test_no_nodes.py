"""A job that ran on GPUs but names no node is refused at ingest: by job its GPU time would count,
by node it could not, and the report would not conserve (found by
tests/hostile/test_properties.py's mixed inputs: an empty NodeList beside NNodes 1)."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuyield import store
from gpuyield.errors import ParseError
from gpuyield.ingest.slurm import SlurmInputs, ingest_slurm
from gpuyield.ledger.ledger import backend_for, compute_ledger
from tests.conftest import SAMPLE

HEADER = "JobID|JobIDRaw|JobName|User|Account|Partition|State|Submit|Start|End|ElapsedRaw|AllocTRES|NodeList|NNodes|Comment"
TRES = "billing=8,cpu=8,gres/gpu=8,node=1"


def _sacct(tmp_path: Path, first_nodes: str, first_elapsed: int = 600, first_id: str = "1") -> Path:
    end = "2026-11-30T10:10:00" if first_elapsed else "2026-11-30T10:00:00"
    rows = [
        f"{first_id}|1|train|alice|ml|gpu|COMPLETED|2026-11-30T10:00:00|2026-11-30T10:00:00|{end}|"
        f"{first_elapsed}|{TRES}|{first_nodes}|1|run=a",
        f"2|2|probe|bob|ml|gpu|FAILED|2026-11-30T10:05:00|2026-11-30T10:05:00|"
        f"2026-11-30T10:15:00|600|{TRES}|n2|1|run=b",
    ]
    path = tmp_path / "sacct.psv"
    path.write_text("\n".join([HEADER, *rows]) + "\n")
    return path


def _inputs(sacct: Path) -> SlurmInputs:
    return SlurmInputs(sacct=sacct, nodes=SAMPLE / "scontrol-show-nodes-oneliner.txt")


@pytest.mark.parametrize(("nodes", "job_id"), [("", "1"), ("None assigned", "1"), ("", "")])
def test_a_job_that_ran_on_gpus_without_nodes_is_refused(
    tmp_path: Path, nodes: str, job_id: str
) -> None:
    db = tmp_path / "s.duckdb"
    with pytest.raises(ParseError, match="held GPUs for a while names no node") as refused:
        ingest_slurm(db, _inputs(_sacct(tmp_path, nodes, first_id=job_id)))
    assert refused.value.path is not None and Path(refused.value.path).name == "sacct.psv"
    assert refused.value.line == 2 and refused.value.field == "NodeList"


def test_lenient_skips_it_and_the_ledger_conserves(tmp_path: Path) -> None:
    db = tmp_path / "s.duckdb"
    ingest_slurm(db, _inputs(_sacct(tmp_path, "")), lenient=True)
    con = store.connect(db, read_only=True)
    try:
        ledger = compute_ledger(backend_for(con))
        jobs = con.execute("SELECT job_id FROM jobs ORDER BY job_id").fetchall()
    finally:
        con.close()
    assert jobs == [("2",)]
    assert sum(ledger.categories.values()) == pytest.approx(ledger.installed_gpu_seconds)


def test_a_job_that_never_ran_needs_no_node(tmp_path: Path) -> None:
    db = tmp_path / "s.duckdb"
    ingest_slurm(db, _inputs(_sacct(tmp_path, "None assigned", first_elapsed=0)))
    con = store.connect(db, read_only=True)
    try:
        assert con.execute("SELECT count(*) FROM jobs").fetchall() == [(2,)]
    finally:
        con.close()
