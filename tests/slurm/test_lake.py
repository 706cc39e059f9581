"""The lab's collections into a lake, reported on the Spark cluster (issue 29's "Done when").

Every ``gpuyield collect`` of the session (tests/slurm/collector.py) also wrote the store into a
lake (``--lake``). With the session's manifest ingested into both, the lake reported on the
session's Spark standalone cluster is the store's report, byte for byte.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from gpuyield.lake.check import check_lake
from tests.lake.data import cli
from tests.slurm.conftest import LabRun, gpuyield

pytestmark = [
    pytest.mark.slurm,
    pytest.mark.slow,
    # PySpark's py4j sockets and its pandas conversion warn in ways this code cannot fix.
    pytest.mark.filterwarnings("ignore::ResourceWarning"),
    pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning"),
    pytest.mark.filterwarnings("ignore::DeprecationWarning"),
    pytest.mark.filterwarnings("ignore::FutureWarning"),
    pytest.mark.filterwarnings("ignore:.*(copy keyword|future.infer_string).*"),
]


def test_every_collection_wrote_the_lake(lab_run: LabRun) -> None:
    collected = lab_run.collected
    assert collected is not None
    done = [r.json() for r in collected.runs if r.rc == 0]
    assert done and all("lake" in r for r in done)
    # Later collections rewrote what changed and kept the rest (the inventory, the registration).
    assert any(r["lake"]["files_written"] and r["lake"]["files_unchanged"] for r in done[1:])
    # The window's last collection run again added nothing to the store, and wrote nothing.
    assert collected.again is not None and collected.again.json()["lake"]["files_written"] == 0
    assert check_lake(collected.lake).ok


def test_the_collected_lake_on_spark_is_the_collected_store(
    lab_run: LabRun, spark_session: Any, tmp_path: Path
) -> None:
    collected = lab_run.collected
    assert collected is not None
    db, lake = tmp_path / "collected.duckdb", tmp_path / "lake"
    shutil.copyfile(collected.db, db)
    shutil.copytree(collected.lake, lake)
    gpuyield("ingest", "slurm", "--db", db, "--manifest", lab_run.manifest, "--lake", lake)
    on_store = gpuyield("report", "--db", db, "--by", "job", "--json")
    on_spark = cli(
        "report",
        "--lake",
        lake,
        "--spark-master",
        spark_session.sparkContext.master,
        "--by",
        "job",
        "--json",
    )
    assert on_spark == on_store
    assert '"released"' in on_store and "sacct" in on_store
