"""The preflight benchmark runs end to end on a small store (its figures are not asserted)."""

from __future__ import annotations

from pathlib import Path

from bench.ladder import build_store
from bench.preflight import bench_store

from gpuyield import rungs, store


def test_preflight_bench_small(tmp_path: Path) -> None:
    db = tmp_path / "store.duckdb"
    build_store(db, 20_000)
    con = store.connect(db)
    rungs.refresh_summary(con)
    con.close()
    figures = bench_store(db, 20_000, repeats=1)
    # bench_store asserts that the fast path and the full CLI print the same and exit the same.
    refused, allowed = figures["refused_by_family"], figures["allowed_by_run"]
    assert refused["fast"]["status"] == 3 and refused["verdict"].startswith(
        "refused: family fam1500 on 4096 GPUs"
    )
    assert allowed["fast"]["status"] == 0 and allowed["verdict"].startswith("ok: family fam0003")
    assert refused["first_after_a_change"]["status"] == refused["baseline_full_cli"]["status"] == 3
    timed = figures["importtime_fast"]
    assert timed["modules"] > 10 and len(timed["slowest"]) == 12
    assert not any(
        row["module"].startswith(("typer", "rich", "pydantic")) for row in timed["slowest"]
    )
