"""The report in a real browser: headless Chromium, network off, every chart laid out, no errors."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from gpuyield.report.charts import CHART_IDS
from tests.report.browser import find_browser, visit
from tests.report.conftest import Written
from tests.report.page import flatten, read_page

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def browser() -> str:
    path = find_browser()
    if path is None:
        # CI installs Chromium (.ci/run): there a missing browser is a failure, elsewhere a skip.
        if os.environ.get("CI") == "true":
            pytest.fail("CI=true but chromium is not installed")
        pytest.skip("chromium is not installed (apt-get install chromium)")
    return path


def test_harness_sees_console_errors_failed_loads_and_network(browser: str, tmp_path: Path) -> None:
    """The checks below mean something only if a broken page fails them."""
    bad = tmp_path / "bad.html"
    bad.write_text('<!DOCTYPE html><html><body><script>console.error("boom")</script>'
                   '<img src="missing.png"><img src="https://example.com/x.png"></body></html>',
                   encoding="utf-8")  # fmt: skip
    seen = visit(browser, bad)
    assert any("boom" in e for e in seen.errors)
    assert any("missing.png" in e for e in seen.errors)
    assert any("example.com" in e for e in seen.errors)
    assert "https://example.com/x.png" in seen.requests
    assert seen.charts == []


@pytest.mark.parametrize("which", ["sample_report", "empty_report", "idle_report"])
def test_every_chart_renders_without_errors_offline(
    which: str, browser: str, request: pytest.FixtureRequest
) -> None:
    written: Written = request.getfixturevalue(which)
    seen = visit(browser, written.html)
    assert seen.errors == []
    assert seen.requests == [written.html.resolve().as_uri()], "the page fetched something"
    assert [c["chart"] for c in seen.charts] == list(CHART_IDS)
    for chart in seen.charts:
        assert chart["svgs"] == 1, chart
        assert chart["width"] > 300 and chart["height"] > 150, f"not laid out: {chart}"
        assert chart["paths"] > 20, f"empty drawing: {chart}"
    # The DOM the browser built still carries the JSON's numbers.
    dumped = read_page(seen.dom)
    assert dumped.charts == {chart: 1 for chart in CHART_IDS}
    expected = flatten(written.json)
    assert {k: v for k, v, _ in dumped.keyed} == expected
