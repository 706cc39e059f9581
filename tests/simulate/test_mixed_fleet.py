"""A simulated mixed fleet (H100 lineage nodes, A100 research nodes, each at its price): the
ledger's yield by GPU type and in H100-equivalents, FLOPs and dollars equals the simulator's truth,
each weight conserved."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from gpuyield.errors import InputError
from gpuyield.simulate.api import run_scenario
from gpuyield.simulate.scenario import load_scenario

GPUYIELD = [sys.executable, "-m", "gpuyield"]


@pytest.fixture(scope="module")
def mixed(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], dict[str, Any]]:
    """(truth.json, the ledger's report --json) of the bundled mixed-fleet scenario."""
    tmp = tmp_path_factory.mktemp("mixed")
    out = tmp / "out"
    run_scenario("mixed-fleet", out)
    truth = json.loads((out / "truth.json").read_text())
    (out / "truth.json").unlink()  # the ledger must not see the answer
    start, end = (truth["window"][k].removesuffix("Z") for k in ("start", "end"))
    db = tmp / "ledger.duckdb"
    window = ["--since", start, "--until", end]
    subprocess.run(
        [*GPUYIELD, "ingest", "slurm", "--dir", str(out), "--db", str(db), *window],
        check=True,
        capture_output=True,
        text=True,
    )
    report = subprocess.run(
        [*GPUYIELD, "report", "--db", str(db), "--json"], check=True, capture_output=True, text=True
    )
    return truth, json.loads(report.stdout)


def test_by_gpu_type_equals_truth(mixed: tuple[dict[str, Any], dict[str, Any]]) -> None:
    truth, report = mixed
    assert set(report["by_gpu_type"]) == set(truth["by_gpu_type"]) == {"h100-sxm", "a100-sxm"}
    installed = truth["installed_gpu_seconds"]
    for model, want in truth["by_gpu_type"].items():
        got = report["by_gpu_type"][model]
        assert got["installed_gpu_seconds"] == want["installed_gpu_seconds"]
        for category, value in want["categories"].items():
            # The whole-fleet bar of the ledger's end-to-end test: 0.1% of installed.
            assert abs(got["categories"][category] - value) <= 1e-3 * installed, (model, category)
    # The lineage ran on H100s only, research on A100s only.
    assert truth["by_gpu_type"]["a100-sxm"]["categories"]["released"] == 0
    assert report["by_gpu_type"]["a100-sxm"]["categories"]["released"] == 0


def test_weighted_yield_equals_truth(mixed: tuple[dict[str, Any], dict[str, Any]]) -> None:
    truth, report = mixed
    assert set(truth["weighted"]) == {"h100_equiv_seconds", "flops", "dollars"}
    for unit, want in truth["weighted"].items():
        got = report["weighted"][unit]
        assert got["installed"] == pytest.approx(want["installed"], rel=1e-12)
        for category, value in want["categories"].items():
            assert abs(got["categories"][category] - value) <= 1e-3 * want["installed"], unit
        assert got["yield"] == pytest.approx(want["yield"], abs=1e-3)
        assert sum(got["categories"].values()) == pytest.approx(got["installed"], rel=1e-12)
    # The released lineage ran on the faster, dearer GPUs: FLOP and dollar yield exceed the
    # GPU-second yield, and say so in truth too.
    assert truth["weighted"]["flops"]["yield"] > truth["yield"]
    assert report["weighted"]["dollars"]["yield"] > report["yield"]


def test_a_typed_fleet_refuses_backfilled_lineage_nodes(tmp_path: Path) -> None:
    import dataclasses

    scenario = load_scenario("mixed-fleet")
    research = dataclasses.replace(scenario.research, backfill_lineage_gaps=True)
    with pytest.raises(InputError, match="backfill_lineage_gaps = false"):
        dataclasses.replace(scenario, research=research)
