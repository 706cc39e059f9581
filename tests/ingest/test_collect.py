"""``gpuyield collect`` on a recorded Slurm (the real lab: tests/slurm/test_collect.py)."""

from __future__ import annotations

import gzip
import hashlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

from gpuyield.cli._common import as_flag
from gpuyield.errors import InputError
from gpuyield.ingest.collect import CollectError, collect
from gpuyield.report.summary import build_report
from gpuyield.store import connect
from tests.ingest.recorded_slurm import RecordedSlurm

SINCE_S = 1_796_032_800  # 2026-11-30T10:00:00Z, the recording's sacct -S
UNTIL_S = 1_796_036_400  # 2026-11-30T11:00:00Z, its -E
LATER_S = UNTIL_S + 600


@pytest.fixture
def slurm(tmp_path: Path) -> RecordedSlurm:
    return RecordedSlurm(tmp_path / "slurm")


def _finished(text: str) -> str:
    """The recording with its one RUNNING job (36) finished at 11:05."""
    lines = []
    for line in text.splitlines():
        if line.startswith("36|"):
            fields = line.split("|")
            fields[9], fields[15] = "COMPLETED", "2026-11-30T11:05:00"
            line = "|".join(fields)
        lines.append(line)
    return "\n".join(lines) + "\n"


def test_first_collect_needs_a_start(tmp_path: Path, slurm: RecordedSlurm) -> None:
    with pytest.raises(InputError, match="no accounting of cluster 'lab'") as info:
        collect(tmp_path / "db.duckdb", slurm_bin=slurm.bin, until_s=UNTIL_S)
    # The library names its parameter; the CLI says the same with its flag.
    assert "collect.since" in (info.value.hint or "")
    assert "--since" in (as_flag(info.value).hint or "")
    assert not (tmp_path / "db.duckdb").exists()


def test_collect_runs_the_documented_commands_and_records_coverage(
    tmp_path: Path, slurm: RecordedSlurm
) -> None:
    db = tmp_path / "db.duckdb"
    outcome = collect(db, since_s=SINCE_S, until_s=UNTIL_S, slurm_bin=slurm.bin)
    assert (outcome.cluster, outcome.since_s, outcome.until_s) == ("lab", SINCE_S, UNTIL_S)
    assert outcome.jobs_new == 39 and outcome.jobs_updated == 0  # the recording: 39 records
    assert outcome.covered_since_s == SINCE_S
    calls = slurm.call_lines()
    sacct = next(c for c in calls if c.startswith("sacct "))
    assert "-S 2026-11-30T10:00:00 -E 2026-11-30T11:00:00" in sacct and " -X -D " in sacct
    assert any("show event All_Time" in c for c in calls)
    assert any(c.startswith("scontrol -o show nodes") for c in calls)
    report = build_report(db)
    assert (report.window_start_s, report.window_end_s) == (SINCE_S, UNTIL_S)
    # The output was temporary: every source names the command that printed it.
    paths = [source.path for source in report.sources]
    assert any(p.startswith("TZ=UTC ") and " -X -D " in p for p in paths), paths
    assert [c.to_dict() for c in report.coverage] == [
        {"cluster": "lab", "start": "2026-11-30T10:00:00Z", "end": "2026-11-30T11:00:00Z"}
    ]


def test_a_running_job_is_updated_when_it_ends_never_added_twice(
    tmp_path: Path, slurm: RecordedSlurm
) -> None:
    db = tmp_path / "db.duckdb"
    collect(db, since_s=SINCE_S, until_s=UNTIL_S, slurm_bin=slurm.bin)
    slurm.set_sacct(_finished((tmp_path / "slurm" / "out" / "sacct").read_text()))
    later = collect(db, until_s=LATER_S, slurm_bin=slurm.bin, overlap_s=1800)
    assert (later.jobs_new, later.jobs_updated, later.jobs_unchanged) == (0, 1, 38)
    # The window starts an overlap before the watermark, and the coverage stays one span.
    assert later.since_s == UNTIL_S - 1800 and later.covered_since_s == SINCE_S
    con = connect(db, read_only=True)
    try:
        rows = con.execute("SELECT state, end_s FROM jobs WHERE job_id_raw = '36'").fetchall()
        assert rows == [("COMPLETED", UNTIL_S + 300)]
        assert con.execute("SELECT count(*) FROM jobs").fetchall() == [(39,)]
    finally:
        con.close()


def test_collecting_again_up_to_the_same_time_changes_nothing(
    tmp_path: Path, slurm: RecordedSlurm
) -> None:
    db = tmp_path / "db.duckdb"
    collect(db, since_s=SINCE_S, until_s=UNTIL_S, slurm_bin=slurm.bin)
    before = build_report(db).to_dict()
    calls = len(slurm.call_lines())
    again = collect(db, until_s=UNTIL_S, slurm_bin=slurm.bin)
    assert (again.jobs_new, again.jobs_updated, again.commands) == (0, 0, ())
    assert len(slurm.call_lines()) == calls + 1  # only scontrol show config, for the name
    assert json.dumps(build_report(db).to_dict()) == json.dumps(before)


def test_a_failing_command_is_named_and_the_store_is_unchanged(
    tmp_path: Path, slurm: RecordedSlurm
) -> None:
    db = tmp_path / "db.duckdb"
    collect(db, since_s=SINCE_S, until_s=UNTIL_S, slurm_bin=slurm.bin)
    digest = hashlib.sha256(db.read_bytes()).hexdigest()
    slurm.down()
    with pytest.raises(CollectError, match=r"`\S*sacct -a -P -X -D .* exited 1: .*Connection "):
        collect(db, until_s=LATER_S, cluster="lab", slurm_bin=slurm.bin)
    assert hashlib.sha256(db.read_bytes()).hexdigest() == digest
    slurm.down(False)
    resumed = collect(db, until_s=LATER_S, slurm_bin=slurm.bin)
    assert resumed.covered_since_s == SINCE_S


def test_keep_raw_keeps_output_and_commands(tmp_path: Path, slurm: RecordedSlurm) -> None:
    db, raw = tmp_path / "db.duckdb", tmp_path / "raw"
    outcome = collect(db, since_s=SINCE_S, until_s=UNTIL_S, slurm_bin=slurm.bin, keep_raw=raw)
    assert outcome.raw_dir is not None
    kept = Path(outcome.raw_dir)
    assert kept.name == "lab-20261130T110000Z"
    sacct = gzip.decompress((kept / "sacct.psv.gz").read_bytes()).decode()
    assert sacct == (tmp_path / "slurm" / "out" / "sacct").read_text()
    commands = (kept / "commands.tsv").read_text()
    assert "TZ=UTC" in commands and "--format=JobID,JobIDRaw" in commands
    record = json.loads((kept / "collection.json").read_text())
    assert record["since"] == "2026-11-30T10:00:00Z"
    # The stored paths name the kept files, so every row traces back to them.
    con = connect(db, read_only=True)
    try:
        paths = {r[0] for r in con.execute("SELECT path FROM ingests").fetchall()}
    finally:
        con.close()
    assert str(kept / "sacct.psv.gz") in paths


def test_the_cli_prints_one_line_and_json(tmp_path: Path, slurm: RecordedSlurm) -> None:
    db = tmp_path / "db.duckdb"
    args = [sys.executable, "-m", "gpuyield", "collect", "--db", str(db),
            "--slurm-bin", str(slurm.bin), "--since", "2026-11-30T10:00:00",
            "--until", "2026-11-30T11:00:00"]  # fmt: skip
    proc = subprocess.run(args, capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    assert "39 new, 0 updated" in proc.stdout and "covered 2026-11-30T10:00:00Z" in proc.stdout
    slurm.down()
    args[-1] = "2026-11-30T11:10:00"
    proc = subprocess.run([*args, "--json"], capture_output=True, text=True, check=False)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert (
        "scontrol show config` exited 1" in proc.stderr.replace("\n", "") and "hint:" in proc.stderr
    )


def test_collect_stores_the_gpu_indices_of_running_jobs(
    tmp_path: Path, slurm: RecordedSlurm
) -> None:
    from tests.ingest.held_oracle import FIXTURE, held

    db = tmp_path / "db.duckdb"
    collect(db, since_s=SINCE_S, until_s=UNTIL_S, slurm_bin=slurm.bin)
    assert any(c.startswith("scontrol -d -o show job") for c in slurm.call_lines())
    con = connect(db, read_only=True)
    try:
        rows = con.execute(
            "SELECT job_id_raw, start_s, node, gpu, first_seen_s, last_seen_s, cluster "
            "FROM job_gpus"
        ).fetchall()
        path = con.execute("SELECT path FROM ingests WHERE source = 'slurm.jobs_detail'").fetchall()
    finally:
        con.close()
    expected = held(FIXTURE / "scontrol-d-o-show-job.txt")
    assert {(j, s, n, g, seen) for j, s, n, g, seen, _, _ in rows} == expected
    assert {(r[4] == r[5], r[6]) for r in rows} == {(True, "lab")}
    assert path == [(f"TZ=UTC {slurm.bin / 'scontrol'} -d -o show job",)]


def test_a_no_op_collect_says_what_is_covered(tmp_path: Path, slurm: RecordedSlurm) -> None:
    """--until earlier than the coverage's end: nothing runs, and the summary gives the coverage
    as it is (issue 25: it printed the requested --until as the coverage's end)."""
    db = tmp_path / "db.duckdb"
    collect(db, since_s=SINCE_S, until_s=UNTIL_S, slurm_bin=slurm.bin)
    args = [sys.executable, "-m", "gpuyield", "collect", "--db", str(db), "--slurm-bin",
            str(slurm.bin), "--until", "2026-11-30T10:30:00"]  # fmt: skip
    proc = subprocess.run(args, capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    said = " ".join(proc.stdout.split())
    assert "already covered up to 2026-11-30T10:30:00Z: nothing to collect" in said
    assert "covered 2026-11-30T10:00:00Z .. 2026-11-30T11:00:00Z" in said
    outcome = json.loads(subprocess.run([*args, "--json"], capture_output=True, text=True,
                                        check=True).stdout)  # fmt: skip
    assert (outcome["covered_since"], outcome["covered_until"]) == (
        "2026-11-30T10:00:00Z", "2026-11-30T11:00:00Z",
    )  # fmt: skip
