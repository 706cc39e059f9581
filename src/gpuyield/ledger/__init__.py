"""The ledger: where every installed GPU-second of a window went."""

from gpuyield.ledger.jobs import sql_pattern
from gpuyield.ledger.ledger import ALLOCATED, Ledger, backend_for, compute_ledger
from gpuyield.ledger.window import Window

__all__ = ["ALLOCATED", "Ledger", "Window", "backend_for", "compute_ledger", "sql_pattern"]
