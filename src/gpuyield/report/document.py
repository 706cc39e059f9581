"""The ``report --json`` document: one function, so the CLI and ``gpuyield serve`` print the same."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from gpuyield.report.summary import ReportWithBreakdown

if TYPE_CHECKING:
    from gpuyield.report.breakdown import Breakdown
    from gpuyield.report.summary import YieldReport


def report_json_text(report: YieldReport, cut: Breakdown | None = None) -> str:
    """``gpuyield report --json``'s output, byte for byte (without the final newline)."""
    # The shape is ReportWithBreakdown's (docs/contracts.md); this only fixes the text.
    document = ReportWithBreakdown(report=report, breakdown=cut).to_dict()
    return json.dumps(document, indent=2, sort_keys=False, default=str)
