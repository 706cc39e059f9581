"""`/` in headless Chromium: the HTML report of the last 7 days, no console errors, nothing fetched."""

from __future__ import annotations

import json
import os

import pytest

from gpuyield.report.charts import CHART_IDS
from gpuyield.times import iso_utc
from tests.report.browser import find_browser, visit_url
from tests.report.page import flatten, read_page
from tests.serve.conftest import Server, get, report_cli

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def browser() -> str:
    path = find_browser()
    if path is None:
        if os.environ.get("CI") == "true":
            pytest.fail("CI=true but chromium is not installed")
        pytest.skip("chromium is not installed (apt-get install chromium)")
    return path


def test_page_renders_in_chromium_without_errors(browser: str, sim_server: Server) -> None:
    url = sim_server.base + "/"
    seen = visit_url(browser, url)
    assert seen.errors == []
    assert seen.requests == [url], "the page fetched something"
    assert [c["chart"] for c in seen.charts] == list(CHART_IDS)
    for chart in seen.charts:
        assert chart["width"] > 300 and chart["height"] > 150, f"not laid out: {chart}"
        assert chart["paths"] > 20, f"empty drawing: {chart}"
    # The page is the last 7 days (here: all three days of the simulated capture), and its numbers
    # are `report --json`'s for that window.
    report = json.loads(report_cli(sim_server.db))
    end = report["window"]["end"].removesuffix("Z")
    start_s = max(_epoch(report["window"]["start"]), _epoch(end) - 7 * 86400)
    week = json.loads(report_cli(sim_server.db, "--since", iso_utc(start_s)[:-1], "--until", end))
    assert {k: v for k, v, _ in read_page(seen.dom).keyed} == flatten(week)


def test_page_headers_forbid_scripts_and_framing(sim_server: Server) -> None:
    reply = get(sim_server.base + "/")
    assert reply.status == 200
    policy = reply.headers["content-security-policy"]
    assert "default-src 'none'" in policy and "frame-ancestors 'none'" in policy
    assert reply.headers["content-type"].startswith("text/html")


def _epoch(text: str) -> int:
    from datetime import UTC, datetime

    value = datetime.fromisoformat(text.replace("Z", "+00:00"))
    return int((value if value.tzinfo else value.replace(tzinfo=UTC)).timestamp())
