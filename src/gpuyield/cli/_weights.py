"""``gpuyield report``'s weighted parts: the cost of waste, the table in a weight, the GPU types."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gpuyield.cli._common import console, shown
from gpuyield.errors import InputError


def check_weight(weight: str, *, html: Path | None, as_json: bool, by: str | None) -> str:
    """The unit of ``--weight``; an error where it would change nothing."""
    from gpuyield.report.weights import unit_of

    unit = unit_of(weight)
    if unit != "gpu_seconds" and html is not None:
        raise InputError(
            "--weight does not apply to --html (the page shows every weight)",
            hint="drop --weight, or run it without --html for the table",
        )
    if unit != "gpu_seconds" and as_json and by is None:
        raise InputError(
            "--weight changes nothing in --json without --by (it carries every weight: "
            "by_gpu_type, weighted)",
            hint="drop --weight, or add --by account|user|partition|run",
        )
    return unit


def print_waste_line(report: Any) -> None:
    """The cost of waste first, when the manifest prices GPU-hours."""
    from gpuyield.report.weights import waste_sentence

    sentence = waste_sentence(report.fleet, report.window_start_s, report.window_end_s)
    if sentence is not None:
        console.print(f"[bold]{shown(sentence)}[/]")


def require_weight(report: Any, unit: str) -> None:
    """An error, before anything is printed, when the window has no ledger in ``unit``."""
    from gpuyield.report.weights import unit_label, weighted_rows

    if unit == "gpu_seconds":
        return
    weighted = weighted_rows(report.fleet, unit)
    if weighted is None or not weighted.weights:
        why = (
            "the manifest has no [prices]"
            if weighted is None
            else "no GPU of it has a price"
            if unit == "dollars"
            else "no GPU of it has a model the catalog knows"
        )
        raise InputError(
            f"no {unit_label(unit)} for this window: {why}",
            hint="[prices] and [[gpu_models]] in the manifest, or gres.conf (docs/weights.md)",
        )


def print_weighted(report: Any, unit: str) -> None:
    """The categories in a weight's unit, with the weights stated under the table."""
    from rich.table import Table

    from gpuyield.report.weights import in_unit, unit_label, weighted_rows

    weighted = weighted_rows(report.fleet, unit)
    assert weighted is not None, "require_weight first"
    installed = weighted.installed
    table = Table(show_footer=True)
    table.add_column("category", footer="installed")
    table.add_column(unit_label(unit), justify="right", footer=in_unit(installed, unit))
    table.add_column("share", justify="right", footer="100.0%" if installed else "n/a")
    for category, value in weighted.categories.items():
        share = "n/a" if not installed else f"{value / installed:.1%}"
        table.add_row(
            _label(category, weighted.subcategories, installed), in_unit(value, unit), share
        )
    console.print(table)
    console.print(f"[dim]weights: {shown(weighted.basis)}[/]")
    if weighted.not_weighted_gpu_seconds:
        missing = ", ".join(
            f"{k} {v / 3600:,.1f} GPU-hours" for k, v in weighted.not_weighted_gpu_seconds.items()
        )
        console.print(f"[yellow]not weighted (no weight known):[/] {shown(missing)}")


def _label(category: str, subcategories: dict[str, float], installed: float) -> str:
    """A category with its subcategories' shares of the installed total in this weight (the
    GPU-second table's notes: where the failed or idle dollars went)."""
    subs = sorted(
        (k.split(".", 1)[1], v) for k, v in subcategories.items() if k.startswith(category + ".")
    )
    note = ", ".join(f"{s} {v / installed:.1%}" for s, v in subs) if installed else ""
    return category + (f" [dim]({shown(note)})[/]" if note else "")


def print_gpu_types(report: Any) -> None:
    """One dim line per GPU type (model, weight, price and where each came from), when the
    fleet has more than one type or a known model."""
    from gpuyield.report.weights import type_lines

    fleet = report.fleet
    if fleet is None or (len(fleet.by_gpu_type) == 1 and "(untyped)" in fleet.by_gpu_type):
        return
    for line in type_lines(fleet, report.installed_gpu_seconds):
        console.print(f"[dim]GPU type {shown(line)}[/]")
