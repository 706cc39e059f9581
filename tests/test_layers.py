"""The layering contract (.importlinter) holds on the tree, and breaks on a deliberate bad import."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"


def _lint(root: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(root / "src")}
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-cache", "--no-logo", str(root / ".importlinter")],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def _copy(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    shutil.copytree(REPO / "src", root / "src", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(REPO / ".importlinter", root / ".importlinter")
    return root


def test_the_tree_keeps_every_contract() -> None:
    result = _lint(REPO)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout


@pytest.mark.parametrize(
    ("module", "bad_import", "expected"),
    [
        # guard runs inside training jobs: nothing of gpuyield but the core.
        ("guard/watch.py", "import gpuyield.ingest.telemetry", "gpuyield.guard is not allowed"),
        # The ledger reads the store, never ingest.
        ("ledger/window.py", "import gpuyield.ingest.sacct", "gpuyield.ledger is not allowed"),
        # The simulator talks to the ledger only through files.
        ("simulate/output.py", "import gpuyield.ledger", "gpuyield.simulate is not allowed"),
        # The core imports nothing above it.
        ("times.py", "import gpuyield.report", "gpuyield.times is not allowed"),
        # No cycles inside a package.
        ("simulate/ettr.py", "import gpuyield.simulate.sweep", "No cycles are allowed"),
    ],
)
def test_a_bad_import_breaks_the_contract(
    tmp_path: Path, module: str, bad_import: str, expected: str
) -> None:
    root = _copy(tmp_path)
    target = root / "src" / "gpuyield" / module
    target.write_text(target.read_text() + f"\n{bad_import}  # deliberately against the layers\n")
    result = _lint(root)
    assert result.returncode != 0
    assert expected in result.stdout, result.stdout
