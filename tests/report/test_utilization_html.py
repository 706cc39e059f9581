"""The HTML report shows every gpu_activity number of the JSON, keyed to it."""

from __future__ import annotations

from pathlib import Path

from gpuyield.report.html import write_html_report
from gpuyield.report.summary import build_report
from tests.ledger.test_utilization import fixture_db
from tests.report.page import flatten, read_page


def test_activity_numbers_on_the_page_are_the_jsons(tmp_path: Path) -> None:
    db = fixture_db(tmp_path)
    data = build_report(db).to_dict()
    html = write_html_report(db, tmp_path / "report.html")
    page = read_page(html.read_text(encoding="utf-8"))
    shown = {key: value for key, value, _ in page.keyed}
    expected = {k: v for k, v in flatten(data).items() if k.startswith("gpu_activity.")}
    assert expected, "the fixture has utilization samples"
    for key, value in expected.items():
        assert key in shown, f"{key} is not on the page"
        assert shown[key] == value, key
    assert shown["subcategories.idle.allocated"] == data["subcategories"]["idle.allocated"]
