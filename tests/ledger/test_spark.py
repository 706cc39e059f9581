"""The same Ibis ledger on Spark: identical categories to DuckDB where capacity changes over time.

(The bundled capture, its utilization and several clusters: one report in three places,
tests/lake/test_spark.py.)

Spark reads the store's tables as Parquet (how records that outgrow one machine would arrive); the
ledger code is unchanged. It runs on the session's standalone cluster (``spark_session`` in
tests/conftest.py). Needs the `spark` extra and Java; CI installs both.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuyield.ingest.slurm import SlurmInputs, ingest_slurm
from gpuyield.ledger import compute_ledger
from gpuyield.ledger.ledger import backend_for
from gpuyield.manifest import stored_manifest
from gpuyield.store import connect

# PySpark's py4j sockets and its pandas conversion warn in ways this code cannot fix.
pytestmark = [
    pytest.mark.filterwarnings("ignore::ResourceWarning"),
    pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning"),
    pytest.mark.filterwarnings("ignore::DeprecationWarning"),
    pytest.mark.filterwarnings("ignore::FutureWarning"),
    pytest.mark.filterwarnings("ignore:.*(copy keyword|future.infer_string).*"),
]

TABLES = ("ingests", "jobs", "job_nodes", "node_events", "cluster_events", "nodes", "telemetry",
          "divergence_events", "coverage")  # fmt: skip


def _on_both(db: Path, tmp_path: Path, spark_session, **window: int):
    """The ledger of one store on DuckDB, and on Spark from the same tables as Parquet."""
    import ibis

    con = connect(db, read_only=True)
    manifest = stored_manifest(con)
    on_duckdb = compute_ledger(backend_for(con), manifest=manifest, **window)
    # The session is shared with the lake's tests: their views (a lake's utilization tables) would
    # make this ledger see samples it does not have. Only this store's tables are in view.
    for table in spark_session.catalog.listTables():
        if table.isTemporary:
            spark_session.catalog.dropTempView(table.name)
    spark = ibis.pyspark.connect(spark_session)
    for name in TABLES:
        path = tmp_path / f"{name}.parquet"
        con.execute(f"COPY {name} TO '{path}' (FORMAT parquet)")
        spark.read_parquet(str(path), table_name=name)
    con.close()
    return on_duckdb, compute_ledger(spark, manifest=manifest, **window)


@pytest.mark.slow
def test_spark_follows_capacity_over_time(tmp_path: Path, spark_session) -> None:
    # Grown, shrunk and re-sized (no inventory: each registration split over its nodes), with a
    # down event across a change: the per-node sweep's running capacity on both engines.
    from tests.ledger.timeline import HOUR_S, T0_S, Cluster, Event, Job, Registration

    cluster = Cluster(
        num_nodes=3,
        registrations=[
            Registration(0, "n[1-2]", 16),
            Registration(HOUR_S, "n[1-3]", 24),
            Registration(2 * HOUR_S, "n[1-2]", 8),
        ],
        jobs=[Job(1, 10, 500, gpus=8, nodes="n1"), Job(2, HOUR_S, HOUR_S + 900, nodes="n3"),
              Job(3, 2 * HOUR_S, 3 * HOUR_S, gpus=4, nodes="n2")],
        events=[Event("n1", HOUR_S + 1800, 2 * HOUR_S + 1800)],
    )  # fmt: skip
    files = cluster.write(tmp_path / "in")
    db = tmp_path / "store.duckdb"
    ingest_slurm(db, SlurmInputs(sacct=files["sacct"], events=files["events"]),
                 since_s=T0_S, until_s=T0_S + 4 * HOUR_S)  # fmt: skip
    on_duckdb, on_spark = _on_both(db, tmp_path, spark_session, since_s=T0_S)
    assert on_duckdb.installed_gpu_seconds == 16 * HOUR_S + 24 * HOUR_S + 8 * 2 * HOUR_S
    # n1: 8 GPUs down for 30 min, then 4 GPUs for 30 min after the re-size.
    assert on_duckdb.subcategories["down.unplanned"] == 8 * 1800 + 4 * 1800
    assert on_spark.installed_gpu_seconds == on_duckdb.installed_gpu_seconds
    assert on_spark.categories == pytest.approx(on_duckdb.categories, abs=1e-6)
    assert on_spark.subcategories == pytest.approx(on_duckdb.subcategories, abs=1e-6)
