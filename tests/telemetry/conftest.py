"""Shared fixtures: the real Megatron loss excerpts."""

from __future__ import annotations

import pytest

from tests.telemetry.excerpts import EXCERPTS, ExcerptLine, load_excerpts


@pytest.fixture(scope="session")
def excerpts() -> list[ExcerptLine]:
    if not EXCERPTS.exists():
        pytest.fail(f"real data missing: {EXCERPTS}")
    return load_excerpts()
