"""serve's H100-equivalent and dollar counters, by category, GPU type and account: each sums to
the report's ``weighted`` and ``by_gpu_type`` figures (the real typed-GPU capture)."""

from __future__ import annotations

from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from gpuyield.serve.metrics import CollectionStats, render
from gpuyield.serve.snapshot import build_snapshot
from tests.ledger.test_weights_typed import typed_db  # noqa: F401 (the fixture)


def _families(db: Path, top: int) -> tuple[dict[str, list[tuple[dict[str, str], float]]], object]:
    snapshot = build_snapshot(db, top_accounts=top, with_page=False)
    text = render(snapshot, CollectionStats()).decode()
    families = {
        f.name: [(s.labels, s.value) for s in f.samples]
        for f in text_string_to_metric_families(text)
    }
    return families, snapshot.report


def test_weighted_counters_sum_to_the_report(typed_db: Path) -> None:  # noqa: F811
    families, report = _families(typed_db, top=20)
    fleet = report.fleet  # type: ignore[attr-defined]
    for name, unit in (
        ("gpuyield_h100_equiv_seconds", "h100_equiv_seconds"),
        ("gpuyield_dollars", "dollars"),
    ):
        weighted = fleet.weighted[unit]
        by_category: dict[str, float] = {}
        for labels, value in families[name]:
            by_category[labels["category"]] = by_category.get(labels["category"], 0.0) + value
        assert by_category == pytest.approx(weighted.categories, rel=1e-12, abs=1e-12)
        accounts = families[name.replace("gpuyield_", "gpuyield_account_")]
        allocated = sum(v for k, v in weighted.categories.items() if k not in ("down", "idle"))
        assert sum(v for _, v in accounts) == pytest.approx(allocated, rel=1e-12)
    by_type: dict[str, float] = {}
    for labels, value in families["gpuyield_gpu_type_gpu_seconds"]:
        by_type[labels["gpu_type"]] = by_type.get(labels["gpu_type"], 0.0) + value
    assert by_type == pytest.approx(
        {k: t.installed_gpu_seconds for k, t in fleet.by_gpu_type.items()}
    )
    assert set(by_type) == {"h100-sxm", "a100-sxm"}


def test_a_store_without_prices_exports_no_dollars(tmp_path: Path) -> None:
    from gpuyield.ingest.slurm import SlurmInputs, ingest_slurm
    from tests.ledger.test_weights_typed import TYPED, _epoch

    db = tmp_path / "t.duckdb"
    start, end = TYPED.joinpath("window.txt").read_text().split()
    inputs = SlurmInputs(
        sacct=TYPED / "sacct-X-D.psv", events=TYPED / "events.psv", nodes=TYPED / "nodes.txt"
    )
    ingest_slurm(db, inputs, since_s=_epoch(start), until_s=_epoch(end))
    families, _ = _families(db, top=5)
    assert "gpuyield_dollars" not in families and "gpuyield_account_dollars" not in families
    assert "gpuyield_h100_equiv_seconds" in families
