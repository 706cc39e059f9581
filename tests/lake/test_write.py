"""Writing a lake: Hive-style partitions, files named by their content, a manifest that says what
is there, idempotent syncs, and only what changed written again."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import duckdb
import pyarrow.parquet as pq
import pytest

from gpuyield import store
from gpuyield.errors import InputError
from gpuyield.lake import export_lake, layout, sync_store
from gpuyield.lake.layout import read_manifests
from tests.lake import data
from tests.lake.data import Ingested


def _files(lake: Path) -> set[str]:
    return {str(p.relative_to(lake)) for p in lake.rglob("*.parquet")}


def test_partitions_are_hive_style_by_table_cluster_and_day(sample: Ingested) -> None:
    (manifest,) = read_manifests(sample.lake)
    jobs = [f for f in manifest.files if f.table == "jobs"]
    assert [f.path.rsplit("/", 1)[0] for f in jobs] == ["jobs/cluster=lab/day=2026-11-30"]
    # Rows without a cluster (an ingest's provenance) go where Hive and Spark put a null.
    ingests = {f.path.split("/")[1] for f in manifest.files if f.table == "ingests"}
    assert ingests == {"cluster=__HIVE_DEFAULT_PARTITION__"}
    for item in manifest.files:
        path = sample.lake / item.path
        assert path.name == layout.file_name(manifest.writer, item.sha256)
        assert hashlib.sha256(path.read_bytes()).hexdigest() == item.sha256
        assert pq.read_metadata(path).num_rows == item.rows


def test_every_table_row_is_in_the_lake_once(sample: Ingested) -> None:
    con = store.connect(sample.db, read_only=True)
    (manifest,) = read_manifests(sample.lake)
    try:
        for table in layout.store_tables():
            held = con.execute(f"SELECT count(*) FROM {table}").fetchall()[0][0]
            in_lake = sum(f.rows for f in manifest.files if f.table == table)
            assert in_lake == held, table
            if held:
                paths = [str(sample.lake / f.path) for f in manifest.files if f.table == table]
                # Same rows: nothing in the store that is not in the lake, and the reverse.
                both = con.execute(
                    f"""SELECT count(*) FROM (SELECT * FROM {table} EXCEPT ALL
                        SELECT * FROM read_parquet(?, hive_partitioning = false))""",
                    [paths],
                ).fetchall()[0][0]
                assert both == 0, table
    finally:
        con.close()


def test_manifest_says_which_ingests_which_window_which_schema(sample: Ingested) -> None:
    (manifest,) = read_manifests(sample.lake)
    assert manifest.schema_version == store.SCHEMA_VERSION
    assert manifest.clusters == ("lab",)
    con = store.connect(sample.db, read_only=True)
    try:
        ingests = con.execute("SELECT ingest_id, path, sha256 FROM ingests ORDER BY 1").fetchall()
    finally:
        con.close()
    assert [(i.ingest_id, i.path, i.sha256) for i in manifest.ingests] == ingests
    assert [(c.cluster, c.start_s, c.end_s) for c in manifest.coverage] == [
        ("lab", 1796032800, 1796036400)  # the ingest's --since 10:00 and --until 11:00 (UTC)
    ]
    raw = json.loads(layout.manifest_path(sample.lake, manifest.writer).read_text())
    assert raw["format"] == "gpuyield-lake" and raw["format_version"] == 1


def test_export_again_writes_nothing(sample: Ingested, tmp_path: Path) -> None:
    lake = tmp_path / "lake"
    shutil.copytree(sample.lake, lake)
    before = {p: (lake / p).stat().st_mtime_ns for p in _files(lake)}
    synced = export_lake(sample.db, lake)
    assert (synced.files_written, synced.files_retired) == (0, 0)
    assert synced.files_unchanged == len(before)
    assert {p: (lake / p).stat().st_mtime_ns for p in _files(lake)} == before


def test_a_new_ingest_rewrites_only_the_partitions_it_changed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Every table takes the large tables' path: only partitions new ingests touched are compared.
    monkeypatch.setattr(layout, "INCREMENTAL_FROM_ROWS", 0)
    db, lake = tmp_path / "db.duckdb", tmp_path / "lake"
    out = data.simulate(tmp_path / "sim", seed=3)
    data.cli("ingest", "slurm", "--dir", out, "--db", db, "--lake", lake, "-q")
    (first,) = read_manifests(lake)
    data.cli(
        "ingest", "utilization", "--prom-json", out / "utilization.json", "--db", db, "--lake", lake
    )
    (second,) = read_manifests(lake)
    new = {f.path for f in second.files} - {f.path for f in first.files}
    tables = {f.table for f in second.files if f.path in new}
    # The samples, the ingests table that names their file and the attribution the ingest
    # updated in place (compared whole: its rows name no ingest); no job or event rewritten.
    assert {"gpu_series", "ingests", "sample_groups"} <= tables
    assert not tables & {"jobs", "job_nodes", "node_events", "nodes"}
    assert second.generation == first.generation + 1
    assert set(second.retired) <= {f.path for f in first.files}
    # A retired file stays for readers of the previous manifest until the next sync.
    assert all((lake / p).exists() for p in second.retired)
    # Small tables are compared whole: a row changed without a new ingest is found too.
    monkeypatch.setattr(layout, "INCREMENTAL_FROM_ROWS", 1_000_000)
    con = store.connect(db)
    con.execute("UPDATE nodes SET partitions = 'changed' WHERE node = 'n01'")
    con.close()
    assert sync_store(db, lake).files_written == 1
    assert not any((lake / p).exists() for p in second.retired)


def test_a_failed_sync_leaves_the_previous_manifest_whole(
    sample: Ingested, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lake = tmp_path / "lake"
    shutil.copytree(sample.lake, lake)
    before = layout.manifest_path(lake, read_manifests(lake)[0].writer).read_bytes()
    db = tmp_path / "db.duckdb"
    shutil.copyfile(sample.db, db)
    con = store.connect(db)
    con.execute("UPDATE jobs SET account = 'moved'")
    con.close()
    from gpuyield.lake import write

    def broken(*args: object, **kwargs: object) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(write.layout, "write_manifest", broken)
    with pytest.raises(OSError):
        export_lake(db, lake)
    (manifest,) = read_manifests(lake)
    assert layout.manifest_path(lake, manifest.writer).read_bytes() == before
    assert all((lake / f.path).is_file() for f in manifest.files)
    assert not list((lake / layout.META_DIR).glob("tmp-*")), "staging files left behind"


def test_two_stores_of_one_cluster_cannot_share_a_lake(sample: Ingested, tmp_path: Path) -> None:
    lake = tmp_path / "lake"
    shutil.copytree(sample.lake, lake)
    other = tmp_path / "other.duckdb"
    data.cli(*data.sample_args(other))
    with pytest.raises(InputError, match="cluster 'lab' is already in the lake"):
        export_lake(other, lake)


def test_stores_of_two_clusters_share_a_lake_with_ids_apart(two_clusters: dict[str, Path]) -> None:
    writers = read_manifests(two_clusters["shared"])
    assert [w.index for w in writers] == [0, 1]
    assert sorted(c for w in writers for c in w.clusters) == ["check", "east"]
    from gpuyield.lake.read import duckdb_lake

    with duckdb_lake(two_clusters["shared"]) as con:
        ids = con.execute("SELECT ingest_id FROM ingests ORDER BY 1").fetchall()
        keys = con.execute("SELECT count(*), count(DISTINCT job_key) FROM jobs").fetchall()[0]
    assert [i for (i,) in ids][-1] > layout.INGEST_ID_STRIDE
    assert keys[0] == keys[1], "job keys of the two stores collide"


def test_a_lake_of_another_schema_version_is_refused(sample: Ingested, tmp_path: Path) -> None:
    lake = tmp_path / "lake"
    shutil.copytree(sample.lake, lake)
    path = next(layout.writers_dir(lake).glob("*.json"))
    document = json.loads(path.read_text())
    document["schema_version"] = store.SCHEMA_VERSION + 1
    path.write_text(json.dumps(document))
    with pytest.raises(InputError, match="schema version"):
        read_manifests(lake)


def test_no_lake_at_the_path_says_how_to_make_one(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="no lake") as raised:
        read_manifests(tmp_path / "missing")
    assert raised.value.hint is not None and "lake export" in raised.value.hint


def test_the_writer_identity_is_kept_in_the_store(sample: Ingested) -> None:
    con = duckdb.connect(str(sample.db), read_only=True)
    try:
        (writer,) = con.execute("SELECT value FROM meta WHERE key = 'lake_writer_id'").fetchone()
    finally:
        con.close()
    assert read_manifests(sample.lake)[0].writer == writer
