"""End to end: `gpuyield ingest slurm` + `gpuyield report --json` recover truth.json within 0.1%.

The report of each scenario is also a golden output (tests/golden/), byte for byte.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from gpuyield.simulate.api import RunSummary

GPUYIELD = [sys.executable, "-m", "gpuyield"]


@pytest.mark.parametrize("fixture", ["ledger_check", "ledger_check_telemetry"])
def test_ledger_recovers_truth(
    fixture: str,
    request: pytest.FixtureRequest,
    tmp_path: Path,
    golden: Callable[[str, str], None],
):
    summary: RunSummary = request.getfixturevalue(fixture)
    work = tmp_path / "dir"
    shutil.copytree(summary.out_dir, work)
    truth = json.loads((work / "truth.json").read_text())
    (work / "truth.json").unlink()  # the ledger must not see the answer
    db = tmp_path / "ledger.duckdb"
    end = truth["window"]["end"].removesuffix("Z")
    subprocess.run(
        [*GPUYIELD, "ingest", "slurm", "--dir", str(work), "--db", str(db), "--until", end],
        check=True,
        capture_output=True,
        text=True,
    )
    report = subprocess.run(
        [*GPUYIELD, "report", "--db", str(db), "--json"], check=True, capture_output=True, text=True
    )
    # The report names its input files: their temporary directory reads <dir>.
    golden(f"{fixture.replace('_', '-')}-report.json", report.stdout.replace(str(work), "<dir>"))
    got = json.loads(report.stdout)
    installed = truth["installed_gpu_seconds"]
    assert got["installed_gpu_seconds"] == pytest.approx(installed, rel=1e-3)
    for category, value in truth["categories"].items():
        assert abs(got["categories"][category] - value) <= 1e-3 * installed, category
    for sub, value in truth["subcategories"].items():
        assert abs(got["subcategories"].get(sub, 0) - value) <= 1e-3 * installed, sub
