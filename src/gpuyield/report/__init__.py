"""Reports over the ledger: summary, breakdowns, HTML."""

from gpuyield.report.summary import YieldReport, build_report, build_report_with_breakdown

__all__ = ["YieldReport", "build_report", "build_report_with_breakdown"]
