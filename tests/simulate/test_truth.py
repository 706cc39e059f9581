"""truth.json agrees with an independent reading of the written files (tests/simulate/reference_ledger)."""

from __future__ import annotations

import json

import pytest

from gpuyield.simulate.api import RunSummary
from tests.simulate.conftest import window_end
from tests.simulate.reference_ledger import classify

CATEGORIES = (
    "down",
    "idle",
    "failed",
    "cancelled",
    "diverged",
    "experiment",
    "overhead",
    "released",
)


@pytest.mark.parametrize("fixture", ["ledger_check", "ledger_check_telemetry"])
def test_truth_matches_reference_reading_of_files(fixture: str, request: pytest.FixtureRequest):
    summary: RunSummary = request.getfixturevalue(fixture)
    truth = json.loads((summary.out_dir / "truth.json").read_text())
    ref = classify(summary.out_dir, window_end(summary))
    assert ref["installed"][""] == truth["installed_gpu_seconds"]
    for cat in CATEGORIES:
        assert truth["categories"][cat] == ref["categories"].get(cat, 0), cat
    for sub, value in truth["subcategories"].items():
        assert value == ref["subcategories"].get(sub, 0), sub


def test_truth_is_conserved_and_every_category_appears(ledger_check: RunSummary):
    truth = ledger_check.truth
    assert sum(truth.categories.values()) == truth.installed_gpu_seconds
    # The scenario is built to exercise every category. Overhead is what happened even with
    # telemetry off (start-up and checkpoint stalls); the ledger estimates it from run_settings.
    for cat in CATEGORIES:
        assert truth.categories[cat] > 0, cat


def test_telemetry_moves_startup_and_writes_into_overhead(
    ledger_check: RunSummary, ledger_check_telemetry: RunSummary
):
    plain, measured = ledger_check.truth, ledger_check_telemetry.truth
    # Same seed and cluster: only the lineage booking differs.
    for cat in ("down", "idle", "experiment", "diverged"):
        assert plain.categories[cat] == measured.categories[cat]
    assert measured.categories["overhead"] > 0
    lineage = ("failed", "cancelled", "overhead", "released")
    assert sum(plain.categories[c] for c in lineage) == sum(measured.categories[c] for c in lineage)


def test_interruptions_add_up(ledger_check: RunSummary):
    inter = ledger_check.truth.interruptions
    assert inter.unexpected == sum(inter.by_cause.values())
    assert inter.unexpected > 0 and inter.planned > 0


def test_runs_not_started_in_a_short_window_are_left_out_of_the_manifest(tmp_path):
    import tomllib

    from gpuyield.simulate.api import run_scenario

    # ledger-check's lineage run is submitted at 06:00; a 4-hour window ends before it.
    summary = run_scenario("ledger-check", tmp_path, days=4 / 24)
    manifest = tomllib.loads((tmp_path / "manifest.toml").read_text())
    assert "releases" not in manifest and "run_settings" not in manifest
    assert summary.truth.categories["released"] == 0
    assert "pt-check" not in (tmp_path / "sacct.psv").read_text()


@pytest.mark.parametrize("policy", ["drop", "spares"])
def test_other_policies_keep_truth_and_files_consistent(policy: str, tmp_path):
    import dataclasses

    from gpuyield.simulate import Policy, load_scenario, simulate, write_outputs

    base = load_scenario("ledger-check-telemetry")
    run = dataclasses.replace(base.lineage[0], policy=Policy(policy), replica_nodes=2)
    truth = write_outputs(simulate(base.with_overrides(lineage=(run,))), tmp_path)
    ref = classify(tmp_path, truth.window_end_s)
    for cat in CATEGORIES:
        assert truth.categories[cat] == ref["categories"].get(cat, 0), cat
    assert truth.interruptions.unexpected > 0
