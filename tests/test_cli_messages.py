"""Messages are never re-wrapped off a terminal: cron mail, logs and tests get one line each.

Each command runs as a user's shell would run it (a subprocess, stderr a pipe) with ``TMPDIR`` a
100-character directory, so every path in a message is longer than Rich's 80-column default.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

LONG = 100


@pytest.fixture
def long_tmp(tmp_path: Path) -> Path:
    """A directory whose path is exactly 100 characters (longer when pytest's own already is)."""
    pad = max(LONG - len(str(tmp_path)) - 1, 1)
    path = tmp_path / ("t" * pad)
    path.mkdir()
    assert len(str(path)) >= LONG
    return path


def _gpuyield(*args: str, tmp: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "TMPDIR": str(tmp)}
    env.pop("COLUMNS", None)  # Rich's default width off a terminal: 80
    return subprocess.run(
        [sys.executable, "-m", "gpuyield", *args],
        capture_output=True,
        text=True,
        env=env,
        check=False,
        timeout=120,
    )


def test_an_error_naming_a_long_path_is_one_line(long_tmp: Path) -> None:
    db = long_tmp / "missing.duckdb"
    proc = _gpuyield("report", "--db", str(db), tmp=long_tmp)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    lines = proc.stderr.splitlines()
    assert f"error: no database at {db}" in lines, proc.stderr
    assert any(line.startswith("hint: ") and line.endswith(f"--db {db}") for line in lines)


def test_a_failing_slurm_command_is_one_line_under_a_long_tmpdir(long_tmp: Path) -> None:
    # The message path of tests/ingest/test_collect.py::test_the_cli_prints_one_line_and_json,
    # which failed on a fresh clone whose temporary directory was long.
    bin_dir = long_tmp / "slurm-bin"
    bin_dir.mkdir()
    for name in ("scontrol", "sacct", "sacctmgr", "sinfo"):
        script = bin_dir / name
        script.write_text("#!/bin/sh\necho 'slurm_load_ctl_conf error' >&2\nexit 1\n")
        script.chmod(script.stat().st_mode | stat.S_IXUSR)
    proc = _gpuyield(
        "collect", "--db", str(long_tmp / "db.duckdb"), "--slurm-bin", str(bin_dir),
        "--since", "2026-11-30T10:00:00", "--until", "2026-11-30T11:00:00", tmp=long_tmp,
    )  # fmt: skip
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    error = [line for line in proc.stderr.splitlines() if line.startswith("error: ")]
    assert len(error) == 1, proc.stderr
    assert f"{bin_dir / 'scontrol'} show config` exited 1" in error[0]


def test_a_usage_error_is_one_plain_line_off_a_terminal(long_tmp: Path) -> None:
    word = "x" * 120
    proc = _gpuyield("report", "--top", word, tmp=long_tmp)
    assert proc.returncode == 2
    # typer.core._main's rich_markup_mode chooses the box; a typer upgrade that moves it fails here.
    assert "╭" not in proc.stderr
    (line,) = [line for line in proc.stderr.splitlines() if line.startswith("Error: ")]
    assert "'--top'" in line and "not a whole number" in line
