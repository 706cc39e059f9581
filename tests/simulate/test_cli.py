"""`gpuyield simulate` on the command line."""

from __future__ import annotations

import json
from pathlib import Path

from typer.main import get_command
from typer.testing import CliRunner

from gpuyield.cli import app
from gpuyield.cli import simulate as simulate_cli

runner = CliRunner()


def test_simulate_scenario_writes_the_cluster_files(tmp_path: Path):
    out = tmp_path / "run"
    result = runner.invoke(
        app, ["simulate", "ledger-check", "--out", str(out), "--duration", "1d", "--json"]
    )
    assert result.exit_code == 0, result.output
    truth = json.loads(result.stdout)
    assert truth == json.loads((out / "truth.json").read_text())
    assert truth["window"]["end"] == "2026-11-02T00:00:00Z"
    for name in ("sacct.psv", "events.psv", "nodes.txt", "manifest.toml", "truth.json"):
        assert (out / name).is_file(), name


def test_run_subcommand_and_table_output(tmp_path: Path):
    result = runner.invoke(
        app,
        [
            "simulate",
            "run",
            "ledger-check",
            "--out",
            str(tmp_path),
            "--duration",
            "12h",
            "--seed",
            "3",
        ],
    )
    assert result.exit_code == 0, result.output
    assert "released" in result.stdout and "yield" in result.stdout


def test_unknown_scenario_is_one_line_with_hint(tmp_path: Path):
    result = runner.invoke(app, ["simulate", "ledger-chek", "--out", str(tmp_path)])
    assert result.exit_code == 1
    assert "unknown scenario" in result.output and "ledger-check" in result.output
    assert "Traceback" not in result.output


def test_bad_days_is_an_input_error(tmp_path: Path):
    result = runner.invoke(
        app, ["simulate", "ledger-check", "--out", str(tmp_path), "--duration", "0s"]
    )
    assert result.exit_code == 1 and "--duration" in result.output


def test_sweep_writes_table(tmp_path: Path):
    result = runner.invoke(
        app,
        [
            "simulate",
            "sweep",
            "--param",
            "interval-s",
            "--values",
            "600,1800",
            "--seeds",
            "1",
            "--duration",
            "5d",
            "--out",
            str(tmp_path),
            "--no-plots",
            "--json",
        ],
    )
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert len(summary["points"]) == 6  # 2 values x 3 policies
    assert (tmp_path / "sweep.csv").read_text().count("\n") == 7


def test_list_shows_bundled_scenarios():
    result = runner.invoke(app, ["simulate", "list"])
    assert result.exit_code == 0 and "llama3-405b" in result.stdout


def test_every_command_and_option_has_help():
    group = get_command(simulate_cli.app)
    commands = group.commands  # type: ignore[attr-defined]
    assert {"run", "list", "sweep"} <= set(commands)
    for name, command in commands.items():
        assert command.help, name
        for param in command.params:
            if param.param_type_name == "option" and param.name != "help":
                assert param.help, f"{name} --{param.name}"
