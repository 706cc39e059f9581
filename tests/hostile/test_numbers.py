"""Numbers that are not numbers (issue 26): every numeric setting of every TOML file is finite, in
range, and named when it is not.

``within_days = inf`` (or 1e300), ``restart_s = nan`` and ``checkpoint_save_s = inf`` were
accepted; every later report or ladder then raised a traceback or moved GPU-seconds. A manifest is
refused at ingest with the store unchanged; scenario, lab and calibration files when they are read.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuyield.errors import GpuyieldError
from gpuyield.simulate.ft_costs import load_ft_calibration
from gpuyield.simulate.scenario import load_scenario
from tests.hostile.inputs import MANIFEST, ingest, run_cli, snapshot, write_files

LADDER = '\n[[families]]\nname = "f"\nruns = "a*"\n\n[ladder]\n'


@pytest.mark.parametrize(
    ("addition", "field", "words"),
    [
        (LADDER + "within_days = inf\n", "ladder.within_days", "not a finite number"),
        (LADDER + "within_days = -inf\n", "ladder.within_days", "not a finite number"),
        (LADDER + "within_days = nan\n", "ladder.within_days", "not a finite number"),
        (LADDER + "within_days = 1e300\n", "ladder.within_days", "out of range"),
        (LADDER + "within_days = 1e20\n", "ladder.within_days", "36,500"),
        (LADDER + "rungs = [1, 8, 9000000000]\n", "ladder.rungs", "at most 10,000,000"),
        ("\n[run_settings.a]\nrestart_s = nan\n", "run_settings.a.restart_s", "finite"),
        ("\n[run_settings.a]\ncheckpoint_save_s = inf\n", "run_settings.a.checkpoint_save_s",
         "finite"),
        ("\n[run_settings.a]\nfailure_detection_s = 1e12\n",
         "run_settings.a.failure_detection_s", "366 days"),
        ("\n[run_settings.a]\ncheckpoint_interval_s = 1e300\n",
         "run_settings.a.checkpoint_interval_s", "out of range"),
        ("\n[run_settings.a]\ncheckpoint_save_s = -0.5\n", "run_settings.a.checkpoint_save_s",
         "from 0"),
    ],
)  # fmt: skip
def test_manifest_numbers_are_checked_at_ingest(
    addition: str, field: str, words: str, base_db: Path, tmp_path: Path
) -> None:
    before = snapshot(base_db)
    paths = write_files(tmp_path, {"manifest": MANIFEST + addition}, "numbers")
    outcome = ingest(base_db, paths)
    assert outcome.traceback is None, outcome.traceback
    assert outcome.exit_code == 1, outcome.output
    lines = outcome.output.strip().splitlines()
    assert len(lines) == 2 and lines[1].startswith("hint:"), outcome.output
    assert str(paths["manifest"]) in lines[0] and field in lines[0] and words in lines[0]
    assert snapshot(base_db) == before
    # The store still answers the commands that read the manifest's numbers.
    for command in (["report", "--db", str(base_db)], ["report", "ladder", "--db", str(base_db)]):
        assert run_cli(command).traceback is None


SCENARIO = """
[scenario]
name = "tiny"
days = {days}

[fleet]
num_nodes = {nodes}
gpus_per_node = 8

[failures]
rate_scale = {scale}
"""


@pytest.mark.parametrize(
    ("values", "field", "words"),
    [
        ({"days": "inf"}, "scenario.days", "not a finite number"),
        ({"days": "nan"}, "scenario.days", "not a finite number"),
        ({"days": "1e300"}, "scenario.days", "out of range"),
        ({"days": "1e9"}, "scenario.days", "at most 36,500"),
        ({"scale": "nan"}, "failures.rate_scale", "not a finite number"),
        ({"nodes": "4000000000"}, "fleet.num_nodes", "at most 10,000,000"),
    ],
)
def test_scenario_numbers(values: dict[str, str], field: str, words: str, tmp_path: Path) -> None:
    path = tmp_path / "tiny.toml"
    path.write_text(SCENARIO.format(**({"days": "1", "nodes": "2", "scale": "1"} | values)))
    with pytest.raises(GpuyieldError) as caught:
        load_scenario(path)
    assert field in caught.value.message and words in caught.value.message
    outcome = run_cli(["simulate", "run", str(path), "--out", str(tmp_path / "out")])
    assert outcome.traceback is None and outcome.exit_code == 1
    assert field in " ".join(outcome.output.split()) and "hint:" in outcome.output


def test_lab_files_refuse_non_finite_numbers(tmp_path: Path) -> None:
    bundled = Path(__file__).parents[2] / "src/gpuyield/data/scenarios/labs/meta-2024.toml"
    text = bundled.read_text()
    assert 'num_gpus = "49152"' in text
    path = tmp_path / "lab.toml"
    path.write_text(text.replace('num_gpus = "49152"', "num_gpus = nan", 1))
    outcome = run_cli(["estimate", "lab", str(path)])
    assert outcome.traceback is None and outcome.exit_code == 1, outcome.output
    said = " ".join(outcome.output.split())
    assert "fleet[0].num_gpus" in said and "not a finite number" in said and "hint:" in said


def test_calibration_files_refuse_non_finite_numbers(tmp_path: Path) -> None:
    bundled = Path(__file__).parents[2] / "src/gpuyield/data/calibration/ft-costs.toml"
    lines = bundled.read_text().splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("restart_s"))
    lines[at] = "restart_s = inf"
    path = tmp_path / "ft.toml"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(GpuyieldError) as caught:
        load_ft_calibration(path)
    assert "restart_s" in caught.value.message and "finite" in caught.value.message
