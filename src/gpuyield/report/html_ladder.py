"""The scaling ladder on the HTML page: ``waste_in_skipped_rungs``, every figure keyed to its JSON.

Only with a ladder in the stored manifest (docs/ladder.md); without one the JSON has no key and the
page no table.
"""

from __future__ import annotations

from gpuyield.ledger.ladder import SkippedRungWaste, WasteSide
from gpuyield.ledger.sums import json_number
from gpuyield.report.html_cells import hours_text, keyed, share_text
from gpuyield.report.page_model import Cell, Row, Table, TableGroup

KEY = "waste_in_skipped_rungs"


def _cell(text: str, path: str, value: float | None) -> Cell:
    return Cell(text=text, keyed=keyed(f"{KEY}.{path}", value), num=True)


def skipped_rungs_tables(waste: SkippedRungWaste | None) -> TableGroup | None:
    """The ladder and the waste of runs that skipped a rung beside those that climbed."""
    if waste is None:
        return None
    policy = waste.policy
    rungs = Table(
        caption="Scaling ladder (docs/ladder.md)",
        headers=("rungs, GPUs", "a lower rung counts for, days"),
        rows=(
            Row(
                cells=(
                    *(_cell(f"{r:,}", f"rungs.{i}", r) for i, r in enumerate(policy.rungs)),
                    _cell(f"{policy.within_days:g}", "within_days", policy.within_days),
                )
            ),
        ),
    )
    wasted = tuple(waste.skipped.wasted)  # failed, cancelled, diverged
    sides = (("skipped", waste.skipped), ("climbed", waste.climbed))
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
        rows=tuple(_side_row(name, side, wasted) for name, side in sides),
    )
    return TableGroup(tables=(rungs, table))


def _side_row(name: str, side: WasteSide, wasted: tuple[str, ...]) -> Row:
    """One side's row, each figure as ``--json`` prints it (``json_number``)."""

    def hours(path: str, gpu_seconds: float) -> Cell:
        value = json_number(gpu_seconds)
        return _cell(hours_text(value), f"{name}.{path}", value)

    return Row(
        cells=(
            Cell(text=name),
            _cell(str(side.runs), f"{name}.runs", side.runs),
            hours("gpu_seconds", side.gpu_seconds),
            hours("wasted_gpu_seconds", side.wasted_gpu_seconds),
            *(hours(f"wasted.{w}", side.wasted[w]) for w in wasted),
            _cell(share_text(side.waste_share), f"{name}.waste_share", side.waste_share),
        )
    )
