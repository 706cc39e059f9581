"""`gpuyield whatif` prices GPU-hours with the manifest's [prices] when no flag gives a price.

The simulated test cluster's GPUs are untyped (``Gres=gpu:8``): ``[[gpu_models]]`` names them
H100s, ``[prices]`` prices those, and the store is ingested again with that manifest. The flag
wins over the manifest; a fleet the manifest prices only in part gets no price, and says why.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpuyield.cli import app
from gpuyield.ingest.slurm import SlurmInputs, ingest_slurm
from gpuyield.whatif import run_whatif
from tests.whatif.conftest import Simulated

runner = CliRunner()
FAST = ("--remedy", "repair=2h", "--seeds", "2", "--replay-seeds", "2", "--force")


def _priced_store(base: Simulated, where: Path, tables: str) -> Path:
    """The base cluster's files, its manifest with ``tables`` added, ingested into a new store."""
    out = where / "files"
    shutil.copytree(base.out, out)
    manifest = out / "manifest.toml"
    manifest.write_text(manifest.read_text() + "\n" + tables, encoding="utf-8")
    db = where / "priced.duckdb"
    ingest_slurm(
        db, SlurmInputs.from_dir(out), since_s=base.scenario.start_s, until_s=base.scenario.end_s
    )
    return db


_ALL_PRICED = """
[[gpu_models]]
nodes = "n[01-64]"
model = "h100-sxm"

[prices]
source = "test: a rate card"
basis = "list"
h100-sxm = 2.5
"""


@pytest.fixture(scope="module")
def priced_db(base_cluster: Simulated, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _priced_store(base_cluster, tmp_path_factory.mktemp("priced"), _ALL_PRICED)


def test_the_manifests_price_is_used_and_stated(priced_db: Path) -> None:
    result = runner.invoke(app, ["whatif", "--db", str(priced_db), *FAST, "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    # One price for every GPU: the mean over installed GPU-hours is that price.
    assert data["price_per_gpu_hour"] == pytest.approx(2.5)
    assert data["price_source"] == (
        "the manifest's [prices] (test: a rate card, list), mean over the installed GPU-hours"
    )
    gained = data["remedies"]["repair=2h"]
    assert gained["dollars_gained"] == pytest.approx(gained["gpu_hours_gained"] * 2.5)


def test_the_flag_wins_over_the_manifest(priced_db: Path) -> None:
    projection = run_whatif(
        priced_db,
        remedies=["repair=2h"],
        seeds=2,
        replay_seeds=2,
        force=True,
        price_per_gpu_hour=4.0,
    )
    assert projection.price_per_gpu_hour == 4.0
    assert projection.price_source == "--price-per-gpu-hour"


def test_a_fleet_priced_in_part_gets_no_price_and_says_why(
    base_cluster: Simulated, tmp_path: Path
) -> None:
    # Half the nodes are H100s with a price; the other half A100s the manifest does not price.
    part = """
[[gpu_models]]
nodes = "n[01-32]"
model = "h100-sxm"

[[gpu_models]]
nodes = "n[33-64]"
model = "a100-sxm"

[prices]
source = "test: a rate card"
h100-sxm = 2.5
"""
    db = _priced_store(base_cluster, tmp_path, part)
    result = runner.invoke(app, ["whatif", "--db", str(db), *FAST])
    assert result.exit_code == 0, result.output
    words = " ".join(result.output.split())
    assert (
        "price: none: the manifest's [prices] (test: a rate card) price no a100-sxm GPUs; "
        "pass --price-per-gpu-hour" in words
    )
    assert "dollars gained" not in words
