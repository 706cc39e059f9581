"""Same scenario and seed: byte-identical output; another seed: different output."""

from __future__ import annotations

from pathlib import Path

from gpuyield.simulate.api import RunSummary, run_scenario
from tests.simulate.conftest import out_files


def test_same_seed_gives_identical_bytes(ledger_check: RunSummary, tmp_path: Path):
    again = run_scenario("ledger-check", tmp_path / "again")
    first, second = out_files(ledger_check.out_dir), out_files(again.out_dir)
    assert first.keys() == second.keys()
    for name in first:
        assert first[name] == second[name], name


def test_other_seed_changes_the_logs(ledger_check: RunSummary, tmp_path: Path):
    other = run_scenario("ledger-check", tmp_path / "other", seed=8)
    assert (other.out_dir / "sacct.psv").read_bytes() != (
        ledger_check.out_dir / "sacct.psv"
    ).read_bytes()
