"""HTML = JSON at any size: every ``report --json`` figure is on the page, and a big store's page
stays small and readable.

The big store is the one ``gpuyield simulate llama3-405b`` writes (2,048 nodes, 54 days, 453
lineage jobs in some 16,000 parts): its lineage chart once drew a bar per part, 7.5 MB of SVG that
rendered as one black band. How long the page takes is a benchmark (``python -m bench
report_html``), not an assertion here.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from gpuyield.ingest.slurm import SlurmInputs, ingest_slurm
from gpuyield.report.html import write_html_report
from gpuyield.report.summary import build_report
from gpuyield.simulate.api import run_scenario
from tests.ladder.conftest import MANIFEST, WINDOW_END_S, ladder_cluster
from tests.ledger.timeline import T0_S
from tests.report.conftest import run_cli
from tests.report.page import flatten, read_page

MAX_PAGE_BYTES = 1_000_000


def _check_page(html: Path, data: dict[str, Any]) -> None:
    """Every leaf of the JSON is on the page under its key, with the same value; nothing else."""
    page = read_page(html.read_text(encoding="utf-8"))
    expected = flatten(data)
    shown = {key: value for key, value, _ in page.keyed}
    assert not sorted(set(expected) - set(shown)), "--json keys missing from the page"
    assert not sorted(set(shown) - set(expected)), "page keys --json does not have"
    wrong = [k for k, v in shown.items() if v != expected[k]]
    assert not wrong, [(k, shown[k], expected[k]) for k in wrong]


@pytest.fixture(scope="module")
def llama_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # As docs/simulate.md does it: the scenario, then its files (telemetry too) through the CLI.
    out = tmp_path_factory.mktemp("llama")
    run_scenario("llama3-405b", out / "files")
    db = out / "llama.duckdb"
    run_cli("ingest", "slurm", "--dir", str(out / "files"), "--db", str(db),
            "--since", "2024-03-01T00:00:00", "--until", "2024-04-24T00:00:00")  # fmt: skip
    return db


def test_the_16k_gpu_store_page_is_small_and_carries_every_json_figure(
    llama_store: Path, tmp_path: Path
) -> None:
    html = write_html_report(llama_store, tmp_path / "report.html")
    data = build_report(llama_store).to_dict()
    assert html.stat().st_size < MAX_PAGE_BYTES
    _check_page(html, data)
    text = html.read_text(encoding="utf-8")
    lineage = re.search(r'data-chart="lineage".*?</figure>', text, re.S)
    assert lineage is not None
    # Binned: a few paths per lane and category, plus the markers, whatever the job count.
    assert lineage.group(0).count("<path") < 500
    assert len(lineage.group(0)) < 300_000


def test_a_small_lineage_is_still_drawn_job_by_job(tmp_path: Path) -> None:
    from tests.report.conftest import EXAMPLES, REGISTERED, UNTIL

    db = tmp_path / "sample.duckdb"
    ingest_slurm(
        db,
        SlurmInputs(
            sacct=EXAMPLES / "sacct-X-D-wide.psv",
            events=EXAMPLES / "sacctmgr-event-format.psv",
            nodes=EXAMPLES / "scontrol-show-nodes-oneliner.txt",
            manifest=EXAMPLES / "manifest.toml",
        ),
        since_s=_epoch(REGISTERED),
        until_s=_epoch(UNTIL),
    )
    from gpuyield.report.chart_lineage import _MAX_LINEAGE_BARS, draw_lineage
    from gpuyield.report.figures import build_figures

    figures = build_figures(db)
    parts = sum(len(j.parts) for x in figures.lineages for j in x.jobs)
    assert 0 < parts <= _MAX_LINEAGE_BARS
    title = draw_lineage(figures).axes[0].get_title(loc="left")
    assert "columns of" not in title  # bars, not bins


def test_the_ladder_waste_is_on_the_page_figure_by_figure(tmp_path: Path) -> None:
    files = ladder_cluster().write(tmp_path / "in")
    manifest = tmp_path / "in" / "manifest.toml"
    manifest.write_text(MANIFEST)
    db = tmp_path / "db.duckdb"
    inputs = SlurmInputs(
        sacct=files["sacct"], events=files["events"], nodes=files["nodes"], manifest=manifest
    )
    ingest_slurm(db, inputs, until_s=T0_S + WINDOW_END_S)
    data = build_report(db).to_dict()
    assert data["waste_in_skipped_rungs"]["skipped"]["runs"] > 0
    html = write_html_report(db, tmp_path / "report.html")
    _check_page(html, data)
    page = read_page(html.read_text(encoding="utf-8"))
    keys = {key for key, _, _ in page.keyed}
    assert "waste_in_skipped_rungs.skipped.wasted.failed" in keys
    assert "waste_in_skipped_rungs.rungs.2" in keys


def _epoch(text: str) -> int:
    from datetime import UTC, datetime

    return int(datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp())
