"""Golden outputs of the bundled sample: report JSON, every breakdown, the HTML page's structure.

Each must stay byte-for-byte the same across refactors; `pytest --regen-golden` rewrites them when a
change is meant (then review `git diff tests/golden`).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.report.conftest import Written, run_cli

BREAKDOWNS = ("account", "user", "partition", "run", "job", "day", "hour")
# Charts are matplotlib SVG: their glyph paths change with matplotlib's version, not with gpuyield.
_SVG = re.compile(r"<svg\b.*?</svg>", re.S)


def html_structure(page: str) -> str:
    """The page with each chart's SVG body cut out: every tag, attribute, number and word kept."""
    return _SVG.sub("<svg><!-- chart --></svg>", page)


def test_report_json(sample_db: Path, golden: Callable[[str, str], None]) -> None:
    golden("sample-report.json", run_cli("report", "--db", str(sample_db), "--json"))


@pytest.mark.parametrize("by", BREAKDOWNS)
def test_breakdown_json(sample_db: Path, by: str, golden: Callable[[str, str], None]) -> None:
    out = run_cli("report", "--db", str(sample_db), "--json", "--by", by)
    golden(f"sample-breakdown-{by}.json", out)


@pytest.mark.parametrize("which", ["sample_report", "empty_report", "idle_report"])
def test_html_structure(
    which: str, request: pytest.FixtureRequest, golden: Callable[[str, str], None]
) -> None:
    written: Written = request.getfixturevalue(which)
    page = written.html.read_text(encoding="utf-8")
    assert page.count("<svg") == html_structure(page).count("<svg")
    golden(f"{which.removesuffix('_report')}-report.html", html_structure(page))
