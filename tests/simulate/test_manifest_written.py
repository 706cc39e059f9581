"""The manifest the simulator writes: a TOML library, run_settings for the ledger (issue 18)."""

from __future__ import annotations

import tomllib
from pathlib import Path

from gpuyield.simulate.api import run_scenario
from gpuyield.simulate.scenario import load_scenario


def test_release_names_with_quotes_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "odd.toml"
    path.write_text(
        """
[scenario]
name = "odd"
days = 0.5
[fleet]
num_nodes = 4
[[lineage]]
name = 'pt "check"'
release = 'pt "check" \\ release'
num_gpus = 16
checkpoint_interval_s = 900
""",
        encoding="utf-8",
    )
    load_scenario(path)  # the scenario itself is valid
    run_scenario(path, tmp_path / "out")
    manifest = tomllib.loads((tmp_path / "out" / "manifest.toml").read_text(encoding="utf-8"))
    assert manifest["releases"] == [{"model": 'pt "check" \\ release', "runs": ['pt "check"']}]
    settings = manifest["run_settings"]['pt "check"']
    assert settings == {
        "checkpoint_interval_s": 900,
        "checkpoint_save_s": 30,
        "restart_s": 300,
        "failure_detection_s": 120,
    }
