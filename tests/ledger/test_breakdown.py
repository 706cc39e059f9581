"""Breakdowns of the real sample add up to the report's totals, whichever way they are cut."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuyield.categories import Category
from gpuyield.errors import InputError
from gpuyield.ingest.slurm import SlurmInputs, ingest_slurm
from gpuyield.report.breakdown import UNALLOCATED
from gpuyield.report.summary import build_report_with_breakdown
from tests.conftest import SAMPLE


@pytest.fixture(scope="module")
def sample_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    db = tmp_path_factory.mktemp("breakdown") / "sample.duckdb"
    ingest_slurm(
        db,
        SlurmInputs(
            sacct=SAMPLE / "sacct-X-D-wide.psv",
            events=SAMPLE / "sacctmgr-event-format.psv",
            nodes=SAMPLE / "scontrol-show-nodes-oneliner.txt",
            manifest=SAMPLE / "manifest.toml",
        ),
        until_s=1796036400,
    )
    return db


@pytest.mark.parametrize("by", ["account", "user", "partition", "run", "day", "hour"])
def test_rows_add_up_to_each_category(sample_db: Path, by: str) -> None:
    report, rows = build_report_with_breakdown(sample_db, by=by)
    for category in Category:
        total = sum(r.categories[category.value] for r in rows)
        assert total == pytest.approx(report.categories[category.value], abs=1e-6), category


def test_accounts_of_the_sample(sample_db: Path) -> None:
    _, rows = build_report_with_breakdown(sample_db, by="account")
    keys = [r.key for r in rows]
    assert keys == ["physics", "biology", UNALLOCATED]
    # bio-long (2 GPUs x 300 s) is a released lineage run of the biology account.
    assert dict((r.key, r.categories["released"]) for r in rows)["biology"] == 600


def test_unknown_dimension(sample_db: Path) -> None:
    with pytest.raises(InputError, match="cannot break down"):
        build_report_with_breakdown(sample_db, by="colour")


def test_equal_totals_are_ordered_by_name(tmp_path: Path) -> None:
    from tests.ledger.timeline import T0_S, Cluster, Job

    # Inserted in the order c, a, b with the same GPU time: printed a, b, c every time.
    jobs = [Job(i, 0, 100, account=name, nodes=f"n{i}") for i, name in ((1, "c"), (2, "a"))]
    jobs.append(Job(3, 200, 300, account="b", nodes="n1"))
    files = Cluster(jobs=jobs).write(tmp_path / "in")
    db = tmp_path / "db.duckdb"
    inputs = SlurmInputs(sacct=files["sacct"], events=files["events"], nodes=files["nodes"])
    ingest_slurm(db, inputs, until_s=T0_S + 3600)
    _, rows = build_report_with_breakdown(db, by="account")
    assert [r.key for r in rows] == ["a", "b", "c", UNALLOCATED]
