"""Values never become SQL (issue 26): a store path or an environment variable that reads as SQL
is only a name or a bad value, whatever it says.

A store named ``x'; DROP TABLE jobs; SET temp_directory='y`` once lost its jobs on the next ingest
(the path was pasted into ``SET temp_directory``); any path with an apostrophe gave a traceback on
every command. tests/test_sql_text.py keeps the rule over the whole source tree.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.hostile.inputs import base_files, ingest, report_json, run_cli, snapshot, write_files

HOSTILE_NAMES = (
    "x'; DROP TABLE jobs; SET temp_directory='y.duckdb",
    "it's a store.duckdb",
)


@pytest.mark.parametrize("name", HOSTILE_NAMES)
def test_a_store_path_that_reads_as_sql_is_only_a_name(name: str, tmp_path: Path) -> None:
    db = tmp_path / name
    paths = write_files(tmp_path, dict(base_files()), "base")
    first = ingest(db, paths)
    assert first.traceback is None and first.exit_code == 0, first.output
    jobs = snapshot(db)["jobs"]
    assert len(jobs) == 2
    # The second ingest is where the pasted path ran its DROP: every file is already stored,
    # so nothing may change.
    again = ingest(db, paths)
    assert again.traceback is None and again.exit_code == 0, again.output
    assert snapshot(db)["jobs"] == jobs
    assert report_json(db)["installed_gpu_seconds"] == 115_200
    for command in (["report", "--db", str(db)], ["report", "ladder", "--db", str(db)]):
        outcome = run_cli(command)
        assert outcome.traceback is None, outcome.traceback
        assert "Traceback" not in outcome.output
    # The spill folder DuckDB was told about is named after the store, beside it, literally.
    assert not (tmp_path / "y").exists()


@pytest.mark.parametrize(
    "limit",
    ["3GB'; DROP TABLE jobs; --", "1e300GB", "-1GB", "", "lots", "0GB", "3GB\x1b[2J"],
)
def test_a_hostile_memory_limit_is_one_clear_error(
    limit: str, base_db: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    before = snapshot(base_db)
    monkeypatch.setenv("GPUYIELD_MEMORY_LIMIT", limit)
    for command in (
        ["report", "--db", str(base_db)],
        ["ingest", "slurm", "--db", str(base_db), "--sacct",
         str(write_files(tmp_path, {"sacct": base_files()["sacct"]}, "again")["sacct"])],
    ):  # fmt: skip
        outcome = run_cli(command)
        assert outcome.traceback is None, outcome.traceback
        assert outcome.exit_code == 1, outcome.output
        lines = outcome.output.strip().splitlines()
        assert lines[0].startswith("error: GPUYIELD_MEMORY_LIMIT"), outcome.output
        assert lines[1].startswith("hint:") and len(lines) == 2, outcome.output
        assert "\x1b" not in outcome.output
    monkeypatch.delenv("GPUYIELD_MEMORY_LIMIT")
    assert snapshot(base_db) == before


@pytest.mark.parametrize("limit", ["2GiB", " 50% "])
def test_memory_limits_duckdb_reads_are_taken(
    limit: str, base_db: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GPUYIELD_MEMORY_LIMIT", limit)
    assert report_json(base_db)["installed_gpu_seconds"] == 115_200


def test_a_backslash_in_a_store_path_is_refused_before_duckdb_misreads_it(tmp_path: Path) -> None:
    # DuckDB opens "a\\b.duckdb" as "a/b.duckdb": the store would land in another folder.
    db = tmp_path / "back\\slash'.duckdb"
    outcome = ingest(db, write_files(tmp_path, dict(base_files()), "base"))
    assert outcome.traceback is None and outcome.exit_code == 1
    assert "backslash" in outcome.output and "hint:" in outcome.output
    assert not db.exists() and not (tmp_path / "back").exists()
