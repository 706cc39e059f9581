"""How gpuyield writes an instant for people and JSON: ISO 8601 in UTC, with a ``Z``."""

from __future__ import annotations

from datetime import UTC, datetime


def iso_utc(epoch_s: float) -> str:
    """``2026-11-30T10:40:47Z`` for epoch seconds."""
    return datetime.fromtimestamp(epoch_s, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
