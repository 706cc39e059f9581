"""Exit statuses (docs/cli.md): 0 ok, 1 error, 2 usage, 3 a check that ran and failed; the
deprecated spellings work for one release, with a warning."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpuyield.cli import app
from tests.ladder.conftest import LadderStore, ladder_store  # noqa: F401 (a fixture)

runner = CliRunner()


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (
            ["report", "idle-now", "--window", "soon"],
            "Invalid value for '--window': not a duration",
        ),
        (["report", "--since", "yesterday"], "Invalid value for '--since': not an ISO 8601 time"),
        (["report", "--tz", "Mars/Base"], "Invalid value for '--tz': not a time zone"),
        (["report", "--top", "many", "--by", "user"], "Invalid value for '--top': not a whole"),
        (["report", "--png", "x"], "--png works only with --html"),
        (["report", "--wait", "a while"], "Invalid value for '--wait': not a duration"),
        (["collect", "--max-output", "4X"], "Invalid value for '--max-output': not a size"),
        (
            [
                "plan",
                "--params",
                "8B",
                "--tokens",
                "1T",
                "--gpus",
                "8",
                "--accelerator",
                "h100",
                "--mfu",
                "lots",
            ],
            "Invalid value for '--mfu': not a number",
        ),
        (["report", "--no-such-option"], "No such option"),
        (["preflight", "--gpus", "16"], "give --family or --run (not both)"),
        (["preflight", "--gpus", "0", "--family", "f"], "must be >= 1, not '0'"),
        (["simulate", "sweep", "--out", "o", "--gpus", "1.5"], "not a whole number"),
        (
            ["simulate", "sweep", "--out", "o", "--param", "interval-s", "--values", "1h,soon"],
            "--values",
        ),
        (
            [
                "plan",
                "--params",
                "8B",
                "--tokens",
                "1T",
                "--gpus",
                "8",
                "--accelerator",
                "h100",
                "--policy",
                "pray",
            ],
            "unknown policy",
        ),
    ],
)
def test_a_command_line_that_cannot_be_read_exits_2(args: list[str], words: str) -> None:
    result = runner.invoke(app, args)
    assert result.exit_code == 2, result.output
    assert words in result.output and "Traceback" not in result.output


def test_an_error_exits_1_with_message_and_hint(tmp_path: Path) -> None:
    result = runner.invoke(app, ["report", "--db", str(tmp_path / "none.duckdb")])
    assert result.exit_code == 1
    assert "error: no database at" in result.output and "hint: " in result.output


def test_a_refused_preflight_exits_3(ladder_store: LadderStore) -> None:  # noqa: F811
    common = ["preflight", "--db", str(ladder_store.db), "--at", "2026-01-01T04:00:00"]
    assert runner.invoke(app, [*common, "--family", "jump", "--gpus", "16"]).exit_code == 3
    assert runner.invoke(app, [*common, "--family", "climb", "--gpus", "16"]).exit_code == 0


def test_a_failing_doctor_check_exits_3(tmp_path: Path) -> None:
    # Slurm's commands are there but their daemons do not answer: the checks run and fail.
    for name in ("sacct", "sacctmgr", "scontrol", "sinfo"):
        script = tmp_path / name
        script.write_text("#!/bin/sh\necho 'slurm_load_ctl_conf error' >&2\nexit 1\n")
        script.chmod(0o755)
    result = runner.invoke(app, ["doctor", "--slurm-bin", str(tmp_path), "--json"])
    assert result.exit_code == 3, result.output
    assert '"status": "fail"' in result.output


def test_an_old_command_name_warns_and_still_works(ladder_store: LadderStore) -> None:  # noqa: F811
    old = runner.invoke(app, ["ladder", "--db", str(ladder_store.db), "--json"])
    new = runner.invoke(app, ["report", "ladder", "--db", str(ladder_store.db), "--json"])
    assert old.exit_code == new.exit_code == 0
    warning = "warning: `gpuyield ladder` is now `gpuyield report ladder`"
    assert old.output.startswith(warning) and warning not in new.output
    assert old.output.endswith(new.output)


def test_an_old_option_warns_and_both_spellings_are_a_usage_error(tmp_path: Path) -> None:
    old = runner.invoke(
        app, ["simulate", "run", "ledger-check", "--out", str(tmp_path), "--days", "0"]
    )
    assert old.exit_code == 1
    assert "warning: --days is deprecated and goes in the next release: write --duration 0d" in (
        old.output
    )
    assert "error: --duration must be > 0" in old.output
    both = runner.invoke(
        app,
        [
            "simulate",
            "run",
            "ledger-check",
            "--out",
            str(tmp_path),
            "--days",
            "1",
            "--duration",
            "1d",
        ],
    )
    assert both.exit_code == 2 and "give --duration or --days, not both" in both.output


def test_the_report_group_runs_its_summary_by_default(ladder_store: LadderStore) -> None:  # noqa: F811
    db = str(ladder_store.db)
    plain = runner.invoke(app, ["report", "--db", db, "--json"])
    named = runner.invoke(app, ["report", "summary", "--db", db, "--json"])
    assert plain.exit_code == named.exit_code == 0
    assert plain.output == named.output and '"categories"' in plain.output
    listing = runner.invoke(app, ["report", "--help"])
    for view in ("summary", "ladder", "idle-now", "ft-loss"):
        assert view in listing.output
