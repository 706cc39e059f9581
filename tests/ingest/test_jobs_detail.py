"""``scontrol -d show job`` captures: which GPU indices running jobs held (ingest/jobs_detail.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from gpuyield.errors import ParseError
from gpuyield.ingest.jobs_detail import read_jobs_detail
from gpuyield.ingest.slurm import SlurmInputs, ingest_slurm
from gpuyield.store import connect
from tests.ingest.held_oracle import FIXTURE, held

RUNNING = FIXTURE / "scontrol-d-o-show-job.txt"


def _rows(path: Path) -> set[tuple[str, int, str, int, int]]:
    stage = read_jobs_detail(path, tz="UTC", lenient=False, cluster="lab")
    return {
        (r["job_id_raw"], r["start_s"], r["node"], r["gpu"], r["seen_s"])
        for r in stage.gpus.to_pylist()
    }


def _stored(db: Path) -> set[tuple[str, str, int, str, int, int, int]]:
    con = connect(db, read_only=True)
    try:
        rows = con.execute(
            "SELECT cluster, job_id_raw, start_s, node, gpu, first_seen_s, last_seen_s "
            "FROM job_gpus"
        ).fetchall()
    finally:
        con.close()
    return set(rows)


def test_the_recording_parses_to_the_indices_slurm_printed() -> None:
    expected = held(RUNNING)
    assert _rows(RUNNING) == expected
    # Three jobs share n1, one job spans n2 and n3, the exclusive job holds all of n4.
    assert {(job, node) for job, _, node, _, _ in expected} >= {("1", "n1"), ("4", "n3")}
    stage = read_jobs_detail(RUNNING, tz="UTC", lenient=False, cluster="lab")
    assert stage.rows_read == len(RUNNING.read_text().splitlines())
    # The finished job (5) and the pending one (7) name no GPU: counted as skipped.
    assert stage.rows_skipped == stage.rows_read - len({r[0] for r in expected})


def test_the_multi_line_form_reads_the_same() -> None:
    assert _rows(FIXTURE / "scontrol-d-show-job.txt") == _rows(RUNNING)


def test_finished_jobs_name_no_gpu() -> None:
    after = FIXTURE / "scontrol-d-o-show-job-after.txt"
    stage = read_jobs_detail(after, tz="UTC", lenient=False, cluster="lab")
    assert stage.gpus.num_rows == 0 and stage.rows_skipped == stage.rows_read > 0


def test_without_detail_the_error_asks_for_d() -> None:
    plain = FIXTURE / "scontrol-o-show-job.txt"
    with pytest.raises(ParseError) as info:
        read_jobs_detail(plain, tz="UTC", lenient=False, cluster="lab")
    assert (info.value.path, info.value.line, info.value.field) == (str(plain), 1, "Nodes")
    assert "-d" in (info.value.hint or "")


def _corrupt(tmp_path: Path, line: int, old: str, new: str) -> Path:
    lines = RUNNING.read_text().splitlines(keepends=True)
    assert old in lines[line - 1]
    lines[line - 1] = lines[line - 1].replace(old, new, 1)
    path = tmp_path / "jobs-detail.txt"
    path.write_text("".join(lines))
    return path


@pytest.mark.parametrize(
    ("line", "old", "new", "field"),
    [
        (2, "GRES=gpu:2(IDX:2-3)", "GRES=gpu:2(IDX:2-x)", "GRES"),
        (3, "GRES=gpu:4(IDX:4-7)", "GRES=gpu:4(IDX:7-4)", "GRES"),
        (4, "StartTime=2026-12-01T22:39:04", "StartTime=yesterday", "StartTime"),
        (6, "RunTime=00:00:11", "RunTime=eleven", "RunTime"),
        (1, "JobId=1 ", "JobId=1x ", "JobId"),
        (4, "Nodes=n[2-3] ", "Nodes=n[3-2] ", "Nodes"),
    ],
)
def test_a_malformed_record_names_file_line_and_field(
    tmp_path: Path, line: int, old: str, new: str, field: str
) -> None:
    path = _corrupt(tmp_path, line, old, new)
    with pytest.raises(ParseError) as info:
        read_jobs_detail(path, tz="UTC", lenient=False, cluster="lab")
    assert (info.value.path, info.value.line, info.value.field) == (str(path), line, field)


def test_a_line_that_is_no_job_record_is_named(tmp_path: Path) -> None:
    path = tmp_path / "jobs-detail.txt"
    path.write_text(RUNNING.read_text() + "NodeName=n1 Arch=x86_64\n")
    with pytest.raises(ParseError) as info:
        read_jobs_detail(path, tz="UTC", lenient=False, cluster="lab")
    lines = len(RUNNING.read_text().splitlines()) + 1
    assert (info.value.line, info.value.field) == (lines, "JobId")


def test_no_jobs_is_an_empty_capture(tmp_path: Path) -> None:
    path = tmp_path / "jobs-detail.txt"
    path.write_text("No jobs in the system\n")
    stage = read_jobs_detail(path, tz="UTC", lenient=False, cluster="lab")
    assert (stage.rows_read, stage.gpus.num_rows) == (0, 0)


def test_ingest_is_idempotent_and_later_captures_extend_the_seen_span(tmp_path: Path) -> None:
    db = tmp_path / "db.duckdb"
    first = ingest_slurm(db, SlurmInputs(jobs_detail=RUNNING), cluster="lab")
    rows = _stored(db)
    assert {(j, s, n, g, seen) for _, j, s, n, g, seen, _ in rows} == held(RUNNING)
    assert all(first_s == last_s for *_, first_s, last_s in rows)
    again = ingest_slurm(db, SlurmInputs(jobs_detail=RUNNING), cluster="lab")
    assert again.files[0].skipped and again.files[0].ingest_id == first.files[0].ingest_id
    assert _stored(db) == rows
    # A capture 60 s later: same GPUs, one row each, seen from the first to the last capture.
    later = tmp_path / "later.txt"
    later.write_text(RUNNING.read_text().replace("RunTime=00:00:11", "RunTime=00:01:11"))
    ingest_slurm(db, SlurmInputs(jobs_detail=later), cluster="lab")
    extended = _stored(db)
    assert len(extended) == len(rows)
    assert {(r[:5], r[5], r[6] - 60) for r in extended} == {(r[:5], r[5], r[6]) for r in rows}


def test_a_bad_capture_leaves_the_store_unchanged(tmp_path: Path) -> None:
    db = tmp_path / "db.duckdb"
    ingest_slurm(db, SlurmInputs(sacct=FIXTURE / "sacct.psv"), cluster="lab")
    bad = _corrupt(tmp_path, 2, "IDX:2-3", "IDX:2-x")
    with pytest.raises(ParseError):
        ingest_slurm(db, SlurmInputs(sacct=FIXTURE / "sacct-running.psv", jobs_detail=bad))
    assert _stored(db) == set()
    con = connect(db, read_only=True)
    try:
        states = {r[0] for r in con.execute("SELECT DISTINCT state FROM jobs").fetchall()}
    finally:
        con.close()
    assert "RUNNING" not in states  # the running capture's sacct rolled back with it


def test_lenient_counts_the_bad_record(tmp_path: Path) -> None:
    db = tmp_path / "db.duckdb"
    bad = _corrupt(tmp_path, 2, "IDX:2-3", "IDX:2-x")
    summary = ingest_slurm(db, SlurmInputs(jobs_detail=bad), cluster="lab", lenient=True)
    assert summary.files[0].rows_rejected == 1
    assert {r[1] for r in _stored(db)} == {j for j, *_ in held(RUNNING)} - {"2"}
    con = connect(db, read_only=True)
    try:
        rejects = con.execute("SELECT line, field FROM rejects").fetchall()
    finally:
        con.close()
    assert rejects == [(2, "GRES")]


def test_the_cli_reads_the_flag_and_the_directory_name(tmp_path: Path) -> None:
    db = tmp_path / "flag.duckdb"
    cli = [sys.executable, "-m", "gpuyield", "ingest", "slurm", "--quiet", "--cluster", "lab"]
    subprocess.run([*cli, "--db", str(db), "--jobs-detail", str(RUNNING)], check=True)
    directory = tmp_path / "capture"
    directory.mkdir()
    (directory / "sacct.psv").write_text((FIXTURE / "sacct-running.psv").read_text())
    (directory / "jobs-detail.txt").write_text(RUNNING.read_text())
    in_dir = tmp_path / "dir.duckdb"
    subprocess.run([*cli, "--db", str(in_dir), "--dir", str(directory)], check=True)
    assert _stored(db) == _stored(in_dir) != set()
