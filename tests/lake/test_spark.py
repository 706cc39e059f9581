"""One ledger, three places: the store, DuckDB on the lake and Spark on the lake give the same
``report --json`` byte for byte, on the session's Spark standalone cluster (tests/conftest.py).

Each Spark report is tens of seconds of planning and scheduling on two cores, so these are few:
the bundled capture (with its job breakdown), the real Slurm lab's ladder capture (its HTML page,
which holds every number of the JSON), the simulator's cluster with utilization, and two clusters
broken down by cluster (through the CLI, ``--spark-master``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gpuyield.lake import LakeSource
from gpuyield.report.breakdown import DIMENSIONS
from gpuyield.report.html import write_html_report
from tests.lake import data
from tests.lake.data import Ingested, report_text

pytestmark = [
    pytest.mark.slow,
    # PySpark's py4j sockets and its pandas conversion warn in ways this code cannot fix.
    pytest.mark.filterwarnings("ignore::ResourceWarning"),
    pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning"),
    pytest.mark.filterwarnings("ignore::DeprecationWarning"),
    pytest.mark.filterwarnings("ignore::FutureWarning"),
    pytest.mark.filterwarnings("ignore:.*(copy keyword|future.infer_string).*"),
]


def _three(ingested: Ingested, by: str | None) -> tuple[str, str, str]:
    return (
        report_text(ingested.db, by),
        report_text(LakeSource(path=ingested.lake, engine="duckdb"), by),
        report_text(LakeSource(path=ingested.lake, engine="spark"), by),
    )


def test_executors_run_the_drivers_gpuyield(spark_session: Any) -> None:
    """The cluster's executors import gpuyield from the environment it was shipped in."""
    import gpuyield

    seen = spark_session.sparkContext.parallelize([0], 1).map(
        lambda _: __import__("gpuyield").__file__
    )
    assert seen.collect() == [gpuyield.__file__]


def test_the_bundled_capture_is_one_report_in_three_places(
    sample: Ingested, spark_session: Any
) -> None:
    store, duck, spark = _three(sample, "job")
    assert duck == store
    assert spark == store
    assert '"source": "' in store  # the job rows name their input lines


def test_the_html_page_from_spark_is_the_stores_ladder_included(
    ladder: Ingested, spark_session: Any, tmp_path: Path
) -> None:
    """The page holds every number of ``report --json`` (report/html.py), here with a ladder's
    skipped rungs, whose families DuckDB finds on Spark's jobs (ledger/ladder.py): one Spark
    report checks both (the JSON from a lake on DuckDB: tests/lake/test_report.py)."""
    pytest.importorskip("matplotlib")
    from_store = write_html_report(ladder.db, tmp_path / "store.html").read_bytes()
    assert b'data-key="waste_in_skipped_rungs.skipped.' in from_store
    lake = LakeSource(path=ladder.lake, engine="spark")
    assert write_html_report(lake, tmp_path / "spark.html").read_bytes() == from_store


def test_the_simulators_cluster_with_utilization_in_three_places(
    simulated: Ingested, spark_session: Any
) -> None:
    store, duck, spark = _three(simulated, None)
    assert '"gpu_activity"' in store
    assert duck == store
    assert spark == store


def test_two_clusters_per_cluster_and_in_total_through_the_cli(
    two_clusters: dict[str, Path], spark_session: Any
) -> None:
    master = spark_session.sparkContext.master
    assert master.startswith("spark://127.0.0.1:")
    on_spark = data.cli(
        "report",
        "--lake",
        two_clusters["lake"],
        "--engine",
        "spark",
        "--spark-master",
        master,
        "--by",
        "cluster",
        "--json",
    )
    on_store = data.cli("report", "--db", two_clusters["db"], "--by", "cluster", "--json")
    assert on_spark == on_store
    assert '"key": "check"' in on_store and '"key": "east"' in on_store


def test_two_stores_writing_one_lake_break_down_alike_on_every_engine(
    two_clusters: dict[str, Path], spark_session: Any
) -> None:
    """Each cluster collected into a store of its own, both writing one lake (each store numbers
    its own ingests and jobs; the lake moves the second's apart): every breakdown, the job rows
    included, the same from one store holding both, from DuckDB and from Spark on the lake, but
    for the ingest ids."""
    for by in DIMENSIONS:
        store = data.without_ingest_ids(report_text(two_clusters["db"], by))
        lake = two_clusters["shared"]
        assert (
            data.without_ingest_ids(report_text(LakeSource(path=lake, engine="duckdb"), by))
            == store
        ), by
        assert (
            data.without_ingest_ids(report_text(LakeSource(path=lake, engine="spark"), by)) == store
        ), by


def test_spark_results_keep_whole_numbers_past_2_53_beside_nulls(spark_session: Any) -> None:
    """The lake's Spark backend brings results back as Arrow: a job key moved to a second
    store's range (past 2**53) stays exact in a column that also holds a null (through pandas,
    as Ibis' own backend does, it became a float, another job's key)."""
    from gpuyield.lake.spark_results import ExactSparkBackend

    key = 2**60 + 2**40 + 7
    spark_session.sql(
        f"SELECT CAST({key} AS BIGINT) AS k UNION ALL SELECT CAST(NULL AS BIGINT) AS k"
    ).createOrReplaceTempView("gy_test_keys")
    try:
        keys = ExactSparkBackend.on(spark_session).table("gy_test_keys")
        assert sorted(keys.to_pyarrow()["k"].to_pylist(), key=str) == [key, None]
    finally:
        spark_session.catalog.dropTempView("gy_test_keys")
