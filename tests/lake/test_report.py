"""One ledger, the store and the lake: ``report --json`` (every breakdown) and the HTML page,
byte for byte, from the DuckDB store and from DuckDB reading the lake (Spark: test_spark.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuyield.lake import LakeSource
from gpuyield.report.breakdown import DIMENSIONS
from gpuyield.report.html import write_html_report
from tests.conftest import REPO
from tests.lake import data
from tests.lake.data import Ingested, report_text


def _lake(path: Path) -> LakeSource:
    return LakeSource(path=path, engine="duckdb")


@pytest.mark.parametrize("by", [None, *DIMENSIONS])
def test_the_bundled_capture_reports_the_same_from_its_lake(sample: Ingested, by: str) -> None:
    assert report_text(_lake(sample.lake), by) == report_text(sample.db, by)


def test_the_html_page_is_the_same_from_the_lake(sample: Ingested, tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    from_store = write_html_report(sample.db, tmp_path / "store.html").read_bytes()
    from_lake = write_html_report(_lake(sample.lake), tmp_path / "lake.html").read_bytes()
    assert from_lake == from_store
    assert b'data-key="yield"' in from_store


def test_a_ladder_is_judged_the_same_from_the_lake(ladder: Ingested) -> None:
    text = report_text(ladder.db)
    assert '"waste_in_skipped_rungs"' in text
    assert report_text(_lake(ladder.lake)) == text


@pytest.mark.parametrize("by", [None, "account", "day"])
def test_the_simulators_cluster_with_utilization_reports_the_same(
    simulated: Ingested, by: str
) -> None:
    text = report_text(simulated.db, by)
    assert '"gpu_activity"' in text  # the samples were attributed: utilization is in the report
    assert report_text(_lake(simulated.lake), by) == text


@pytest.mark.parametrize("by", [None, "cluster", "job"])
def test_a_two_cluster_lake_reports_per_cluster_and_in_total(
    two_clusters: dict[str, Path], by: str
) -> None:
    text = report_text(two_clusters["db"], by)
    assert report_text(_lake(two_clusters["lake"]), by) == text


def test_two_stores_writing_one_lake_report_as_one_store_holding_both(
    two_clusters: dict[str, Path],
) -> None:
    """Each cluster collected into a store of its own, both writing one lake: the same report as
    one store holding both, but for the ingest ids (each store numbers its own)."""
    both = report_text(two_clusters["db"], "cluster")
    shared = report_text(_lake(two_clusters["shared"]), "cluster")
    assert data.without_ingest_ids(shared) == data.without_ingest_ids(both)
    rows = data.without_ingest_ids(shared)["breakdown"]["rows"]  # type: ignore[index]
    assert [r["key"] for r in rows] == ["check", "east"]


def test_a_typed_fleet_in_dollars_is_the_same_from_the_lake(tmp_path: Path) -> None:
    """The real typed-GPU capture (tests/ingest/fixtures/slurm-typed) priced per GPU model: the
    GPU types, the fleet's weights and the showback by account reach the lake's report."""
    typed = REPO / "tests" / "ingest" / "fixtures" / "slurm-typed"
    manifest = tmp_path / "manifest.toml"
    manifest.write_text(
        typed.joinpath("manifest.toml").read_text(encoding="utf-8")
        + '\n[prices]\nsource = "test: a rate card"\nbasis = "list"\nh100 = 2.10\n'
        + '"a100-sxm" = 1.15\n',
        encoding="utf-8",
    )
    since, until = typed.joinpath("window.txt").read_text(encoding="utf-8").split()
    db, lake = tmp_path / "typed.duckdb", tmp_path / "typed-lake"
    data.cli(
        "ingest",
        "slurm",
        "--db",
        db,
        "--sacct",
        typed / "sacct-X-D.psv",
        "--events",
        typed / "events.psv",
        "--nodes",
        typed / "nodes.txt",
        "--manifest",
        manifest,
        "--since",
        since,
        "--until",
        until,
        "--lake",
        lake,
        "-q",
    )
    args = ("report", "--json", "--weight", "dollars", "--by", "account")
    from_store = data.cli(*args, "--db", db)
    assert '"dollars"' in from_store and "h100" in from_store
    assert data.cli(*args, "--lake", lake) == from_store
