"""Section 7 of the HTML page: GPU types, the weighted ledger, and showback in dollars.

Every value of ``by_gpu_type`` and ``weighted`` in ``report --json`` is in these tables with its
key (``data-key``), as everywhere on the page; the showback tables (dollars, or H100-equivalent
hours without prices, by account, user and partition) are the weighted ``--by`` breakdowns.
"""

from __future__ import annotations

from typing import Any

from gpuyield.categories import Category
from gpuyield.ledger.sums import json_number
from gpuyield.ledger.weights import GpuType, WeightedLedger
from gpuyield.report.breakdown import Breakdown
from gpuyield.report.figures import ReportFigures
from gpuyield.report.page_model import Block, Cell, Keyed, Note, Row, Table, TableGroup
from gpuyield.report.weights import in_unit, unit_label, waste_sentence

TITLE = "7. GPU types, weights and showback"
_UNITS = ("h100_equiv_seconds", "flops", "dollars")


def showback_blocks(figures: ReportFigures) -> tuple[Block, ...]:
    """The section's blocks; a Note alone for a report without GPU types (older stores)."""
    report = figures.report
    fleet = report.fleet
    if fleet is None:
        return (Note(text="No GPU types: this report was made without them."),)
    sentence = waste_sentence(fleet, report.window_start_s, report.window_end_s)
    lead = Note(
        text=sentence
        or "No GPU-hour has a price: add [prices] to the manifest for dollars (docs/weights.md)."
    )
    types = fleet.by_gpu_type
    return (
        lead,
        TableGroup(tables=(_types_table(types), _type_categories_table(types))),
        _provenance_table(types),
        TableGroup(tables=(_weighted_table(fleet.weighted), _weights_table(fleet.weighted))),
        *_showback_tables(figures.showback),
    )


def _cell(text: str, key: str | None = None, value: Any = None, *, num: bool = False) -> Cell:
    return Cell(text=text, keyed=None if key is None else Keyed(key=key, value=value), num=num)


def _text(value: Any) -> str:
    if value is None:
        return "n/a"
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def _type_yield(t: GpuType) -> float | None:
    """Released / installed of one type, as ``by_gpu_type.TYPE.yield``."""
    released = t.categories[Category.RELEASED.value]
    return None if t.installed_gpu_seconds <= 0 else released / t.installed_gpu_seconds


def _types_table(types: dict[str, GpuType]) -> Table:
    rows = []
    for key, t in types.items():
        acc = t.accelerator
        fields: tuple[tuple[str, object], ...] = (
            ("model", None if acc is None else acc.id),
            ("nodes", t.nodes),
            ("peak_tflops_bf16", None if acc is None else acc.peak_tflops_bf16),
            ("peak_tflops_fp8", None if acc is None else acc.peak_tflops_fp8),
            ("h100_equiv", t.h100_equiv),
            ("installed_gpu_seconds", json_number(t.installed_gpu_seconds)),
            ("yield", _type_yield(t)),
        )
        cells = [_cell(key)]
        cells += [_cell(_text(v), f"by_gpu_type.{key}.{f}", v, num=f != "model") for f, v in fields]
        rows.append(Row(cells=tuple(cells)))
    headers = (
        "GPU type",
        "model",
        "nodes",
        "BF16 TFLOP/s",
        "FP8 TFLOP/s",
        "H100-equiv",
        "installed GPU-s",
        "yield",
    )
    return Table(
        caption="GPU types (dense peaks: the estimator's catalog)",
        headers=headers,
        rows=tuple(rows),
    )


def _type_categories_table(types: dict[str, GpuType]) -> Table:
    names = list(types)
    rows = []
    for category in Category:
        rows.append(_category_row(types, "categories", category.value, ""))
        subs = sorted({s for t in types.values() for s in t.subcategories})
        rows += [
            _category_row(types, "subcategories", s, "sub")
            for s in subs
            if s.startswith(f"{category.value}.")
        ]
    return Table(caption="GPU-seconds by type", headers=("category", *names), rows=tuple(rows))


def _category_row(types: dict[str, GpuType], block: str, name: str, css: str) -> Row:
    cells = [_cell(name.split(".", 1)[1] if css else name)]
    for key, t in types.items():
        values = t.categories if block == "categories" else t.subcategories
        if name in values:
            value = json_number(values[name])
            cells.append(_cell(_text(value), f"by_gpu_type.{key}.{block}.{name}", value, num=True))
        else:
            cells.append(_cell("", num=True))
    return Row(cells=tuple(cells), css_class=css)


def _provenance_table(types: dict[str, GpuType]) -> Table:
    """Where each type's model, peaks and prices come from: one row per stated fact."""
    rows = []
    for key, t in types.items():
        acc = t.accelerator
        facts: list[tuple[str, str, object]] = [
            ("name", "name", None if acc is None else acc.name),
            ("peak_source", "peaks from", None if acc is None else acc.source),
        ]
        facts += [(f"slurm_types.{i}", "Slurm GRES type", v) for i, v in enumerate(t.slurm_types)]
        facts += [(f"model_source.{i}", "model from", v) for i, v in enumerate(t.model_sources)]
        for i, price in enumerate(t.prices):
            stated = (
                ("usd_per_gpu_hour", price.usd_per_gpu_hour),
                ("source", price.source),
                ("installed_gpu_seconds", json_number(price.installed_gpu_seconds)),
            )
            facts += [(f"prices.{i}.{f}", f"price {i + 1}: {f}", v) for f, v in stated]
        rows += [
            Row(cells=(_cell(key), _cell(label), _cell(_text(v), f"by_gpu_type.{key}.{k}", v)))
            for k, label, v in facts
        ]
    return Table(
        caption="What each GPU type is, and where that comes from",
        headers=("GPU type", "fact", "value"),
        rows=tuple(rows),
        folded=len(rows) > 24,
    )


def _weighted_table(weighted: dict[str, WeightedLedger | None]) -> Table:
    units = [u for u in _UNITS if u in weighted]
    names = [c.value for c in Category]
    subs = sorted({s for u in units if (w := weighted[u]) for s in w.subcategories})
    rows = []
    nested = [n for c in names for n in (c, *(s for s in subs if s.startswith(f"{c}.")))]
    for name in [*nested, "installed", "waste", "yield"]:
        block = "categories" if name in names else "subcategories" if name in subs else None
        cells = [_cell(name.split(".", 1)[1] if block == "subcategories" else name)]
        for u in units:
            w = weighted[u]
            if w is None:
                cells.append(_cell("no [prices]", f"weighted.{u}", None))
                continue
            key = f"weighted.{u}.{block}.{name}" if block else f"weighted.{u}.{name}"
            if name == "yield":
                share = w.yield_
                text = _text(None) if share is None else f"{share:.1%}"
                cells.append(_cell(text, key, share, num=True))
            else:
                value = _weighted_value(w, block, name)
                cells.append(_cell(in_unit(value, u), key, value, num=True))
        rows.append(Row(cells=tuple(cells), css_class="sub" if block == "subcategories" else ""))
    headers = ("category", *(unit_label(u) for u in units))
    return Table(
        caption="The ledger weighted (each column sums to its installed)",
        headers=headers,
        rows=tuple(rows),
    )


def _weighted_value(w: WeightedLedger, block: str | None, name: str) -> float:
    """A category's, a subcategory's, ``installed`` or ``waste`` of a weighted ledger, as
    ``weighted.UNIT`` prints it (unrounded)."""
    if block == "categories":
        return w.categories[name]
    if block == "subcategories":
        return w.subcategories[name]
    return w.installed if name == "installed" else w.waste


def _weights_table(weighted: dict[str, WeightedLedger | None]) -> Table:
    """The weight of each type in each unit, the basis, and what was not weighted."""
    rows = [row for u, w in weighted.items() if w is not None for row in _weight_rows(u, w)]
    return Table(
        caption="Weights and prices used",
        headers=("unit", "what", "value"),
        rows=tuple(rows),
        folded=len(rows) > 24,
    )


def _weight_rows(u: str, w: WeightedLedger) -> list[Row]:
    """One unit's rows: its basis, each type's weight (or each price of its table), the rest."""
    rows = [_unit_row(u, "basis", w.basis, f"weighted.{u}.basis", w.basis)]
    for t, weight in w.weights.items():
        if isinstance(weight, list):
            for i, price in enumerate(weight):
                stated = (("usd_per_gpu_hour", price.usd_per_gpu_hour), ("source", price.source))
                rows += [
                    _unit_row(u, f"{t} {f}", _text(v), f"weighted.{u}.weights.{t}.{i}.{f}", v)
                    for f, v in stated
                ]
        else:
            key = f"weighted.{u}.weights.{t}"
            rows.append(_unit_row(u, f"{t} weight", _text(weight), key, weight))
    for t, gpu_s in w.not_weighted_gpu_seconds.items():
        key = f"weighted.{u}.not_weighted_gpu_seconds.{t}"
        value = json_number(gpu_s)
        rows.append(_unit_row(u, f"{t}: not weighted, GPU-s", _text(value), key, value))
    return rows


def _unit_row(u: str, what: str, text: str, key: str, value: Any) -> Row:
    return Row(cells=(_cell(unit_label(u)), _cell(what), _cell(text, key, value)))


def _showback_tables(cuts: tuple[Breakdown, ...]) -> tuple[Block, ...]:
    """Showback: each group's categories in the weight's unit (the ``--by --weight`` rows)."""
    tables = []
    for cut in cuts:
        shown = f" (the {cut.top} largest of {cut.groups:,})" if cut.top is not None else ""
        rows = tuple(
            Row(
                cells=(
                    _cell(row.key),
                    *(
                        _cell(in_unit(row.categories[c.value], cut.unit), num=True)
                        for c in Category
                    ),
                    _cell(in_unit(row.total_gpu_seconds, cut.unit), num=True),
                )
            )
            for row in cut.rows
        )
        tables.append(
            Table(
                caption=f"Showback: {unit_label(cut.unit)} by {cut.by}{shown}",
                headers=(cut.by, *(c.value for c in Category), "total"),
                rows=rows,
            )
        )
    return tuple(tables)
