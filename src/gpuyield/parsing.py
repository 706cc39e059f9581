"""Values as people type them: one grammar for every flag, serve's query parameters and the library.

* **Durations**: ``30s``, ``5m``, ``1h``, ``2d``; compound, largest unit first, each unit once
  (``1h30m``, ``1d12h``); a decimal per unit (``1.5h``); a bare number is seconds (``90``), as
  ``sleep`` and ``timeout`` read it.
* **Instants**: ISO 8601 (``2026-11-30T11:00:00``, ``2026-11-30``, ``...Z``, ``...+02:00``). A time
  written without an offset is read in the time zone given beside it (``--tz``, default UTC);
  one with an offset or ``Z`` means what it says whatever the zone. Between 2000 and 2100, as
  every time an ingest accepts.
* **Counts**: whole numbers with an optional decimal suffix: ``16``, ``16k``, ``1.5M``, ``2B``,
  ``16,384``, ``2^14``. ``k``/``M``/``B`` (or ``G``)/``T``/``P`` are 10^3 .. 10^15; ``m`` is
  also a million (no count is a thousandth of anything).
* **Numbers** (the estimator's inputs): the counts' grammar plus fractions, exponents
  (``1.5e12``), ``$30M`` and ``40%``.
* **Sizes**: bytes in binary units (``4G`` is 4 GiB, ``512M``, ``100k``), as limits on memory
  and disk are counted.
* **Time zones**: IANA names (``UTC``, ``Europe/Berlin``).

Errors are ``FieldError``s naming the library's field (``collect.overlap``); the CLI says the flag
(``--overlap``) and serve the query parameter (``top``). Nothing is clamped: a value out of range
is refused with an example of one in range.
"""

from __future__ import annotations

import math
import re
from datetime import UTC, datetime, tzinfo
from functools import lru_cache

from gpuyield.errors import FieldError

# What any typed value may be: a longer one is a paste gone wrong, and regexes and int() stay cheap.
MAX_TEXT = 64

# --- durations -------------------------------------------------------------------------------

_UNITS_S = {"d": 86_400, "h": 3_600, "m": 60, "s": 1}
_PART = r"(?:(?P<{0}>\d+(?:\.\d+)?){0})?"
# ASCII digits only: Python's \d and float() also read "１" (a fullwidth one), which nobody types.
_DURATION = re.compile("".join(_PART.format(unit) for unit in _UNITS_S), re.ASCII)
_BARE = re.compile(r"\d+(?:\.\d+)?", re.ASCII)
#: A century: past it a duration is a typo (and 1e300 s overflowed every sum it reached).
MAX_DURATION_S = 100 * 366 * 86_400
DURATION_EXAMPLES = "30s, 5m, 1h, 2d or 1h30m"


def duration_s(text: str) -> float | None:
    """The seconds ``text`` writes as a duration, or None when it is not one (no bounds)."""
    cleaned = text.strip()
    if not cleaned or len(cleaned) > MAX_TEXT:
        return None
    if _BARE.fullmatch(cleaned):
        return float(cleaned)
    match = _DURATION.fullmatch(cleaned)
    if match is None or not any(match.groupdict().values()):
        return None
    return sum(float(n) * _UNITS_S[unit] for unit, n in match.groupdict().items() if n)


def parse_duration(
    text: str,
    *,
    field: str,
    at_least_s: float = 0.0,
    at_most_s: float = MAX_DURATION_S,
    example: str = "30m",
) -> float:
    """A duration in seconds, between ``at_least_s`` and ``at_most_s`` (both included)."""
    seconds = duration_s(text)
    if seconds is None:
        raise FieldError(
            field, f"is not a duration ({DURATION_EXAMPLES}): {text[:MAX_TEXT]!r}", example=example
        )
    if not at_least_s <= seconds <= at_most_s:
        raise FieldError(
            field,
            f"must be from {format_duration(at_least_s)} to {format_duration(at_most_s)}, "
            f"not {text.strip()!r}",
            example=example,
        )
    return seconds


def parse_seconds(
    text: str,
    *,
    field: str,
    at_least_s: int = 0,
    at_most_s: int = MAX_DURATION_S,
    example: str = "30m",
) -> int:
    """A duration in whole seconds (``1.5m`` is 90; ``0.5s`` is refused)."""
    seconds = parse_duration(
        text, field=field, at_least_s=at_least_s, at_most_s=at_most_s, example=example
    )
    if seconds != int(seconds):
        raise FieldError(field, f"must be whole seconds, not {text.strip()!r}", example=example)
    return int(seconds)


def format_duration(seconds: float) -> str:
    """A duration in this grammar, largest units first: ``90`` -> ``1m30s``, ``0`` -> ``0s``."""
    if seconds != int(seconds):
        return f"{seconds:g}s"
    left, parts = int(seconds), []
    for unit, size in _UNITS_S.items():
        if left >= size:
            parts.append(f"{left // size}{unit}")
            left %= size
    return "".join(parts) or "0s"


# --- instants --------------------------------------------------------------------------------

#: The times an ingest accepts (before any GPU cluster, or past what the ledger holds: a typo).
EARLIEST_S = 946_684_800  # 2000-01-01T00:00:00Z
LATEST_S = 4_102_444_800  # 2100-01-01T00:00:00Z
INSTANT_EXAMPLE = "2026-11-30T11:00:00"
DEFAULT_ZONE = "UTC"


def read_instant(text: str, *, field: str) -> datetime:
    """An ISO 8601 time as written: naive (no offset) or aware. Its zone is applied by ``epoch_s``."""
    cleaned = text.strip()
    try:
        if len(cleaned) > MAX_TEXT or not cleaned.isascii():
            raise ValueError
        value = datetime.fromisoformat(cleaned)
    except ValueError:
        raise FieldError(
            field,
            f"is not an ISO 8601 time (like {INSTANT_EXAMPLE}, 2026-11-30 or "
            f"{INSTANT_EXAMPLE}Z): {text[:MAX_TEXT]!r}",
            example=INSTANT_EXAMPLE,
        ) from None
    if not 2000 <= value.year < 2100:
        raise FieldError(field, f"is outside 2000..2100: {cleaned!r}", example=INSTANT_EXAMPLE)
    return value


def epoch_s(value: datetime, *, tz: str = DEFAULT_ZONE, field: str) -> int:
    """Epoch seconds of a time from ``read_instant``: a naive one is read in ``tz``.

    A local time that a daylight-saving change skips or repeats is read as Python's zoneinfo
    reads it (``fold=0``: the earlier of two).
    """
    if value.tzinfo is None:
        value = value.replace(tzinfo=zone(tz, field=field))
    instant = int(value.timestamp())
    if not EARLIEST_S <= instant < LATEST_S:
        raise FieldError(
            field, f"is outside 2000..2100: {value.isoformat()}", example=INSTANT_EXAMPLE
        )
    return instant


def parse_instant(text: str, *, tz: str = DEFAULT_ZONE, field: str) -> int:
    """An ISO 8601 time as epoch seconds; without an offset it is a time in ``tz``."""
    return epoch_s(read_instant(text, field=field), tz=tz, field=field)


def zone(name: str, *, field: str = "tz") -> tzinfo:
    """The IANA time zone ``name`` (``UTC``, ``Europe/Berlin``)."""
    return _zone(check_zone(name, field=field))


def check_zone(name: str, *, field: str = "tz") -> str:
    """``name`` if it is a time zone this machine knows; a ``FieldError`` naming it if not."""
    cleaned = name.strip()
    try:
        _zone(cleaned)
    except (KeyError, ValueError):  # ZoneInfoNotFoundError is a KeyError; "../x" a ValueError
        raise FieldError(
            field,
            f"is not a time zone: {name[:MAX_TEXT]!r} (an IANA name like UTC or Europe/Berlin)",
            example="Europe/Berlin",
        ) from None
    return cleaned


@lru_cache(maxsize=16)
def _zone(name: str) -> tzinfo:
    if name == DEFAULT_ZONE:
        return UTC
    if not name or len(name) > MAX_TEXT:
        raise ValueError(name)
    from zoneinfo import ZoneInfo  # reads the tz database: only for zones other than UTC

    return ZoneInfo(name)


# --- numbers and counts ----------------------------------------------------------------------

#: Decimal suffixes. ``G`` is accepted because the essay writes ``405G``; ``B`` (billion) is usual.
SUFFIXES: dict[str, float] = {"k": 1e3, "m": 1e6, "b": 1e9, "g": 1e9, "t": 1e12, "p": 1e15}
COUNT_EXAMPLES = "16, 16k or 1.5M"
_DECIMAL = r"(?:\d{1,3}(?:,\d{3})+|\d[\d_]*)(?:\.\d*)?|\.\d+"
#: The grammar of one number (the estimator reads its parts: the place of its last digit).
NUMBER = re.compile(
    rf"(?P<dollar>\$)?(?P<mantissa>{_DECIMAL})(?P<exponent>[eE][+-]?\d+)?"
    r"(?P<suffix>[kKmMbBgGtTpP])?(?P<percent>%)?",
    re.ASCII,
)
_POWER = re.compile(r"(?P<base>\d+(?:\.\d+)?)\^(?P<power>-?\d+)", re.ASCII)


def number(text: str, *, money: bool = True) -> float | None:
    """The value of a number as people type it (``405B``, ``2^24``, ``$30M``, ``40%``).

    None when ``text`` is not one; ``math.inf`` when it is one too large for a float (``1e999``).
    ``money=False`` refuses ``$`` and ``%`` (a count is neither).
    """
    cleaned = text.strip()
    if len(cleaned) > MAX_TEXT:
        return None
    power = _POWER.fullmatch(cleaned)
    if power:
        try:
            return float(power["base"]) ** int(power["power"])
        except OverflowError:  # 10^400
            return math.inf
    match = NUMBER.fullmatch(cleaned)
    if match is None or (not money and (match["dollar"] or match["percent"])):
        return None
    value = float(match["mantissa"].replace(",", "").replace("_", "") + (match["exponent"] or ""))
    value *= SUFFIXES[match["suffix"].lower()] if match["suffix"] else 1.0
    return value / 100.0 if match["percent"] else value


NUMBER_EXAMPLES = "0.4, 40%, 1.5e12 or 70B"


def parse_number(text: str, *, field: str, example: str = "0.4") -> float:
    """One finite number as people type it (``0.4``, ``40%``, ``1.5e12``, ``70B``)."""
    value = number(text)
    if value is None or not math.isfinite(value):
        raise FieldError(
            field, f"is not a number ({NUMBER_EXAMPLES}): {text[:MAX_TEXT]!r}", example=example
        )
    return value


def parse_count(
    text: str, *, field: str, at_least: int = 0, at_most: int | None = None, example: str = "16k"
) -> int:
    """A whole number as people type it (``16k``, ``1.5M``), from ``at_least`` to ``at_most``."""
    value = number(text, money=False)
    if value is None or not math.isfinite(value) or value != int(value):
        raise FieldError(
            field,
            f"is not a whole number ({COUNT_EXAMPLES}): {text[:MAX_TEXT]!r}",
            example=example,
        )
    count = int(value)
    if count < at_least or (at_most is not None and count > at_most):
        bound = f"from {at_least:,} to {at_most:,}" if at_most is not None else f">= {at_least:,}"
        raise FieldError(field, f"must be {bound}, not {text.strip()!r}", example=example)
    return count


# --- sizes -----------------------------------------------------------------------------------

#: Binary multiples, as ``ulimit``, ``--max-output`` and DuckDB's MiB read them: a size limit
#: guards memory and disk, which are counted in powers of two (``4G`` is 4 GiB, not 4e9 bytes).
_SIZE_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}
_SIZE = re.compile(r"(?P<n>\d+(?:\.\d+)?)(?P<unit>[kmgt]?)(?:i?b)?", re.ASCII | re.IGNORECASE)
SIZE_EXAMPLES = "4G, 512M, 100k or bytes"


def parse_size(
    text: str, *, field: str, at_least: int = 1, at_most: int = 1 << 50, example: str = "4G"
) -> int:
    """A size in bytes (``4G``, ``512MiB``, ``100k``, ``1048576``), binary units, whole bytes."""
    cleaned = text.strip()
    match = _SIZE.fullmatch(cleaned) if len(cleaned) <= MAX_TEXT else None
    if match is None:
        raise FieldError(
            field, f"is not a size ({SIZE_EXAMPLES}): {text[:MAX_TEXT]!r}", example=example
        )
    size = int(float(match["n"]) * _SIZE_UNITS[match["unit"].lower()])
    if not at_least <= size <= at_most:
        raise FieldError(
            field,
            f"must be from {at_least:,} to {at_most:,} bytes, not {cleaned!r}",
            example=example,
        )
    return size
