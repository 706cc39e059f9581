"""The exposition itself: conventions, the (others) row, nothing dropped between categories."""

from __future__ import annotations

import json
import re

from prometheus_client.parser import text_string_to_metric_families

from gpuyield.report.summary import YieldReport
from gpuyield.serve.metrics import UNATTRIBUTED, CollectionStats, category_series, render
from gpuyield.serve.snapshot import build_snapshot
from tests.serve.conftest import Store, report_cli


def _report(categories: dict[str, float], subcategories: dict[str, float]) -> YieldReport:
    return YieldReport(
        window_start_s=0, window_end_s=10, installed_gpu_seconds=sum(categories.values()),
        categories=categories, subcategories=subcategories, rejected_rows=0,
        jobs_without_gpu_count=0, figures={},
    )  # fmt: skip


def test_what_subcategories_leave_out_gets_its_own_series() -> None:
    categories = {c: 0.0 for c in ("down", "idle", "failed", "cancelled", "diverged",
                                   "experiment", "overhead", "released")}  # fmt: skip
    categories.update(failed=10.0, idle=5.0, down=3.0)
    series = category_series(_report(categories, {"failed.oom": 4.0, "down.planned": 3.0}))
    by_category: dict[str, float] = {}
    for category, _, value in series:
        by_category[category] = by_category.get(category, 0.0) + value
    assert by_category == categories
    assert ("failed", UNATTRIBUTED, 6.0) in series
    assert not any(c == "down" and s == UNATTRIBUTED for c, s, _ in series)
    assert ("idle", "", 5.0) in series


def test_without_a_snapshot_only_the_process_speaks() -> None:
    text = render(None, CollectionStats(collections_total=3, collection_errors_total=1)).decode()
    names = {s.name for f in text_string_to_metric_families(text) for s in f.samples}
    assert "gpuyield_collection_errors_total" in names
    assert not any(n.startswith("gpuyield_gpu_seconds") for n in names)


def test_names_follow_prometheus_conventions_and_accounts_add_up(sample_store: Store) -> None:
    snapshot = build_snapshot(sample_store.db, top_accounts=1, with_page=False)
    text = render(snapshot, CollectionStats()).decode()
    families = list(text_string_to_metric_families(text))
    for family in families:
        assert re.fullmatch(r"gpuyield_[a-z0-9_]+", family.name), family.name
        assert family.documentation, family.name
        if family.type == "counter":
            assert all(s.name.endswith("_total") for s in family.samples), family.name
        if family.name.endswith("_ratio"):
            assert all(0 <= s.value <= 1 for s in family.samples), family.name
    accounts = next(f for f in families if f.name == "gpuyield_account_gpu_seconds")
    shown = {s.labels["account"] for s in accounts.samples}
    assert "(others)" in shown and len(shown) == 2
    report = json.loads(report_cli(sample_store.db))
    allocated = sum(v for k, v in report["categories"].items() if k not in ("down", "idle"))
    assert sum(s.value for s in accounts.samples) == allocated
    assert snapshot.report_json == report_cli(sample_store.db).rstrip("\n")
