"""The scaling ladder on the HTML page: ``waste_in_skipped_rungs``, every figure keyed to its JSON.

Only with a ladder in the stored manifest (docs/ladder.md); without one the JSON has no key and the
page no table.
"""

from __future__ import annotations

from typing import Any

from gpuyield.report.html_cells import hours_text, keyed, share_text
from gpuyield.report.page_model import Cell, Row, Table, TableGroup

KEY = "waste_in_skipped_rungs"


def _cell(text: str, path: str, value: Any) -> Cell:
    return Cell(text=text, keyed=keyed(f"{KEY}.{path}", value), num=True)


def skipped_rungs_tables(data: dict[str, Any]) -> TableGroup | None:
    """The ladder and the waste of runs that skipped a rung beside those that climbed."""
    waste = data.get(KEY)
    if waste is None:
        return None
    rungs = Table(
        caption="Scaling ladder (docs/ladder.md)",
        headers=("rungs, GPUs", "a lower rung counts for, days"),
        rows=(
            Row(
                cells=(
                    *(_cell(f"{r:,}", f"rungs.{i}", r) for i, r in enumerate(waste["rungs"])),
                    _cell(f"{waste['within_days']:g}", "within_days", waste["within_days"]),
                )
            ),
        ),
    )
    wasted = tuple(waste["skipped"]["wasted"])  # failed, cancelled, diverged
    rows = tuple(_side_row(name, waste[name], wasted) for name in ("skipped", "climbed"))
    table = Table(
        caption="Waste of runs that skipped a rung, beside those that climbed",
        headers=(
            "runs",
            "count",
            "GPU-hours",
            "wasted GPU-hours",
            *(f"{w} GPU-hours" for w in wasted),
            "waste share",
        ),
        rows=rows,
    )
    return TableGroup(tables=(rungs, table))


def _side_row(name: str, side: dict[str, Any], wasted: tuple[str, ...]) -> Row:
    return Row(
        cells=(
            Cell(text=name),
            _cell(str(side["runs"]), f"{name}.runs", side["runs"]),
            _cell(hours_text(side["gpu_seconds"]), f"{name}.gpu_seconds", side["gpu_seconds"]),
            _cell(
                hours_text(side["wasted_gpu_seconds"]),
                f"{name}.wasted_gpu_seconds",
                side["wasted_gpu_seconds"],
            ),
            *(
                _cell(hours_text(side["wasted"][w]), f"{name}.wasted.{w}", side["wasted"][w])
                for w in wasted
            ),
            _cell(share_text(side["waste_share"]), f"{name}.waste_share", side["waste_share"]),
        )
    )
