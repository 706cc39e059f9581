"""Shared fixtures: the real Slurm capture, an in-memory store, golden outputs; test-wide settings."""

from __future__ import annotations

import difflib
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import duckdb
import pytest
from hypothesis import HealthCheck, settings

from gpuyield import store

# One Hypothesis profile for every property test: no deadlines (CI machines are shared and loaded, so
# a test must never depend on machine speed) and CI-sized example counts. Tests that need more or
# fewer examples say so with their own @settings(max_examples=...). HYPOTHESIS_PROFILE=thorough runs
# ten times as many examples, for a local hunt.
settings.register_profile(
    "ci",
    deadline=None,
    max_examples=50,
    suppress_health_check=[HealthCheck.too_slow],
    print_blob=True,
)
settings.register_profile("thorough", parent=settings.get_profile("ci"), max_examples=500)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"
SLURM_LOCAL = SHARED / "data" / "slurm-local"
SAMPLE = REPO / "examples" / "slurm-lab"
GOLDEN = REPO / "tests" / "golden"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--regen-golden",
        action="store_true",
        default=False,
        help="Rewrite the golden outputs in tests/golden/ from this tree instead of comparing "
        "(then review `git diff tests/golden` before committing).",
    )


@pytest.fixture
def golden(request: pytest.FixtureRequest) -> Callable[[str, str], None]:
    """``golden(name, text)``: fail unless ``text`` equals tests/golden/NAME byte for byte.

    The checkout's own path reads ``<repo>`` (outputs name their input files), so a clone anywhere
    compares equal. With ``pytest --regen-golden`` the file is rewritten instead (the test passes).
    """
    regen = bool(request.config.getoption("--regen-golden"))

    def check(name: str, text: str) -> None:
        text = text.replace(str(REPO), "<repo>")
        path = GOLDEN / name
        if regen:
            path.write_text(text, encoding="utf-8")
            return
        assert path.exists(), f"no golden {path}: run pytest --regen-golden once and commit it"
        want = path.read_text(encoding="utf-8")
        if text != want:
            diff = difflib.unified_diff(
                want.splitlines(), text.splitlines(), f"golden/{name}", "now", lineterm="", n=2
            )
            shown = "\n".join(list(diff)[:60])
            pytest.fail(
                f"output differs from tests/golden/{name} (if intended: pytest --regen-golden, "
                f"then review git diff):\n{shown}"
            )

    return check


@pytest.fixture
def fresh_db() -> Iterator[duckdb.DuckDBPyConnection]:
    """An empty in-memory store with the schema."""
    con = store.connect(None)
    yield con
    con.close()


@pytest.fixture
def slurm_local() -> Path:
    """The real one-hour capture from shared/data/slurm-local (read-only)."""
    if not SLURM_LOCAL.is_dir():
        pytest.skip("shared/data/slurm-local is not next to the repo")
    return SLURM_LOCAL


def _unavailable(reason: str) -> None:
    # CI installs what the real components need: there a missing one is a failure, not a skip.
    if os.environ.get("CI") == "true":
        pytest.fail(f"CI=true but {reason}")
    pytest.skip(reason)


@pytest.fixture(scope="session")
def spark_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A Spark standalone master and worker on loopback, once per test session
    (tests/spark_cluster.py); stopped at the end."""
    from tests import spark_cluster

    reason = spark_cluster.why_unavailable()
    if reason is not None:
        _unavailable(reason)
    with spark_cluster.running_cluster(tmp_path_factory.mktemp("spark-cluster")) as cluster:
        yield cluster


@pytest.fixture(scope="session")
def spark_session(spark_cluster: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """The tests' Spark driver on ``spark_cluster`` (the ledger's Spark paths run on it)."""
    from tests.spark_cluster import session_for

    session = session_for(spark_cluster, tmp_path_factory.mktemp("spark-driver"))
    yield session
    session.stop()
