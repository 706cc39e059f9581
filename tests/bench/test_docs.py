"""docs/benchmarks.md's tables written from the benchmarks' output (bench/docs.py).

The fixtures in ``fixtures/docs/`` are recorded outputs (``python -m bench NAME --quick``, copied
from ``bench/out/``), not invented numbers.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from bench import docs

REPO = Path(__file__).resolve().parents[2]
PAGE = REPO / "docs" / "benchmarks.md"
FIXTURES = Path(__file__).parent / "fixtures" / "docs"
RECORDED = sorted(p.stem for p in FIXTURES.glob("*.json"))


def _fixture(name: str) -> dict[str, Any]:
    return json.loads((FIXTURES / f"{name}.json").read_text(encoding="utf-8"))


def _outside(text: str, name: str) -> tuple[str, str]:
    """What lies before ``name``'s begin marker and after its end marker."""
    head, rest = text.split(docs.begin_marker(name))
    return head, rest.split(docs.end_marker(name))[1]


def _between(text: str, name: str) -> str:
    return text.split(docs.begin_marker(name))[1].split(docs.end_marker(name))[0]


# Figures each table must show, read from the fixture (so a renderer that drops or mangles one
# fails).
def _ledger(f: dict[str, Any]) -> list[str]:
    size = f["sizes"][0]
    return [
        f"**{size['ingest_to_into_file']:.2f}x**",
        f"{size['ingest_cpu_to_into_file']:.2f}x",
        f"{size['ratio_to_count']:.1f}x",
        f"{size['bare_read']['into_file']['wall_s']:.2f} s",
        f"{size['report_json']['yield']:.4f}",
    ]


def _collect(f: dict[str, Any]) -> list[str]:
    size = f["100000"]
    return [f"**{size['collect_over_day_alone']:.2f}x**", f"{size['report_growth']:+.1%}"]


def _collect_output(f: dict[str, Any]) -> list[str]:
    return [f"{f['64MB']['peak_over_output']['in_memory']:.2f}x", "512 MB"]


def _serve(f: dict[str, Any]) -> list[str]:
    size = f["sizes"][0]
    return [f"**{size['gpuyield']['p99_ms']:.1f} ms**", f"**{size['p99_ratio_to_static']:.2f}x**"]


def _preflight(f: dict[str, Any]) -> list[str]:
    return [f"**{f['refused_by_family']['fast']['cpu_median_s']:.2f} s**", f"{f['jobs']:,} jobs"]


def _report_html(f: dict[str, Any]) -> list[str]:
    return [f"{f['page_bytes'] / 1e6:.2f} MB", f"{f['ratio_html_to_json']:.1f}x"]


def _simulate(f: dict[str, Any]) -> list[str]:
    year = f["cluster_year"]["current"]
    return [f"**{year['write_over_simulate']:.2f}**", f"{year['gpus']:,} GPUs"]


def _weights(f: dict[str, Any]) -> list[str]:
    return [f"{f['ratio_wall']:.2f}x time", f"{f['typed']['research_jobs']:,}"]


def _ladder(f: dict[str, Any]) -> list[str]:
    size = f["sizes"][0]
    return [f"**{size['check_summary_median_s']:.3f} s**", f"{size['scan_over_summary_cpu']:.0f}x"]


def _hostile(f: dict[str, Any]) -> list[str]:
    base = f["baseline (bundled sample)"]
    return [f"| baseline (bundled sample) | {base['outcome']} |", f"{base['wall_s']:.2f}"]


def _ft(f: dict[str, Any]) -> list[str]:
    drop = f["modes"]["drop"]
    return [f"{f['ratio_drop_to_restart']:.3f}**", f"{drop['final_loss_mean']:.4f}"]


def _utilization(f: dict[str, Any]) -> list[str]:
    size = f["sizes"][-1]
    cpu_per_gb = size["median_cpu_s"]["ingest_utilization"] / (size["sample_mb"] / 1000)
    shown = [f"**{size['ratio_to_bare_read']:.2f}x**", f"{size['gpus']:,}", f"{cpu_per_gb:.1f} s"]
    return [*shown, f"at {size['gpus']:,} GPUs ({size['breakdown']['total_s']:.1f} s;"]


SHOWN: dict[str, Callable[[dict[str, Any]], list[str]]] = {
    "utilization": _utilization,
    "ladder": _ladder,
    "hostile": _hostile,
    "ft": _ft,
    "ledger": _ledger,
    "collect": _collect,
    "collect_output": _collect_output,
    "serve": _serve,
    "preflight": _preflight,
    "report_html": _report_html,
    "simulate": _simulate,
    "weights": _weights,
}


def test_fixtures_are_recorded_runs() -> None:
    assert len(RECORDED) >= 7
    for name in RECORDED:
        recorded = _fixture(name)["recorded"]
        assert recorded["command"].startswith("python -m bench"), name
        assert re.fullmatch(r"[0-9a-f]{9}(-dirty)?", recorded["commit"]), name


@pytest.mark.parametrize("name", RECORDED)
def test_renders_the_table_between_the_markers_and_nothing_else(name: str) -> None:
    figures = _fixture(name)
    page = PAGE.read_text(encoding="utf-8")
    rendered = docs.render(page, {name: figures})
    assert _outside(rendered, name) == _outside(page, name)
    inside = _between(rendered, name)
    assert inside == "\n" + docs.RENDERERS[name](figures) + "\n"
    r = figures["recorded"]
    assert f"`{r['command']}`" in inside and f"`{r['commit']}`" in inside
    assert str(r["load_avg_1m_start"]) in inside and r["when"] in inside
    for shown in SHOWN[name](figures):
        assert shown in inside, (name, shown)
    assert docs.render(rendered, {name: figures}) == rendered


def test_a_section_is_replaced_in_place_byte_for_byte() -> None:
    text = (
        "intro\r\n\n<!-- bench:weights:begin -->\nold\ntable\n<!-- bench:weights:end -->\n tail ☃"
    )
    out = docs.replace_section(text, "weights", "new\n")
    assert (
        out == "intro\r\n\n<!-- bench:weights:begin -->\nnew\n<!-- bench:weights:end -->\n tail ☃"
    )
    assert docs.replace_section(out, "weights", "new\n") == out


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("<!-- bench:serve:begin -->\nx\n", "exactly one"),
        ("<!-- bench:serve:end -->\n<!-- bench:serve:begin -->\n", "comes before"),
        ("<!-- bench:serve:begin -->\n<!-- bench:serve:end -->\n" * 2, "exactly one"),
    ],
)
def test_unpaired_markers_are_refused(text: str, said: str) -> None:
    with pytest.raises(docs.DocsError, match=said):
        docs.replace_section(text, "serve", "x")


def test_a_figure_missing_from_the_json_is_named() -> None:
    figures = _fixture("report_html")
    del figures["page_bytes"]
    with pytest.raises(docs.DocsError, match="report_html figures have no 'page_bytes'"):
        docs.render(PAGE.read_text(encoding="utf-8"), {"report_html": figures})


def test_every_section_of_the_page_has_a_renderer_and_one_end() -> None:
    text = PAGE.read_text(encoding="utf-8")
    listed = docs.sections(text)
    assert len(listed) >= len(RECORDED)
    assert len(set(listed)) == len(listed)
    for name in listed:
        assert name in docs.RENDERERS, name
        assert text.count(docs.end_marker(name)) == 1, name
        assert text.index(docs.begin_marker(name)) < text.index(docs.end_marker(name)), name
    ends = re.findall(r"<!-- bench:([a-z_]+):end -->", text)
    assert sorted(ends) == sorted(listed)


# Sections on other pages, with their own recorded runs and tests (tests/bench/test_lake_docs.py).
ELSEWHERE = {"lake_settings": REPO / "docs" / "scale.md"}


def test_every_renderer_has_a_section_and_a_recorded_run() -> None:
    listed = set(docs.sections(PAGE.read_text(encoding="utf-8")))
    for name, page in ELSEWHERE.items():
        assert docs.sections(page.read_text(encoding="utf-8")) == [name]
    assert set(docs.RENDERERS) == listed | set(ELSEWHERE)
    assert set(docs.RENDERERS) - set(ELSEWHERE) == set(RECORDED)


def test_no_section_of_the_page_is_left_empty() -> None:
    text = PAGE.read_text(encoding="utf-8")
    for name in docs.sections(text):
        assert _between(text, name).startswith("\nMeasured "), name


def _run_docs(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "bench.docs", *map(str, args)],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
    )


def test_the_command_rewrites_a_page_from_saved_figures(tmp_path: Path) -> None:
    page = tmp_path / "benchmarks.md"
    page.write_text(PAGE.read_text(encoding="utf-8"), encoding="utf-8")
    saved = tmp_path / "out"
    saved.mkdir()
    for name in ("preflight", "collect"):
        (saved / f"{name}.json").write_text((FIXTURES / f"{name}.json").read_text())
    done = _run_docs("--from", saved, page)
    assert done.returncode == 0, done.stderr
    expected = docs.render(
        PAGE.read_text(encoding="utf-8"),
        {"preflight": _fixture("preflight"), "collect": _fixture("collect")},
    )
    assert page.read_text(encoding="utf-8") == expected
    # The sections without saved figures are kept, and said so.
    assert "kept the serve section as it was" in done.stdout
    missing = _run_docs("--from", saved, page, "serve")
    assert missing.returncode == 1
    assert f"{saved / 'serve.json'}: not found" in missing.stderr
    assert page.read_text(encoding="utf-8") == expected


def test_a_run_writes_the_sections_of_the_benchmarks_it_ran(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from bench.__main__ import write_docs

    page = tmp_path / "benchmarks.md"
    page.write_text(PAGE.read_text(encoding="utf-8"), encoding="utf-8")
    assert write_docs(page, ["report_html", "guard"], FIXTURES) == 0
    expected = docs.render(
        PAGE.read_text(encoding="utf-8"), {"report_html": _fixture("report_html")}
    )
    assert page.read_text(encoding="utf-8") == expected
    assert "no bench:guard section" in capsys.readouterr().out


def test_the_runner_keeps_docs_for_itself_and_passes_other_options_on() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "bench", "--help"], cwd=REPO, capture_output=True, text=True
    )
    assert "--docs PAGE" in done.stdout
    # An option the benchmark does not have reaches its own parser (and is refused there).
    refused = subprocess.run(
        [sys.executable, "-m", "bench", "weights", "--docs", "x.md", "--no-such-option"],
        cwd=REPO,
        capture_output=True,
        text=True,
    )
    assert refused.returncode == 2 and "python -m bench.weights" in refused.stderr
