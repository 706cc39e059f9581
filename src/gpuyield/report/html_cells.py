"""How the HTML report's tables are built: GPU-hours and shares as text, cells keyed to ``--json``.

Every section's tables (``html_tables``, ``html_quality``, ``html_ladder``, ``showback``) use these, so
a number reads the same in every table and long tables fold the same way.
"""

from __future__ import annotations

from typing import Any

from gpuyield.report.page_model import Cell, Keyed, Row, Table, TableGroup

# Long tables stay in the page (they are the numbers behind the chart) but folded.
_FOLD_ROWS = 24


def keyed(key: str, value: Any) -> Keyed:
    """A cell's ``--json`` key and exact value."""
    return Keyed(key=key, value=value)


def hours_text(gpu_seconds: float) -> str:
    """GPU-hours for a table: whole above 1000, two decimals above 1, else three significant digits
    (a small cluster's minutes would all read 0.00)."""
    hours = gpu_seconds / 3600
    if abs(hours) >= 1000:
        return f"{hours:,.0f}"
    return f"{hours:,.2f}" if abs(hours) >= 1 or hours == 0 else f"{hours:.3g}"


def share_text(value: float | None) -> str:
    """A share as a percentage with one decimal; ``n/a`` when there is nothing to divide by."""
    return "n/a" if value is None else f"{value:.1%}"


def td(text: str, keyed: Keyed | None = None, *, num: bool = False) -> Cell:
    """A plain cell, keyed to its ``--json`` value when it shows one."""
    return Cell(text=text, keyed=keyed, num=num)


def table(caption: str, headers: list[str], rows: list[Row], *, fold: bool = True) -> Table:
    """A table, folded when it is long."""
    return Table(
        caption=caption,
        headers=tuple(headers),
        rows=tuple(rows),
        folded=fold and len(rows) > _FOLD_ROWS,
    )


def tr(cells: list[Cell], cls: str = "") -> Row:
    """A row; ``cls`` is "", "sub" (a subcategory) or "total"."""
    return Row(cells=tuple(cells), css_class=cls)


def group(*tables: Table) -> TableGroup:
    """Tables shown side by side."""
    return TableGroup(tables=tables)
