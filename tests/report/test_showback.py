"""The HTML page's showback (section 7): dollars by account, user and partition, against the raw
capture of the typed Slurm lab, and the same numbers as `report --by X --weight dollars`."""

from __future__ import annotations

import html
from pathlib import Path

import pytest

from gpuyield.report.figures import build_figures
from gpuyield.report.html import write_html_report
from gpuyield.report.summary import build_report_with_breakdown
from gpuyield.report.weights import in_unit
from tests.ledger.test_weights_typed import (
    PRICES,
    expected_by_type,
    typed_db,  # noqa: F401 (the fixture)
)

# Every job of the capture is account physics, user root, partition gpu (sacct-X-D.psv).
GROUP = {"account": "physics", "user": "root", "partition": "gpu"}
NOT_ALLOCATED = "(not allocated)"


def _expected_rows() -> dict[str, dict[str, float]]:
    """Dollars per category of the one group and of the unallocated time, from the raw files:
    each type's GPU-seconds (sacct AllocTRES over scontrol's Gres) x its price / 3600."""
    group: dict[str, float] = {}
    idle = 0.0
    for gpu_type, cats in expected_by_type().items():
        rate = PRICES[gpu_type] / 3600
        idle += cats["idle"] * rate
        for category, value in cats.items():
            if category not in ("installed", "idle"):
                group[category] = group.get(category, 0.0) + value * rate
    return {"group": group, NOT_ALLOCATED: {"idle": idle}}


def test_showback_is_dollars_by_account_user_and_partition(typed_db: Path) -> None:  # noqa: F811
    figures = build_figures(typed_db)
    dollars = figures.report.fleet.weighted["dollars"]  # type: ignore[union-attr]
    assert dollars is not None
    expected = _expected_rows()
    assert [(c.by, c.unit) for c in figures.showback] == [
        (by, "dollars") for by in ("account", "user", "partition")
    ]
    for cut in figures.showback:
        rows = {r.key: r for r in cut.rows}
        assert set(rows) == {GROUP[cut.by], NOT_ALLOCATED}
        # Conserved: the rows add up to the installed dollars of the weighted ledger.
        total = sum(r.total_gpu_seconds for r in cut.rows)
        assert total == pytest.approx(dollars.installed, rel=1e-12)
        for key, want in (("group", GROUP[cut.by]), (NOT_ALLOCATED, NOT_ALLOCATED)):
            got = rows[want].categories
            for category, value in got.items():
                assert value == pytest.approx(expected[key].get(category, 0.0), abs=1e-12), (
                    cut.by,
                    want,
                    category,
                )
        # The page's table is the terminal's `--by X --weight dollars`.
        cli = build_report_with_breakdown(typed_db, by=cut.by, weight="dollars", top=0).breakdown
        assert cli is not None
        assert {r.key: r.categories for r in cli.rows} == {r.key: r.categories for r in cut.rows}


def test_the_page_shows_each_showback_table(typed_db: Path, tmp_path: Path) -> None:  # noqa: F811
    page = html.unescape(write_html_report(typed_db, tmp_path / "r.html").read_text())
    figures = build_figures(typed_db)
    for cut in figures.showback:
        assert f"Showback: dollars by {cut.by}" in page
        for row in cut.rows:
            assert row.key in page
            assert in_unit(row.total_gpu_seconds, "dollars") in page
