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
    start, end = (truth["window"][k].removesuffix("Z") for k in ("start", "end"))
    subprocess.run(
        [
            *GPUYIELD,
            "ingest",
            "slurm",
            "--dir",
            str(work),
            "--db",
            str(db),
            "--since",
            start,
            "--until",
            end,
        ],
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


def _ledger_categories(out_dir: Path, tmp_path: Path, start: str, end: str) -> dict:
    db = tmp_path / "ledger.duckdb"
    window = ["--since", start, "--until", end]
    subprocess.run(
        [*GPUYIELD, "ingest", "slurm", "--dir", str(out_dir), "--db", str(db), *window],
        check=True,
        capture_output=True,
        text=True,
    )
    report = subprocess.run(
        [*GPUYIELD, "report", "--db", str(db), "--json"], check=True, capture_output=True, text=True
    )
    return json.loads(report.stdout)


def test_llama3_405b_without_telemetry_within_half_a_percent(tmp_path: Path):
    """Issue 18: run_settings let the ledger estimate overhead and lost progress without telemetry.

    Truth is what happened (3% overhead); before, the ledger put overhead at 0 and failed 25% low.
    A week of the 54-day scenario keeps the test short; the bar is the issue's 0.5% of installed.
    """
    from gpuyield.simulate.api import run_scenario

    path = tmp_path / "no-telemetry.toml"
    _write_scenario(path, "llama3-405b")
    out = tmp_path / "out"
    summary = run_scenario(path, out, days=7)
    truth = summary.truth.to_dict()
    (out / "truth.json").unlink()
    start, end = (truth["window"][k].removesuffix("Z") for k in ("start", "end"))
    got = _ledger_categories(out, tmp_path, start, end)
    installed = truth["installed_gpu_seconds"]
    assert truth["categories"]["overhead"] > 0.02 * installed
    for category, value in truth["categories"].items():
        assert abs(got["categories"][category] - value) <= 0.005 * installed, category
    assert "estimated from run_settings" in got["figures"]["overhead"]


def _write_scenario(path: Path, name: str) -> None:
    """The bundled scenario with its lineage run's telemetry switched off."""
    import tomllib
    from importlib import resources

    import tomli_w

    text = resources.files("gpuyield").joinpath(f"data/scenarios/sim/{name}.toml").read_text()
    data = tomllib.loads(text)
    data["lineage"][0]["telemetry"] = False
    path.write_text(tomli_w.dumps(data), encoding="utf-8")
