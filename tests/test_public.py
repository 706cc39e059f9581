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
