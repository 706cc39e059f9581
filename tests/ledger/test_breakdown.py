"""Breakdowns of the real sample add up to the report's totals, whichever way they are cut."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuyield.categories import Category
from gpuyield.errors import FieldError, InputError
from gpuyield.ingest.slurm import SlurmInputs, ingest_slurm
from gpuyield.report.breakdown import DEFAULT_TOP, OTHERS, UNALLOCATED, Breakdown
from gpuyield.report.summary import ReportWithBreakdown, YieldReport, build_report_with_breakdown
from tests.conftest import SAMPLE


def _both(result: ReportWithBreakdown) -> tuple[YieldReport, Breakdown]:
    assert result.breakdown is not None
    return result.report, result.breakdown


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


@pytest.mark.parametrize("by", ["account", "user", "partition", "run", "job", "day", "hour"])
def test_rows_add_up_to_each_category(sample_db: Path, by: str) -> None:
    report, cut = _both(build_report_with_breakdown(sample_db, by=by))
    assert cut is not None
    rows = cut.rows
    for category in Category:
        total = sum(r.categories[category.value] for r in rows)
        assert total == pytest.approx(report.categories[category.value], abs=1e-6), category


def test_accounts_of_the_sample(sample_db: Path) -> None:
    _, cut = _both(build_report_with_breakdown(sample_db, by="account"))
    assert cut is not None
    rows = cut.rows
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
    _, cut = _both(build_report_with_breakdown(db, by="account"))
    assert cut is not None and [r.key for r in cut.rows] == ["a", "b", "c", UNALLOCATED]


def test_job_rows_name_the_line_they_came_from(sample_db: Path) -> None:
    # Every job row points at its own record in the input: that line starts with its JobID.
    _, cut = _both(build_report_with_breakdown(sample_db, by="job", top=0))
    assert cut is not None and cut.top is None
    jobs = [r for r in cut.rows if r.key not in (OTHERS, UNALLOCATED)]
    assert len(jobs) == cut.groups == 38  # every run that held GPUs in the window
    for row in jobs:
        path, line = str(row.attributes["source"]).rsplit(":", 1)
        record = Path(path).read_text().splitlines()[int(line) - 1]
        assert record.split("|")[0] == row.key, (row.key, record[:40])
        assert row.attributes["state"] == record.split("|")[9].split()[0]
    totals = [r.total_gpu_seconds for r in jobs]
    assert totals == sorted(totals, reverse=True)
    # The sample's released lineage run long-a (job 32) holds the most GPU time.
    assert (jobs[0].key, jobs[0].attributes["run"]) == ("32", "long-a")


def test_top_keeps_the_largest_and_sums_the_rest(sample_db: Path) -> None:
    report, everything = _both(build_report_with_breakdown(sample_db, by="job", top=0))
    _, cut = _both(build_report_with_breakdown(sample_db, by="job", top=3))
    _, default = _both(build_report_with_breakdown(sample_db, by="job"))
    assert everything is not None and cut is not None and default is not None
    assert [r.key for r in cut.rows] == [r.key for r in everything.rows[:3]] + [
        OTHERS,
        UNALLOCATED,
    ]
    assert (cut.groups, cut.top, default.top) == (38, 3, DEFAULT_TOP["job"])
    assert len(default.rows) == DEFAULT_TOP["job"] + 2
    others = next(r for r in cut.rows if r.key == OTHERS)
    rest = everything.rows[3:-1]
    for category in Category:
        expected = sum(r.categories[category.value] for r in rest)
        assert others.categories[category.value] == pytest.approx(expected, abs=1e-6)
    _, accounts = _both(build_report_with_breakdown(sample_db, by="account", top=1))
    assert accounts is not None
    assert [r.key for r in accounts.rows] == ["physics", OTHERS, UNALLOCATED]
    assert sum(r.total_gpu_seconds for r in accounts.rows) == pytest.approx(
        report.installed_gpu_seconds
    )


def test_negative_top_is_refused(sample_db: Path) -> None:
    with pytest.raises(FieldError, match=r"^report\.top must be from 0") as caught:
        build_report_with_breakdown(sample_db, by="job", top=-1)
    assert caught.value.field == "report.top"


def test_cli_json_of_a_job_breakdown(sample_db: Path) -> None:
    import json

    from typer.testing import CliRunner

    from gpuyield.cli import app

    result = CliRunner().invoke(
        app, ["report", "--db", str(sample_db), "--by", "job", "--top", "2", "--json"]
    )
    assert result.exit_code == 0, result.output
    cut = json.loads(result.stdout)["breakdown"]
    assert (cut["by"], cut["groups"], cut["top"]) == ("job", 38, 2)
    first = cut["rows"][0]
    assert first["key"] == "32" and first["run"] == "long-a" and first["state"] == "COMPLETED"
    assert first["source"].endswith("sacct-X-D-wide.psv:45")
    assert [r["key"] for r in cut["rows"][2:]] == [OTHERS, UNALLOCATED]


def test_runs_are_cut_at_twenty_unless_told(tmp_path: Path) -> None:
    from tests.ledger.timeline import T0_S, Cluster, Job

    # 25 runs, one job each, of distinct lengths: run r00 is the longest.
    jobs = [
        Job(i + 1, 0, 1000 - 10 * i, run=f"r{i:02d}", gpus=1, nodes=f"n{i % 4 + 1}")
        for i in range(25)
    ]
    jobs.append(Job(26, 0, 50, gpus=1, nodes="n1"))  # no run: its own "(none)" group
    files = Cluster(num_nodes=4, jobs=jobs).write(tmp_path / "in")
    db = tmp_path / "db.duckdb"
    inputs = SlurmInputs(sacct=files["sacct"], events=files["events"], nodes=files["nodes"])
    ingest_slurm(db, inputs, until_s=T0_S + 3600)
    report, default = _both(build_report_with_breakdown(db, by="run"))
    _, everything = _both(build_report_with_breakdown(db, by="run", top=0))
    assert default is not None and everything is not None
    assert (default.groups, default.top, everything.top) == (26, 20, None)
    assert [r.key for r in everything.rows[:3]] == ["r00", "r01", "r02"]
    assert everything.rows[-2].key == "(none)" and len(everything.rows) == 27
    assert [r.key for r in default.rows] == [f"r{i:02d}" for i in range(20)] + [
        OTHERS,
        UNALLOCATED,
    ]
    others = default.rows[-2].categories
    for category in Category:
        rest = sum(r.categories[category.value] for r in everything.rows[20:-1])
        assert others[category.value] == pytest.approx(rest, abs=1e-6)
        total = sum(r.categories[category.value] for r in default.rows)
        assert total == pytest.approx(report.categories[category.value], abs=1e-6)
