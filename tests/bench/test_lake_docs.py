"""docs/scale.md's table of Spark settings, written from recorded ``python -m bench lake --jobs N
[--spark-conf ...]`` runs (bench/lake_docs.py). The fixture is those runs, gathered (2026-12-02,
22:34-22:57 UTC), not invented numbers."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from bench import docs, lake_docs

REPO = Path(__file__).resolve().parents[2]
PAGE = REPO / "docs" / "scale.md"
FIXTURE = Path(__file__).parent / "fixtures" / "lake" / "lake_settings.json"


def _figures() -> dict[str, Any]:
    return json.loads(FIXTURE.read_text(encoding="utf-8"))


def test_the_page_holds_exactly_what_the_recorded_runs_render() -> None:
    page = PAGE.read_text(encoding="utf-8")
    figures = _figures()
    assert docs.render(page, {lake_docs.NAME: figures}) == page
    body = page.split(docs.begin_marker(lake_docs.NAME))[1].split(docs.end_marker(lake_docs.NAME))[
        0
    ]
    for run in figures["runs"]:
        spark = run["cases"][0]["spark"]
        assert f"{spark['first_report_s']:.1f} s, {spark['report_cpu_s']:.1f} s" in body
        assert f"`{run['recorded']['commit']}`" in body
        for key, value in run["spark_conf"].items():
            assert f"`{key}={value}`" in body
    assert body.count("\n| ") == 1 + len(figures["runs"])  # the head and a row per run


def test_a_run_of_both_cases_is_refused() -> None:
    run = _figures()["runs"][0]
    two = {**run, "cases": run["cases"] * 2}
    with pytest.raises(ValueError, match="--jobs N"):
        lake_docs.gather([two])


def test_a_run_whose_reports_differ_says_so(tmp_path: Path) -> None:
    run = json.loads(json.dumps(_figures()["runs"][0]))
    run["cases"][0]["same_report"] = False
    assert "**no**" in lake_docs.markdown(lake_docs.gather([run]))
    assert "none (JVM defaults)" in lake_docs.markdown(lake_docs.gather([run]))
