"""The manual's code runs: Python blocks compile and import what exists, every ``$ gpuyield``
command parses, docs/python-api.md's examples run on the bundled sample. (What the commands print
is checked exactly by test_figures.py.)"""

from __future__ import annotations

import ast
import importlib
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import typer.main

from gpuyield.cli import app
from tests.docs.snippets import REPO, Block, blocks, gpuyield_commands, session

SAMPLE = REPO / "examples" / "slurm-lab"
# The README's session names the sample's files as a user's capture would be named.
SAMPLE_AS = {
    "sacct-X-D-wide.psv": "sacct.psv",
    "sacctmgr-event-format.psv": "events.psv",
    "scontrol-show-nodes-oneliner.txt": "nodes.txt",
    "manifest.toml": "manifest.toml",
}
PYTHON = blocks("python")
SESSIONS = [b for b in blocks() if b.lang in ("", "console") and "\n$ " in "\n" + b.text]


def _ids(items: list[Block]) -> list[str]:
    return [b.where for b in items]


@pytest.mark.parametrize("block", PYTHON, ids=_ids(PYTHON))
def test_python_blocks_compile_and_import_what_exists(block: Block) -> None:
    tree = ast.parse(block.text, filename=block.where)
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("gpuyield"):
            module = importlib.import_module(node.module or "")
            for alias in node.names:
                assert hasattr(module, alias.name), f"{block.where}: {node.module}.{alias.name}"
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("gpuyield"):
                    importlib.import_module(alias.name)


def _parse(args: list[str]) -> str:
    """Parse ``gpuyield ARGS`` as the CLI would, without running it; returns the command path."""
    command: Any = typer.main.get_command(app)
    ctx = command.make_context("gpuyield", list(args))
    path = ["gpuyield"]
    while hasattr(command, "commands"):
        name, command, rest = command.resolve_command(ctx, [*ctx._protected_args, *ctx.args])
        path.append(name)
        ctx = command.make_context(name, rest, parent=ctx)
    return " ".join(path)


@pytest.mark.parametrize("block", SESSIONS, ids=_ids(SESSIONS))
def test_every_gpuyield_command_parses(block: Block) -> None:
    commands = [args for step in session(block) for args in gpuyield_commands(step.command)]
    for args in commands:
        assert _parse(args).startswith("gpuyield "), (block.where, args)


def _sandbox(tmp_path: Path) -> Path:
    for name, as_name in SAMPLE_AS.items():
        shutil.copy(SAMPLE / name, tmp_path / as_name)
    return tmp_path


def _run(args: list[str], cwd: Path) -> str:
    env = {**os.environ, "COLUMNS": "100", "NO_COLOR": "1"}
    result = subprocess.run(
        [sys.executable, "-m", "gpuyield", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_python_api_examples_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    page = [b for b in PYTHON if b.page.name == "python-api.md"]
    assert page, "docs/python-api.md has no examples"
    monkeypatch.chdir(_sandbox(tmp_path))
    namespace: dict[str, Any] = {}
    for block in page:
        exec(compile(block.text, block.where, "exec"), namespace)
