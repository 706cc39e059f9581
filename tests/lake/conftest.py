"""Session fixtures: each input set ingested once into a store and, with ``--lake``, a lake."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.lake import data
from tests.lake.data import Ingested


@pytest.fixture(scope="session")
def sample(tmp_path_factory: pytest.TempPathFactory) -> Ingested:
    """The bundled capture (examples/slurm-lab) in a store and a lake."""
    return data.ingest_sample(tmp_path_factory.mktemp("lake-sample"))


@pytest.fixture(scope="session")
def ladder(tmp_path_factory: pytest.TempPathFactory) -> Ingested:
    """The real Slurm lab's ladder capture (two run families, examples/ladder/lab-capture)."""
    return data.ingest_ladder(tmp_path_factory.mktemp("lake-ladder"))


@pytest.fixture(scope="session")
def simulated(tmp_path_factory: pytest.TempPathFactory) -> Ingested:
    """The simulator's cluster with utilization samples, in a store and a lake."""
    where = tmp_path_factory.mktemp("lake-simulated")
    out = data.simulate(where / "sim", seed=1)
    db, lake = where / "sim.duckdb", where / "sim-lake"
    data.ingest_simulated(out, db, lake)
    return Ingested(db=db, lake=lake)


@pytest.fixture(scope="session")
def two_clusters(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Two simulated clusters (``check`` and ``east``): ``db`` holds both, ``lake`` is its lake;
    ``check.duckdb`` and ``east.duckdb`` hold one each, both writing the lake ``shared``."""
    where = tmp_path_factory.mktemp("lake-two")
    check = data.simulate(where / "check", seed=1)
    east = data.simulate(where / "east", seed=2, cluster="east")
    paths = {"db": where / "two.duckdb", "lake": where / "two-lake", "shared": where / "shared"}
    for out, cluster in ((check, None), (east, "east")):
        data.ingest_simulated(out, paths["db"], paths["lake"], cluster=cluster)
        own = where / f"{out.name}.duckdb"
        data.ingest_simulated(out, own, paths["shared"], cluster=cluster)
        paths[out.name] = own
    return paths
