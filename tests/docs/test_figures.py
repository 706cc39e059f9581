"""The docs cannot go stale: every figure is what its commands print now, every measurement names
its generator, every session that shows output is a figure, every link resolves inside a clone.

A stale figure fails here with its diff; ``make docs-figures`` rewrites it (review the diff).
"""

from __future__ import annotations

import importlib.util
import re
import shlex
import sys
from pathlib import Path
from types import ModuleType

import pytest

from tests.docs.snippets import PAGES, REPO, blocks, gpuyield_commands, session
from tests.docs.test_snippets import _parse


def _load_figures() -> ModuleType:
    spec = importlib.util.spec_from_file_location("docs_figures", REPO / "docs" / "figures.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["docs_figures"] = module  # dataclasses look their module up while it loads
    spec.loader.exec_module(module)
    return module


FIGURES = _load_figures()
ALL = FIGURES.figures()


@pytest.mark.parametrize("figure", ALL, ids=[f.name for f in ALL])
def test_every_figure_is_what_its_commands_print(figure: object) -> None:
    now = FIGURES.render(figure)
    assert now == figure.body, (  # type: ignore[attr-defined]
        f"{figure.where} is stale; run `make docs-figures` and review the diff:\n"  # type: ignore[attr-defined]
        + FIGURES._diff(figure, now)
    )


def test_the_docs_have_figures_on_every_page_that_shows_gpuyield_output() -> None:
    assert len(ALL) >= 20
    pages = {f.page.name for f in ALL}
    assert {"README.md", "simulate.md", "estimate.md", "ladder.md", "ledger.md"} <= pages


def _outside_figures(page: Path) -> str:
    """The page with its figure regions blanked (line numbers kept)."""
    text = page.read_text(encoding="utf-8")
    return FIGURES._REGION.sub(lambda m: "\n" * m.group(0).count("\n"), text)


def test_every_session_that_shows_gpuyield_output_is_a_figure() -> None:
    loose = []
    for block in blocks():
        if block.lang not in ("", "console"):
            continue
        outside = _outside_figures(block.page)
        fenced = f"```{block.lang}\n{block.text}```"
        if fenced not in outside:
            continue  # inside a figure region
        if re.search(r"<!-- illustration: .+ -->\n" + re.escape(fenced), outside):
            continue  # output that cannot run in CI and holds no figure, with the reason
        for step in session(block):
            if gpuyield_commands(step.command) and step.shown.strip():
                loose.append(f"{block.where}: $ {step.command}")
    assert not loose, "output shown without a figure marker (docs/figures.py):\n" + "\n".join(loose)


_MARKER = re.compile(r"^<!-- (figure|/figure|measured|illustration)\b", re.M)


def test_markers_open_and_close_in_pairs() -> None:
    for page in PAGES:
        kinds = [m.group(1) for m in _MARKER.finditer(page.read_text(encoding="utf-8"))]
        figures = [k for k in kinds if k in ("figure", "/figure")]
        assert figures == ["figure", "/figure"] * (len(figures) // 2), page.name


_MEASURED = re.compile(r"^<!-- measured: (?P<command>.+?) -->$", re.M)


def _benches() -> tuple[str, ...]:
    from bench.__main__ import BENCHES

    return tuple(BENCHES)


def test_every_measurement_names_a_command_that_exists() -> None:
    found = []
    for page in PAGES:
        for match in _MEASURED.finditer(page.read_text(encoding="utf-8")):
            words = shlex.split(match.group("command"))
            found.append((page.name, words))
            if words[:3] == ["python", "-m", "bench"]:
                assert words[3] in _benches(), (page.name, words)
            else:
                assert words[0] == "gpuyield", (page.name, words)
                assert _parse(words[1:]).startswith("gpuyield "), (page.name, words)
    assert len(found) >= 5


_LINK = re.compile(r"(?<!!)\[[^\]]*\]\((?P<target>[^)\s]+)\)")


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def _anchors(page: Path) -> set[str]:
    text = re.sub(r"^```.*?^```", "", page.read_text(encoding="utf-8"), flags=re.S | re.M)
    return {_slug(m.group(1)) for m in re.finditer(r"^#+\s+(.*)$", text, re.M)}


def test_every_link_resolves_inside_a_clone() -> None:
    broken = []
    for page in PAGES:
        text = re.sub(r"^```.*?^```", "", page.read_text(encoding="utf-8"), flags=re.S | re.M)
        for match in _LINK.finditer(text):
            target = match.group("target")
            if re.match(r"[a-z]+:", target):
                continue  # https:, mailto:
            path_part, _, anchor = target.partition("#")
            path = (page.parent / path_part).resolve() if path_part else page
            if not path.is_relative_to(REPO) or not path.exists():
                broken.append(f"{page.name}: {target} (not in the repository)")
            elif anchor and path.suffix == ".md" and anchor not in _anchors(path):
                broken.append(f"{page.name}: {target} (no heading #{anchor})")
    assert not broken, "\n".join(broken)


def test_the_anchor_rule_is_githubs() -> None:
    assert _slug("Drop vs restart (`python -m bench ft`)") == "drop-vs-restart-python--m-bench-ft"
    assert _slug("5. Initialization: `check_init` and `clip_init_`") == (
        "5-initialization-check_init-and-clip_init_"
    )


def test_a_figure_is_rewritten_and_then_current(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(
        "Text.\n\n<!-- figure: demo -->\n```console\n$ echo one two\nold output\n"
        "$ printf 'a \\nb\\n'\n```\n<!-- /figure -->\n\nMore text.\n",
        encoding="utf-8",
    )
    (figure,) = FIGURES.figures((page,))
    assert FIGURES.regenerate([figure], check=True) == 1
    assert FIGURES.regenerate([figure], check=False) == 0
    assert page.read_text(encoding="utf-8") == (
        "Text.\n\n<!-- figure: demo -->\n```console\n$ echo one two\none two\n"
        "$ printf 'a \\nb\\n'\na\nb\n```\n<!-- /figure -->\n\nMore text.\n"
    )
    (figure,) = FIGURES.figures((page,))
    assert FIGURES.regenerate([figure], check=True) == 0


def test_a_failing_command_is_an_error_unless_the_figure_says_fails(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    body = (
        "```console\n$ gpuyield estimate train --params 4O5B --tokens 1T --accelerator h100\n```\n"
    )
    page.write_text(f"<!-- figure: bad -->\n{body}<!-- /figure -->\n", encoding="utf-8")
    (figure,) = FIGURES.figures((page,))
    with pytest.raises(FIGURES.FigureError, match="exited 1"):
        FIGURES.render(figure)
    page.write_text(f"<!-- figure: bad fails -->\n{body}<!-- /figure -->\n", encoding="utf-8")
    (figure,) = FIGURES.figures((page,))
    assert "error: --params: cannot read '4O5B' as a number" in FIGURES.render(figure)


def test_jq_stand_in_prints_as_jq_does() -> None:
    assert FIGURES.jq(["-c", "{a, b}"], '{"a": 0.5, "b": "x", "c": 1}') == '{"a":0.5,"b":"x"}'
    assert FIGURES.jq([".a[1]"], '{"a": [1, 2.5e30]}') == "2.5e+30"
    assert FIGURES.jq(["-c", ".a[0] | {b}"], '{"a": [{"b": 937500.0, "c": 2}]}') == (
        '{"b":937500.0}'
    )
    assert FIGURES.jq([".a"], '{"a": {"b": [1, 2]}}') == '{\n  "b": [\n    1,\n    2\n  ]\n}'
