"""`gpuyield report`: placeholder until the ledger lands."""

from __future__ import annotations


def report_command() -> None:
    """Print the yield report."""
