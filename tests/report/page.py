"""Reading a report page back: its ``data-key`` values and its chart elements."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from html.parser import HTMLParser
from typing import Any


@dataclass(kw_only=True, slots=True)
class Page:
    """What the tests look at in a page."""

    keyed: list[tuple[str, Any, str]] = field(default_factory=list)
    """(data-key, parsed data-value, the element's visible text), in page order."""
    charts: dict[str, int] = field(default_factory=dict)
    """data-chart of each ``figure.gy-chart`` -> how many ``<svg>`` elements it holds."""
    figures_without_marker: int = 0
    """``figure.gy-chart`` elements without a data-chart (should be none)."""


# HTML elements that never have an end tag.
_VOID = {"meta", "link", "br", "img", "input", "hr", "col", "source", "wbr"}


class _Reader(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.page = Page()
        self._open: list[str] = []  # tags, to know when a figure or a keyed element closes
        self._figure: tuple[str, int] | None = None  # (chart id, depth)
        self._keyed: list[tuple[str, Any, int, list[str]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        self._open.append(tag)
        depth = len(self._open)
        if tag == "figure" and "gy-chart" in (a.get("class") or "").split():
            chart = a.get("data-chart")
            if chart is None:
                self.page.figures_without_marker += 1
            else:
                self.page.charts.setdefault(chart, 0)
                self._figure = (chart, depth)
        if tag == "svg" and self._figure is not None:
            self.page.charts[self._figure[0]] += 1
        if "data-key" in a:
            self._keyed.append((a["data-key"] or "", json.loads(a["data-value"] or ""), depth, []))
        if tag in _VOID:
            self._open.pop()

    def handle_endtag(self, tag: str) -> None:
        # SVG children close themselves in the DOM dump; HTML void elements never close.
        while self._open:
            depth = len(self._open)
            closed = self._open.pop()
            if self._figure is not None and depth == self._figure[1]:
                self._figure = None
            while self._keyed and self._keyed[-1][2] == depth:
                key, value, _, text = self._keyed.pop()
                self.page.keyed.append((key, value, "".join(text).strip()))
            if closed == tag:
                break

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.handle_starttag(tag, attrs)
        if tag not in _VOID:
            self.handle_endtag(tag)

    def handle_data(self, data: str) -> None:
        for _, _, _, text in self._keyed:
            text.append(data)


def read_page(text: str) -> Page:
    """Parse a page (as written, or as a browser dumped it)."""
    reader = _Reader()
    reader.feed(text)
    reader.close()
    return reader.page


def flatten(data: Any, prefix: str = "") -> dict[str, Any]:
    """``{"a": {"b": 1}, "c": [x]}`` -> ``{"a.b": 1, "c.0": x}``: the page's data-key names."""
    if isinstance(data, dict):
        items = data.items()
    elif isinstance(data, list):
        items = ((str(i), v) for i, v in enumerate(data))
    else:
        return {prefix: data}
    out: dict[str, Any] = {}
    for key, value in items:
        out.update(flatten(value, f"{prefix}.{key}" if prefix else str(key)))
    return out
