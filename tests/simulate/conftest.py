"""Shared fixtures: small scenarios simulated once per test session."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuyield.simulate.api import RunSummary, run_scenario


@pytest.fixture(scope="session")
def ledger_check(tmp_path_factory: pytest.TempPathFactory) -> RunSummary:
    """The bundled ledger-check scenario (no telemetry), written out."""
    return run_scenario("ledger-check", tmp_path_factory.mktemp("ledger-check"))


@pytest.fixture(scope="session")
def ledger_check_telemetry(tmp_path_factory: pytest.TempPathFactory) -> RunSummary:
    """The bundled ledger-check-telemetry scenario, written out."""
    return run_scenario("ledger-check-telemetry", tmp_path_factory.mktemp("ledger-telemetry"))


def window_end(summary: RunSummary) -> int:
    """Window end (epoch s) from truth.json."""
    return summary.truth.window_end_s


def out_files(out: Path) -> dict[str, bytes]:
    """Every file under ``out`` by relative path."""
    return {str(p.relative_to(out)): p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()}
