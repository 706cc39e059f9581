"""Fixtures of the hostile-input tests: the good cluster's store, copied for each test."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpuyield.cli import _common
from tests.hostile.inputs import base_files, ingest, write_files


@pytest.fixture(autouse=True)
def _wide_console(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Messages on one line: Rich would wrap them at 80 columns, inside a path.

    The private ``_width`` rather than the ``width`` property: undoing a patch of the property sets
    it to the width read at patch time (80 off a terminal), which then stuck for every later test
    and ignored their ``COLUMNS`` (a table cropped in CI's order); ``_width`` goes back to None.
    """
    monkeypatch.setattr(_common.err_console, "_width", 100_000)
    monkeypatch.setattr(_common.console, "_width", 100_000)
    yield


@pytest.fixture(scope="session")
def _base_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The good cluster ingested once; each test gets a copy (an ingest costs a second)."""
    directory = tmp_path_factory.mktemp("base")
    db = directory / "store.duckdb"
    outcome = ingest(db, write_files(directory, dict(base_files()), "base"))
    assert outcome.exit_code == 0, outcome.output
    return db


@pytest.fixture
def base_db(_base_template: Path, tmp_path: Path) -> Path:
    db = tmp_path / "store.duckdb"
    shutil.copyfile(_base_template, db)
    return db
