"""`gpuyield whatif fit` on the live Slurm lab's capture: it runs on what a real Slurm wrote and
says what a few minutes of a 4-node lab cannot fit (exit 3, the CLI grammar's failed check)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from gpuyield.simulate import load_scenario

pytestmark = pytest.mark.slurm


def test_fit_on_the_lab_capture_names_what_it_cannot_fit(ledger_db: Path, tmp_path: Path) -> None:
    out = tmp_path / "lab-fit.toml"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "gpuyield",
            "whatif",
            "fit",
            "--db",
            str(ledger_db),
            "--out",
            str(out),
            "--json",
            "--replay-seeds",
            "2",
        ],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert proc.returncode == 3, proc.stderr[-2000:]
    data = json.loads(proc.stdout)
    assert data["refusals"], "minutes of a 4-node lab cannot rate failures"
    assert "failures.hardware_total" in {r.split(":")[0] for r in data["refusals"]}
    # The lineage runs of the workload (pt-main, ft-main) are found with their settings.
    assert {s["name"] for s in data["lineage"]} >= {"pt-main", "ft-main"}
    assert load_scenario(out).fleet.num_nodes == data["fleet"]["num_nodes"]
