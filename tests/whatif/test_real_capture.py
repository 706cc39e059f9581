"""The fit on a real capture: the Slurm lab's recorded hour (examples/slurm-lab, Slurm 22.05.8).

An hour of a 4-node lab holds three node failures and a few dozen jobs: the fit runs, writes a
scenario the simulator accepts, and says what it cannot fit (too few failures and repairs to
rate, too few completed jobs to fit durations, lineage runs on 2 GPUs where the simulator runs
whole nodes), and the check refuses projections (exit 3).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpuyield.cli import app
from gpuyield.ingest.slurm import SlurmInputs, ingest_slurm
from gpuyield.simulate import load_scenario

LAB = Path(__file__).resolve().parents[2] / "examples" / "slurm-lab"
UNTIL_S = 1796036400  # 2026-11-30T11:00:00Z, the end of the capture (README)


@pytest.fixture(scope="module")
def lab_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    db = tmp_path_factory.mktemp("lab") / "lab.duckdb"
    inputs = SlurmInputs(
        sacct=LAB / "sacct-X-D-wide.psv",
        events=LAB / "sacctmgr-event-format.psv",
        nodes=LAB / "scontrol-show-nodes-oneliner.txt",
        manifest=LAB / "manifest.toml",
    )
    ingest_slurm(db, inputs, until_s=UNTIL_S)
    return db


def test_the_fit_runs_on_the_recorded_lab_and_says_what_it_cannot_fit(
    lab_db: Path, tmp_path: Path
) -> None:
    out = tmp_path / "lab.toml"
    result = CliRunner().invoke(
        app,
        ["whatif", "fit", "--db", str(lab_db), "--out", str(out), "--json", "--replay-seeds", "2"],
    )
    assert result.exit_code == 3, result.output
    data = json.loads(result.output)
    refused = {r.split(":")[0] for r in data["refusals"]}
    assert "failures.hardware_total" in refused and "failures.repair_mean_s" in refused
    assert any(k.endswith(".median_duration_s") for k in refused)
    assert any("whole nodes" in n for n in data["notes"])
    assert any("assumed" in n for n in data["notes"])
    assert data["check"]["passed"] is False
    # What was seen is still fitted from the records: three failures in the hour, the lineage
    # runs' checkpoint intervals from the manifest.
    params = {p["key"]: p for p in data["parameters"]}
    assert params["failures.hardware_total"]["events"] == 3
    assert params["lineage.dn2.checkpoint_interval_s"]["status"] == "setting"
    assert params["lineage.dn2.checkpoint_interval_s"]["value"] == 4
    # The scenario is written all the same (it says the check failed), and the simulator runs it.
    assert "FAILED" in out.read_text().splitlines()[1]
    assert load_scenario(out).fleet.num_nodes == 4


def test_projections_on_the_recorded_lab_are_refused_unless_forced(lab_db: Path) -> None:
    runner = CliRunner()
    refused = runner.invoke(
        app, ["whatif", "--db", str(lab_db), "--remedy", "drop-replicas", "--replay-seeds", "2"]
    )
    assert refused.exit_code == 3 and "too few events" in refused.output
    forced = runner.invoke(
        app,
        [
            "whatif",
            "--db",
            str(lab_db),
            "--remedy",
            "drop-replicas",
            "--replay-seeds",
            "2",
            "--seeds",
            "2",
            "--force",
            "--json",
        ],
    )
    assert forced.exit_code == 0, forced.output
    data = json.loads(forced.output)
    assert data["check"]["forced"] is True and data["check"]["passed"] is False
