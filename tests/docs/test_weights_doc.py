"""docs/weights.md's sessions run, and print what the page shows (its figures come from the
commands: the bundled mixed-fleet simulation and the Meta lab scenario)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.docs.snippets import REPO, blocks, gpuyield_commands, session, shown_in

PAGE = REPO / "docs" / "weights.md"


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


def test_the_weights_page_prints_what_it_shows(tmp_path: Path) -> None:
    sessions = [b for b in blocks("console") if b.page == PAGE]
    assert len(sessions) >= 3
    for name in ("tests", "examples"):  # the page names the repository's files
        (tmp_path / name).symlink_to(REPO / name)
    checked = 0
    for block in sessions:
        for step in session(block):
            (args,) = gpuyield_commands(step.command)
            actual = _run(args, tmp_path)
            assert shown_in(step.shown, actual), f"{block.where}: {step.command}:\n{actual}"
            checked += bool(step.shown.strip())
    assert checked >= 5
