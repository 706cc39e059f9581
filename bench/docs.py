"""docs/benchmarks.md's measured tables, written from the benchmarks' own output, never typed.

Each benchmark's table sits between ``<!-- bench:<name>:begin -->`` and
``<!-- bench:<name>:end -->``; what lies between a pair is replaced by what the benchmark's
renderer (``RENDERERS``) makes of its figures, everything outside the markers is left byte for
byte. The prose around (method, verdicts) stays hand-written.

``python -m bench --docs docs/benchmarks.md [NAME ...]`` runs benchmarks and then writes their
sections; ``python -m bench.docs --from bench/out docs/benchmarks.md [NAME ...]`` rewrites the
page from saved figures (``bench/out/<name>.json``), every section of the page by default (one
whose JSON is missing is left as it is, and said so).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from bench import docs_tables, lake_docs, utilization_docs
from bench.runner import OUT

# A benchmark's figures (its bench/out/<name>.json) -> the Markdown between its markers.
Renderer = Callable[[dict[str, Any]], str]

RENDERERS: dict[str, Renderer] = {
    "ledger": docs_tables.ledger,
    "collect": docs_tables.collect,
    "collect_output": docs_tables.collect_output,
    "serve": docs_tables.serve,
    "preflight": docs_tables.preflight,
    "report_html": docs_tables.report_html,
    "simulate": docs_tables.simulate,
    "weights": docs_tables.weights,
    "ladder": docs_tables.ladder,
    "hostile": docs_tables.hostile,
    "ft": docs_tables.ft,
    "utilization": utilization_docs.markdown,
    "lake_settings": lake_docs.markdown,
}

_BEGIN = re.compile(r"<!-- bench:([a-z_]+):begin -->")


class DocsError(Exception):
    """The page or the figures cannot be rendered: the message names the file and the marker."""


def begin_marker(name: str) -> str:
    return f"<!-- bench:{name}:begin -->"


def end_marker(name: str) -> str:
    return f"<!-- bench:{name}:end -->"


def sections(text: str) -> list[str]:
    """The benchmarks whose sections the page has, in the page's order."""
    return _BEGIN.findall(text)


def replace_section(text: str, name: str, body: str) -> str:
    """``text`` with the lines between ``name``'s markers replaced by ``body``."""
    begin, end = begin_marker(name), end_marker(name)
    # Exactly one pair, in order: a second pair or a lone marker would be written ambiguously.
    if text.count(begin) != 1 or text.count(end) != 1:
        raise DocsError(f"needs exactly one {begin} and one {end}")
    head, rest = text.split(begin, 1)
    if end not in rest:
        raise DocsError(f"{end} comes before {begin}")
    _, tail = rest.split(end, 1)
    return f"{head}{begin}\n{body.rstrip(chr(10))}\n{end}{tail}"


def render(text: str, figures: Mapping[str, dict[str, Any]]) -> str:
    """``text`` with the section of every benchmark in ``figures`` rendered from its figures."""
    for name, found in figures.items():
        if name not in RENDERERS:
            raise DocsError(f"no renderer for benchmark {name!r} (bench/docs.py RENDERERS)")
        try:
            body = RENDERERS[name](found)
        except KeyError as e:
            raise DocsError(
                f"the {name} figures have no {e}: rerun `python -m bench {name}`"
            ) from None
        text = replace_section(text, name, body)
    return text


def write_docs(page: Path, figures: Mapping[str, dict[str, Any]]) -> None:
    """Rewrite ``page``'s sections of the benchmarks in ``figures``."""
    text = page.read_text(encoding="utf-8")
    try:
        rendered = render(text, figures)
    except DocsError as e:
        raise DocsError(f"{page}: {e}") from None
    if rendered != text:
        page.write_text(rendered, encoding="utf-8")


def load_figures(out: Path, names: list[str]) -> dict[str, dict[str, Any]]:
    """Each named benchmark's saved figures, ``out/<name>.json``."""
    found = {}
    for name in names:
        path = out / f"{name}.json"
        try:
            found[name] = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise DocsError(f"{path}: not found; run `python -m bench {name}` first") from None
        except json.JSONDecodeError as e:
            raise DocsError(f"{path}: not JSON ({e})") from None
    return found


def from_saved(page: Path, out: Path, names: list[str]) -> list[str]:
    """Rewrite ``page`` from ``out``: the named sections, or every section with saved figures.
    Returns the sections left as they were (no JSON for them)."""
    if names:
        write_docs(page, load_figures(out, names))
        return []
    listed = sections(page.read_text(encoding="utf-8"))
    saved = [name for name in listed if (out / f"{name}.json").exists()]
    write_docs(page, load_figures(out, saved))
    return [name for name in listed if name not in saved]


def parser() -> argparse.ArgumentParser:
    out = argparse.ArgumentParser(
        prog="python -m bench.docs",
        description="Write docs/benchmarks.md's measured tables from the benchmarks' saved "
        "figures (bench/out/<name>.json), between each <!-- bench:<name>:begin/end --> pair.",
    )
    out.add_argument("page", type=Path, help="the page to rewrite (docs/benchmarks.md)")
    out.add_argument("names", nargs="*", metavar="NAME", help="sections to write (default: all)")
    out.add_argument("--from", dest="out", type=Path, default=OUT, help="where the JSON files are")
    return out


def main(argv: list[str]) -> int:
    args = parser().parse_args(argv)
    try:
        kept = from_saved(args.page, args.out, args.names)
    except DocsError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    for name in kept:
        print(f"{args.page}: kept the {name} section as it was (no {args.out / name}.json)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
