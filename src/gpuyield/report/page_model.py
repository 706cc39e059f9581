"""The HTML report's page as typed records, and the Jinja2 environment that renders them.

The builders in ``html.py`` decide what the page says; the templates in ``data/html/`` decide how it
is marked up. Every value reaches the page through a template with autoescaping on, so no text from
the store (a job name, a file path, a warning) can inject markup.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from html import escape
from typing import Any

from gpuyield.errors import MissingExtraError
from gpuyield.safetext import visible


@dataclass(frozen=True, kw_only=True, slots=True)
class Keyed:
    """Ties a cell to its ``--json`` key and exact value (``data-key``, ``data-value``)."""

    key: str
    value: Any


@dataclass(frozen=True, kw_only=True, slots=True)
class Cell:
    """One table cell: plain text, escaped when rendered."""

    text: str
    keyed: Keyed | None = None
    #: Right-aligned tabular figures.
    num: bool = False
    #: Set in ``<code>`` (hashes).
    code: bool = False
    #: A category's colour swatch before the text.
    swatch: str | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class Row:
    """A table row; ``css_class`` is "", "sub" (a subcategory) or "total"."""

    cells: tuple[Cell, ...]
    css_class: str = ""


@dataclass(frozen=True, kw_only=True, slots=True)
class Table:
    """A table of numbers; folded into ``<details>`` when ``folded``."""

    caption: str
    headers: tuple[str, ...]
    rows: tuple[Row, ...]
    folded: bool = False


@dataclass(frozen=True, kw_only=True, slots=True)
class TableGroup:
    """Tables side by side."""

    tables: tuple[Table, ...]


@dataclass(frozen=True, kw_only=True, slots=True)
class Note:
    """A short muted paragraph in place of tables."""

    text: str


Block = Table | TableGroup | Note


@dataclass(frozen=True, kw_only=True, slots=True)
class Figure:
    """A chart: matplotlib's SVG (trusted markup, made here) with its caption."""

    chart_id: str
    title: str
    svg: str
    caption: str


@dataclass(frozen=True, kw_only=True, slots=True)
class Section:
    """One numbered section: an optional chart, then blocks of numbers."""

    section_id: str
    title: str
    figure: Figure | None
    blocks: tuple[Block, ...]


@dataclass(frozen=True, kw_only=True, slots=True)
class Kpi:
    """A headline figure under the yield."""

    label: str
    text: str
    keyed: Keyed


@dataclass(frozen=True, kw_only=True, slots=True)
class Page:
    """The whole report page."""

    title: str
    css: str
    headline: Cell
    kpis: tuple[Kpi, ...]
    warnings: tuple[Cell, ...]
    sections: tuple[Section, ...]
    version: str
    window: tuple[str, str] = field(default=("", ""))


def _finalize(value: Any) -> Any:
    """Escape every value the way ``html.escape`` does (``&quot;``, ``&#x27;``).

    Autoescaping then leaves the result alone (it is Markup). Markupsafe's own entities differ
    (``&#34;``), and the page must stay byte-for-byte what it was before templates.
    """
    from markupsafe import Markup

    if isinstance(value, Markup):
        return value
    # Job comments, users and accounts are user-controlled: control characters show as escapes.
    return Markup(escape(visible(str(value))))


def _svg_with_label(figure: Figure) -> Any:
    """The chart's SVG, trusted as made by matplotlib, with an accessible name added."""
    from markupsafe import Markup

    return Markup(
        figure.svg.replace(
            '<svg role="img"', f'<svg role="img" aria-label="{escape(figure.title)}"', 1
        )
    )


def environment(**options: Any) -> Any:
    """The Jinja2 environment of every page (``data/html/*.j2``): autoescaped, strict about
    undefined names, with the ``json`` filter for ``data-value``; ``options`` add to it."""
    try:
        import jinja2
    except ImportError:
        raise MissingExtraError("html", "jinja2") from None
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("gpuyield", "data/html"),
        autoescape=True,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        undefined=jinja2.StrictUndefined,
        **options,
    )
    env.filters["json"] = json.dumps
    return env


def render(page: Page) -> str:
    """The HTML document of ``page`` (templates ``data/html/*.j2``, autoescaped)."""
    env = environment(finalize=_finalize)
    env.filters["svg"] = _svg_with_label
    return env.get_template("report.html.j2").render(page=page)
