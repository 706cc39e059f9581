"""The public surface and the CLI's self-documentation."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import typer.main

import gpuyield
from gpuyield.cli import app

DOCS = Path(__file__).resolve().parents[1] / "docs"


def test_all_is_sorted_and_importable() -> None:
    assert gpuyield.__all__ == sorted(gpuyield.__all__)
    # A fresh interpreter: this one has imported every module already, which would hide a lazy
    # name pointing at a module that does not define it.
    code = f"from gpuyield import {', '.join(gpuyield.__all__)}; print('ok')"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.stdout.strip() == "ok", out.stderr
    assert "__getattr__" not in gpuyield.__all__
    with pytest.raises(AttributeError):
        _ = gpuyield.not_a_name  # type: ignore[attr-defined]


def test_every_public_name_is_documented_and_nothing_else() -> None:
    page = (DOCS / "python-api.md").read_text(encoding="utf-8")
    headings = re.findall(r"^### `(\w+)`$", page, re.M)
    assert sorted(headings) == sorted(gpuyield.__all__), (
        f"undocumented: {sorted(set(gpuyield.__all__) - set(headings))}; "
        f"documented but not public: {sorted(set(headings) - set(gpuyield.__all__))}"
    )


def test_importing_the_recorder_stays_light() -> None:
    code = "import sys, gpuyield; print('duckdb' in sys.modules or 'ibis' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def _commands() -> list[tuple[str, Any]]:
    root = typer.main.get_command(app)
    found: list[tuple[str, Any]] = []

    def walk(prefix: str, command: Any) -> None:
        found.append((prefix, command))
        if hasattr(command, "commands"):
            for name, sub in command.commands.items():
                walk(f"{prefix} {name}".strip(), sub)

    walk("", root)
    return [(name, cmd) for name, cmd in found if name]


@pytest.mark.parametrize(
    ("name", "command"), _commands(), ids=lambda v: v if isinstance(v, str) else ""
)
def test_every_command_and_option_has_help(name: str, command: Any) -> None:
    assert command.help and command.help.strip() and "not yet built" not in command.help, name
    for param in command.params:
        if type(param).__name__.endswith("Option") and param.name != "help":
            assert param.help, f"{name} {param.opts[0]} has no help"


@pytest.mark.parametrize(
    ("name", "command"), _commands(), ids=lambda v: v if isinstance(v, str) else ""
)
def test_every_command_is_documented(name: str, command: Any) -> None:
    del command
    docs = "\n".join(p.read_text() for p in DOCS.glob("*.md"))
    assert re.search(rf"gpuyield {re.escape(name)}\b", docs), f"no docs mention `gpuyield {name}`"


def test_user_error_is_one_line_with_hint_and_exit_1(tmp_path: Path) -> None:
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "gpuyield",
            "ingest",
            "slurm",
            "--sacct",
            str(tmp_path / "nope.psv"),
            "--db",
            str(tmp_path / "x.duckdb"),
        ],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    assert "error:" in result.stderr and "hint:" in result.stderr


# Every leaf command of the CLI and the public names that do its work: a new command without a
# library entry point in `gpuyield.__all__` fails here (the CLI is a skin over the library).
COMMAND_API = {
    "report summary": ("build_report", "write_html_report", "LakeSource"),
    "report idle-now": ("build_idle_now",),
    "report ladder": ("build_ladder",),
    "report ft-loss": ("ft_loss",),
    "serve": ("ServeSettings", "Listen"),
    "idle-now": ("build_idle_now",),
    "ladder": ("build_ladder",),
    "preflight": ("check_launch", "preflight"),
    "collect": ("collect",),
    "doctor": ("run_doctor",),
    "plan": ("PlanSpec", "plan"),
    "train-ft": ("TrainConfig", "train_ft"),
    "ft-loss": ("ft_loss",),
    "ingest slurm": ("SlurmInputs", "ingest_slurm"),
    "ingest telemetry": ("ingest_telemetry_files",),
    "ingest gres-conf": ("ingest_gres_conf",),
    "ingest utilization": ("ingest_utilization", "PrometheusSource", "MetricNames"),
    "estimate train": ("estimate_train",),
    "estimate validate": ("validate_catalog",),
    "estimate params-from-speed": ("params_from_speed",),
    "estimate params-from-budget": ("params_from_budget",),
    "estimate lab": ("estimate_lab",),
    "estimate labs": ("list_lab_scenarios",),
    "estimate essay-check": ("check_essay",),
    "estimate accelerators": ("list_accelerators", "get_accelerator"),
    "estimate models": ("list_models", "get_model"),
    "simulate run": ("load_scenario", "run_scenario"),
    "simulate list": ("bundled_names",),
    "simulate validate": ("validate_cases",),
    "simulate sweep": ("SweepSpec", "run_sweep", "run_ladder_sweep"),
    "divergence scan": ("scan",),
    "lake export": ("export_lake", "sync_store"),
    "lake check": ("check_lake",),
    "lake size": ("size_fleets",),
    # `gpuyield whatif` itself (a group that runs without a subcommand) calls run_whatif.
    "whatif fit": ("run_fit", "run_whatif"),
}


def _leaf_commands() -> set[str]:
    return {name for name, command in _commands() if not hasattr(command, "commands")}


def test_every_command_has_its_library_call_in_the_public_api() -> None:
    leaves = _leaf_commands()
    # Aliases (the grammar's old names kept for a release) run the same library call as their
    # command: a leaf missing here must be a new feature, not a new spelling.
    missing = sorted(leaves - set(COMMAND_API))
    assert not missing, f"commands with no public library call listed: {missing}"
    stale = sorted(set(COMMAND_API) - leaves)
    assert not stale, f"listed commands that no longer exist: {stale}"
    public = set(gpuyield.__all__)
    unexported = sorted({n for names in COMMAND_API.values() for n in names} - public)
    assert not unexported, f"not in gpuyield.__all__: {unexported}"


def test_a_feature_behind_an_extra_says_how_to_install_it() -> None:
    # Without torch (the train extra) the lazy name raises MissingExtraError with the pip line,
    # as the CLI does, not a bare ImportError from deep inside.
    code = (
        "import sys; sys.modules['torch'] = None\n"
        "import gpuyield\n"
        "try:\n    gpuyield.train_ft\n"
        "except gpuyield.MissingExtraError as error:\n    print(error.hint)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.stdout.strip() == "pip install 'gpuyield[train]'", out.stderr
