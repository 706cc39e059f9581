"""How gpuyield writes an instant for people and JSON: ISO 8601 in UTC, with a ``Z``."""

from __future__ import annotations

import time
from datetime import UTC, datetime

from gpuyield.errors import FieldError


def iso_utc(epoch_s: float) -> str:
    """``2026-11-30T10:40:47Z`` for epoch seconds."""
    return datetime.fromtimestamp(epoch_s, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


# How far past this machine's clock a window may end: the clocks of the machine that ran sacct
# and of this one differ by seconds, rarely minutes. A window ending later covers the future:
# a report would count hours nobody has lived as idle, and every later collect would find
# nothing new until then.
CLOCK_SKEW_S = 600


def check_window(
    since_s: int | None,
    until_s: int | None,
    *,
    since_field: str,
    until_field: str,
    now_s: float | None = None,
) -> None:
    """Refuse a window that ends after now (beyond ``CLOCK_SKEW_S``) or ends before it begins.

    ``since_field``/``until_field`` name the values as the library does (``ingest.until``); the
    CLI maps them to its flags.
    """
    now = time.time() if now_s is None else now_s
    if until_s is not None and until_s > now + CLOCK_SKEW_S:
        raise FieldError(
            until_field,
            f"is {iso_utc(until_s)}, after now ({iso_utc(now)}): a capture cannot cover the "
            f"future (clocks may differ by up to {CLOCK_SKEW_S // 60} minutes; a simulated "
            "capture gives its own present with ingest.now)",
            example=iso_utc(now).removesuffix("Z"),
        )
    if since_s is not None and until_s is not None and since_s >= until_s:
        raise FieldError(
            since_field,
            f"({iso_utc(since_s)}) must be before the window's end ({iso_utc(until_s)})",
            example=iso_utc(until_s - 86_400).removesuffix("Z"),
        )
    if since_s is not None and since_s > now + CLOCK_SKEW_S:
        raise FieldError(
            since_field,
            f"is {iso_utc(since_s)}, after now ({iso_utc(now)})",
            example=iso_utc(now - 86_400).removesuffix("Z"),
        )
