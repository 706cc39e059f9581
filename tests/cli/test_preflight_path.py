"""`gpuyield preflight`'s fast path (gpuyield.__main__): the same answers as the full CLI, byte for
byte, without the CLI's libraries. Its speed is measured by bench/preflight.py, not here."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpuyield import __main__ as entry
from gpuyield.cli import app
from tests.cli.snapshot import commands
from tests.ladder.conftest import LadderStore, ladder_store  # noqa: F401 (a fixture)

AT = "2026-01-01T04:00:00"
# What a submit-time check must not import: the CLI's libraries, DuckDB's Python layer, the
# dataframe stack, the guard.
NOT_IMPORTED = (
    "typer",
    "click",
    "rich",
    "pydantic",
    "duckdb",
    "ibis",
    "pyarrow",
    "numpy",
    "pandas",
    "gpuyield.cli",
    "gpuyield.guard",
    "gpuyield.ledger",
    "gpuyield.report",
    "gpuyield.ingest",
)


def test_the_fast_path_knows_the_options_the_cli_has() -> None:
    (command,) = [c for c in commands() if c.path == "gpuyield preflight"]
    cli = {p.names[0]: (p.type, p.default) for p in command.params}
    fast = {
        name: (kind, entry.PREFLIGHT_DEFAULTS.get(name))
        for name, kind in entry.PREFLIGHT_OPTIONS.items()
    }
    assert fast == cli


def _cases(db: Path) -> list[list[str]]:
    common = ["--db", str(db), "--at", AT]
    return [
        [*common, "--family", "climb", "--gpus", "16"],  # allowed: climbed to 16
        [*common, "--family", "jump", "--gpus", "16"],  # refused: rungs 1 and 8 missing
        [*common, "--family", "nosuch", "--gpus", "8"],  # refused, and a note: a typo?
        [*common, "--family", "climb", "--gpus", "1"],  # the first rung
        [*common, "--run", "climb-next", "--gpus", "16"],  # by run name, glob pattern
        [*common, "--run", "jump-b", "--gpus=16"],  # by re: pattern; --name=value
        [*common, "--run", "someone-else", "--gpus", "16"],  # in no family
        [*common, "--family", "jump", "--gpus", "16", "--json"],
        [*common, "--family", "climb", "--gpus", "8", "--json", "--tz", "Europe/Berlin"],
        ["--family", "jump", "--gpus", "1k", "--db", str(db), f"--at={AT}Z"],
    ]


def test_the_fast_path_answers_as_the_cli_does(
    ladder_store: LadderStore,  # noqa: F811
    capsys: pytest.CaptureFixture[str],
) -> None:
    for argv in _cases(ladder_store.db):
        status = entry.preflight(argv)
        fast = capsys.readouterr()
        full = CliRunner().invoke(app, ["preflight", *argv])
        assert status == full.exit_code, argv
        assert (fast.out, fast.err) == (full.stdout, full.stderr), argv
        assert fast.out or fast.err


def test_the_json_verdict(ladder_store: LadderStore, capsys: pytest.CaptureFixture[str]) -> None:  # noqa: F811
    argv = ["--db", str(ladder_store.db), "--at", AT, "--family", "jump", "--gpus", "16", "--json"]
    assert entry.preflight(argv) == 3
    verdict = json.loads(capsys.readouterr().out)
    assert verdict["allowed"] is False and verdict["missing_rungs"] == [1, 8]
    assert verdict["at"] == AT + "Z" and verdict["from_summary"] is True


@pytest.mark.parametrize(
    "argv",
    [
        ["--help"],
        ["--gpus", "16"],  # neither --family nor --run
        ["--gpus", "16", "--family", "a", "--run", "b"],
        ["--family", "a"],  # no --gpus
        ["--gpus", "many", "--family", "a"],
        ["--gpus", "0", "--family", "a"],
        ["--gpus", "8", "--family", "a", "--at", "yesterday"],
        ["--gpus", "8", "--family", "a", "--tz", "Mars/Base"],
        ["--gpus", "8", "--family"],  # a missing value
        ["--gpus", "8", "--family", "--json"],  # an option where a value should be
        ["--gpus", "8", "--family", "a", "--verbose"],
        ["--gpus", "8", "--family", "a", "--json=yes"],
        ["--gpus", "8", "--family", "a", "--db", "/nonexistent/store.duckdb"],  # an error
    ],
)
def test_what_the_fast_path_leaves_to_the_cli(argv: list[str]) -> None:
    assert entry.preflight(argv) is None


def test_the_submit_time_check_imports_none_of_the_heavy_modules(
    ladder_store: LadderStore,  # noqa: F811
) -> None:
    argv = [
        "preflight",
        "--db",
        str(ladder_store.db),
        "--at",
        AT,
        "--run",
        "jump-b",
        "--gpus",
        "16",
    ]
    code = (
        "import sys\n"
        f"sys.argv = ['gpuyield', *{argv!r}]\n"
        "from gpuyield.__main__ import main\n"
        "try:\n    main()\nexcept SystemExit as stop:\n    status = stop.code\n"
        f"heavy = [m for m in sys.modules if m.split('.')[0] in {NOT_IMPORTED!r} or "
        f"any(m == p or m.startswith(p + '.') for p in {NOT_IMPORTED!r})]\n"
        "print(status, sorted(heavy))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    )
    assert done.stdout.splitlines()[-1] == "3 []", done.stdout + done.stderr
    assert "refused: family jump" in done.stderr
