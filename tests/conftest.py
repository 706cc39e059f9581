"""Shared fixtures: the real Slurm capture, an in-memory store, builders for small timelines."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import duckdb
import pytest

from gpuyield import store

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO.parent / "shared"
SLURM_LOCAL = SHARED / "data" / "slurm-local"
SAMPLE = REPO / "examples" / "slurm-lab"


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
