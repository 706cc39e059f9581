"""The ``report --json`` document: one function, so the CLI and ``gpuyield serve`` print the same."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from gpuyield.report.breakdown import Breakdown
    from gpuyield.report.summary import YieldReport

#: A JSON object as ``json`` reads and writes it.
JsonObject = dict[str, object]


def report_document(report: YieldReport, cut: Breakdown | None = None) -> JsonObject:
    """The report (and its breakdown, when one was asked for) in the docs/contracts.md shape."""
    data: JsonObject = report.to_dict()
    if cut is not None:
        data["breakdown"] = cut.to_dict()
    return data


def report_json_text(report: YieldReport, cut: Breakdown | None = None) -> str:
    """``gpuyield report --json``'s output, byte for byte (without the final newline)."""
    return json.dumps(report_document(report, cut), indent=2, sort_keys=False, default=str)
