"""Reports over the ledger: summary, breakdowns, HTML."""

from gpuyield.report.summary import (
    EssayShare,
    ReportWithBreakdown,
    YieldReport,
    build_report,
    build_report_with_breakdown,
)

__all__ = [
    "EssayShare",
    "ReportWithBreakdown",
    "YieldReport",
    "build_report",
    "build_report_with_breakdown",
]
