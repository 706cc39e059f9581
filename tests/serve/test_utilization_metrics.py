"""`gpuyield serve` with utilization samples: allocated-but-idle GPUs have a gauge of their own and
stay allocated in the others (the ledger moves them into ``idle.allocated``)."""

from __future__ import annotations

from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from gpuyield.serve.metrics import CollectionStats, render
from gpuyield.serve.snapshot import build_snapshot
from tests.ledger.test_utilization import fixture_db


def test_allocated_idle_gauge_beside_allocated_and_idle(tmp_path: Path) -> None:
    snapshot = build_snapshot(fixture_db(tmp_path), top_accounts=3, with_page=False)
    text = render(snapshot, CollectionStats()).decode()
    gauges = {
        s.name: s.value
        for f in text_string_to_metric_families(text)
        for s in f.samples
        if s.name.endswith("_gpus")
    }
    now = snapshot.now
    assert now.activity is not None
    seconds = max(now.window_end_s - now.window_start_s, 1)
    idle_allocated = now.subcategories.get("idle.allocated", 0.0)
    assert gauges["gpuyield_allocated_idle_gpus"] == idle_allocated / seconds
    assert gauges["gpuyield_idle_gpus"] == (now.categories["idle"] - idle_allocated) / seconds
    held = sum(v for k, v in now.categories.items() if k not in ("down", "idle")) + idle_allocated
    assert gauges["gpuyield_allocated_gpus"] == held / seconds
    assert gauges["gpuyield_allocated_idle_gpus"] <= gauges["gpuyield_allocated_gpus"]
    parts = ("gpuyield_idle_gpus", "gpuyield_down_gpus", "gpuyield_allocated_gpus")
    assert abs(sum(gauges[p] for p in parts) - gauges["gpuyield_installed_gpus"]) < 1e-6
