"""Time bombs (issue 26): a window ending in the future is refused, and sacct rows outside the
window are counted and reported, never dropped without a word.

`ingest slurm --until 2099-...` was accepted: the coverage ran to 2099, yield read 0.0001%, and
every later collection found nothing new until then.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from gpuyield.times import CLOCK_SKEW_S, iso_utc
from tests.hostile.inputs import SACCT_ROWS, base_files, run_cli, sacct_text, snapshot, write_files


def _ingest(db: Path, paths: dict[str, Path], *window: str) -> tuple[int, str, str | None]:
    args = ["ingest", "slurm", "--db", str(db), *window]
    for kind, path in paths.items():
        args += [f"--{kind}", str(path)]
    outcome = run_cli(args)
    return outcome.exit_code, outcome.output, outcome.traceback


def _iso(epoch_s: float) -> str:
    return iso_utc(epoch_s).removesuffix("Z")


@pytest.mark.parametrize(
    ("window", "flag", "words"),
    [
        (["--until", "2099-01-01T00:00:00"], "--until", "after now"),
        (["--until", "2030-06-01T00:00:00", "--tz", "Europe/Berlin"], "--until", "after now"),
        ([], "--until", "after now"),  # filled in below: an hour from now
        (["--since", "2026-11-30T11:00:00", "--until", "2026-11-30T10:00:00"], "--since",
         "must be before the window's end"),
        (["--since", "2099-01-01T00:00:00"], "--since", "after now"),
    ],
)  # fmt: skip
def test_windows_in_the_future_are_refused(
    window: list[str], flag: str, words: str, base_db: Path, tmp_path: Path
) -> None:
    window = window or ["--until", _iso(time.time() + 3600)]
    before = snapshot(base_db)
    code, output, traceback = _ingest(
        base_db, write_files(tmp_path, {"sacct": base_files()["sacct"]}, "w"), *window
    )
    assert traceback is None and code == 1, output
    lines = output.strip().splitlines()
    text = " ".join(output.split())
    assert text.startswith(f"error: {flag} ") and words in text, output
    assert lines[-1].startswith("hint:") or "hint:" in text
    assert snapshot(base_db) == before


def test_clock_skew_of_minutes_is_allowed(tmp_path: Path) -> None:
    soon = _iso(time.time() + CLOCK_SKEW_S / 2)
    code, output, traceback = _ingest(
        tmp_path / "s.duckdb", write_files(tmp_path, dict(base_files()), "b"), "--until", soon
    )
    assert traceback is None and code == 0, output


def test_a_simulated_capture_gives_its_own_present(tmp_path: Path) -> None:
    code, output, traceback = _ingest(
        tmp_path / "s.duckdb", write_files(tmp_path, dict(base_files()), "b"),
        "--until", "2099-01-01T00:00:00", "--now", "2099-01-01T00:00:00",
    )  # fmt: skip
    assert traceback is None and code == 0, output


def test_rows_outside_the_window_are_counted_and_named(tmp_path: Path) -> None:
    late = SACCT_ROWS[0].replace("1|1|train", "9|9|late").replace("T10:", "T12:")
    early = SACCT_ROWS[0].replace("1|1|train", "8|8|early").replace("T10:", "T08:")
    files = base_files()
    files["sacct"] = sacct_text(*SACCT_ROWS, late, early)
    paths = write_files(tmp_path, files, "w")
    db = tmp_path / "s.duckdb"
    args = ["--since", "2026-11-30T10:00:00", "--until", "2026-11-30T11:00:00", "--json"]
    code, output, traceback = _ingest(db, paths, *args)
    assert traceback is None and code == 0, output
    warnings = json.loads(output)["warnings"]
    said = [w for w in warnings if "outside the window" in w]
    assert len(said) == 1, warnings
    assert str(paths["sacct"]) in said[0] and "2 job rows" in said[0]
    assert "1 start at or after --until" in said[0] and "line 4" in said[0]
    assert "1 ended by --since" in said[0] and "line 5" in said[0]
    # Stored, not dropped: a later ingest with a wider window counts them.
    assert len(snapshot(db)["jobs"]) == 4
