"""Disks that say no (issue 26): a full disk and a read-only one are each one clear error with the
store unchanged (never "corrupted, rebuild it"), and a process killed right after a commit leaves
provenance that names no deleted temporary file.

The full and read-only disks are real: a small tmpfs mounted for the test (root only; the test
says so and skips elsewhere), filled, or remounted read-only.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import duckdb
import pytest

from tests.hostile.inputs import SACCT_HEADER, run_cli, snapshot, write_files
from tests.ingest.recorded_slurm import RecordedSlurm

REPO = Path(__file__).resolve().parents[2]


def _mount(directory: Path, options: str) -> bool:
    directory.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(directory)],
        capture_output=True, check=False,
    )  # fmt: skip
    return done.returncode == 0


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 16 MB file system of its own, unmounted afterwards."""
    disk = tmp_path / "disk"
    if os.geteuid() != 0 or not _mount(disk, "size=16m"):
        pytest.skip("mounting a small file system needs root (and mount permission)")
    try:
        yield disk
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=False)


def _big_sacct(tmp_path: Path, jobs: int = 40_000) -> Path:
    rows = [SACCT_HEADER]
    for i in range(jobs):
        start = f"2026-11-30T10:{(i // 60) % 60:02d}:{i % 60:02d}"
        rows.append(
            f"{1000 + i}|{1000 + i}|job|carol|ml|gpu|COMPLETED|{start}|{start}|{start}|0|"
            "billing=1,cpu=1,gres/gpu=1,node=1|n1|1|run=r"
        )
    path = tmp_path / "big.psv"
    path.write_text("\n".join(rows) + "\n")
    return path


def _fill(disk: Path, leave_bytes: int) -> Path:
    """Fill the disk but ``leave_bytes``."""
    free = shutil.disk_usage(disk).free
    filler = disk / "filler"
    with filler.open("wb") as out:
        out.truncate(0)
        out.write(b"\0" * max(0, free - leave_bytes))
    return filler


def test_a_full_disk_is_one_clear_error_and_the_store_is_unchanged(
    base_db: Path, small_disk: Path, tmp_path: Path
) -> None:
    db = small_disk / "store.duckdb"
    shutil.copyfile(base_db, db)
    before = snapshot(db)
    filler = _fill(small_disk, 64 << 10)
    outcome = run_cli(["ingest", "slurm", "--db", str(db), "--sacct", str(_big_sacct(tmp_path)),
                       "--until", "2026-11-30T11:00:00"])  # fmt: skip
    assert outcome.traceback is None, outcome.traceback
    assert outcome.exit_code == 1, outcome.output
    lines = outcome.output.strip().splitlines()
    assert lines[0].startswith(f"error: no space left to write {db}"), outcome.output
    assert lines[1].startswith("hint: free space") and len(lines) == 2
    assert "corrupted" not in outcome.output
    filler.unlink()
    assert snapshot(db) == before
    again = run_cli(["ingest", "slurm", "--db", str(db), "--sacct", str(_big_sacct(tmp_path)),
                     "--until", "2026-11-30T11:00:00"])  # fmt: skip
    assert again.exit_code == 0, again.output  # space back: the same ingest goes through


def test_a_read_only_disk_is_named_and_reports_still_read(
    base_db: Path, small_disk: Path, tmp_path: Path
) -> None:
    db = small_disk / "store.duckdb"
    shutil.copyfile(base_db, db)
    before = snapshot(db)
    subprocess.run(["mount", "-o", "remount,ro", str(small_disk)], check=True)
    paths = write_files(tmp_path, {"sacct": _big_sacct(tmp_path, 10).read_text()}, "ro")
    outcome = run_cli(["ingest", "slurm", "--db", str(db), "--sacct", str(paths["sacct"])])
    assert outcome.traceback is None and outcome.exit_code == 1, outcome.output
    lines = outcome.output.strip().splitlines()
    assert lines[0] == f"error: {db} is on a read-only file system", outcome.output
    assert lines[1].startswith("hint: write the store on a writable disk")
    assert "corrupted" not in outcome.output and "rebuild" not in outcome.output
    report = run_cli(["report", "--db", str(db), "--json"])
    assert report.exit_code == 0, report.output
    assert snapshot(db) == before


# A child that ingests and is killed (SIGKILL, no clean-up of any kind) the moment its first
# transaction commits: what the store then says about its inputs is all that survives.
_KILLED_AFTER_COMMIT = """
import os, signal, sys
from contextlib import contextmanager
from pathlib import Path
from gpuyield import store

committed = store.transaction

@contextmanager
def transaction(con):
    with committed(con):
        yield
    os.kill(os.getpid(), signal.SIGKILL)

store.transaction = transaction
what, db, arg = sys.argv[1:4]
if what == "collect":
    from gpuyield.ingest.collect import collect
    collect(Path(db), since_s=1796032800, until_s=1796036400, slurm_bin=Path(arg))
else:
    from gpuyield.ingest.slurm import SlurmInputs, ingest_slurm
    ingest_slurm(Path(db), SlurmInputs(sacct=Path(arg)), until_s=1796036400)
"""


def _killed_after_commit(what: str, db: Path, arg: Path) -> list[str]:
    env = {**os.environ, "PYTHONPATH": f"{REPO / 'src'}:{REPO}"}
    done = subprocess.run(
        [sys.executable, "-c", _KILLED_AFTER_COMMIT, what, str(db), str(arg)],
        env=env, capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert done.returncode == -signal.SIGKILL, done.stderr
    con = duckdb.connect(str(db), read_only=True)
    try:
        return [str(r[0]) for r in con.execute("SELECT path FROM ingests").fetchall()]
    finally:
        con.close()


def test_a_kill_right_after_a_collection_commits_names_no_deleted_file(tmp_path: Path) -> None:
    slurm = RecordedSlurm(tmp_path / "slurm")
    paths = _killed_after_commit("collect", tmp_path / "db.duckdb", slurm.bin)
    assert paths and all(p.startswith("TZ=UTC ") for p in paths), paths


def test_a_kill_right_after_a_compressed_ingest_commits_names_the_given_file(
    tmp_path: Path,
) -> None:
    import gzip

    source = REPO / "examples" / "slurm-lab" / "sacct-X-D-wide.psv"
    given = tmp_path / "sacct.psv.gz"
    given.write_bytes(gzip.compress(source.read_bytes()))
    paths = _killed_after_commit("ingest", tmp_path / "db.duckdb", given)
    assert paths == [str(given)]
