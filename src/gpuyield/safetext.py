"""User-controlled text made safe to show: job comments, names, accounts and node reasons are
written by whoever submits a job, and a terminal obeys escape sequences in them (colours, window
titles, cursor moves, hyperlinks); SVG and HTML cannot even hold most control characters.

``visible`` replaces every control character (C0, DEL, C1, and the invisible bidirectional
overrides that reorder what a reader sees) by its escape, ``\\x1b``, so the text reads as what it
is. The stored data stays as it was: only what is shown changes.
"""

from __future__ import annotations

import re

# C0 and C1 controls, DEL, and the bidirectional formatting characters (U+200E/F, U+202A-E,
# U+2066-9): "Trojan source" text that displays in an order other than its bytes.
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def visible(text: str) -> str:
    """``text`` with every control character written as its escape (``\\x1b``, ``\\u202e``)."""
    return _CONTROL.sub(_escape, text) if _CONTROL.search(text) else text


def chart_label(text: str) -> str:
    """``visible`` text for a matplotlib label, where ``$`` would start mathtext."""
    return visible(text).replace("$", r"\$")
