"""Numbers as people type them (`405B`, `15T`, `2^24`, `$30M`, `40%`), ranges, and their display.

Every numeric input of the estimator is a ``Range``: a single number is a range whose low, central
and high values are equal. ``low:high`` gives a range whose central value is the geometric mean
when both ends are positive (these quantities span orders of magnitude, so the middle of 100B:400B
is 200B, not 250B), and ``low:central:high`` states all three.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from gpuyield.errors import FieldError, InputError
from gpuyield.parsing import NUMBER, SUFFIXES, number

_HINT = (
    "write a number like 405B, 15T, 16k, 16M, 2^24, 1.5e12, $30M or 40%, "
    "or a range low:high or low:central:high"
)


@dataclass(frozen=True, kw_only=True, slots=True)
class Range:
    """A quantity known to lie between ``low`` and ``high``, with a best guess ``central``."""

    #: Smallest plausible value.
    low: float
    #: Best single value (equal to low and high for an exact input).
    central: float
    #: Largest plausible value.
    high: float

    def __post_init__(self) -> None:
        for name in ("low", "central", "high"):
            if not math.isfinite(getattr(self, name)):
                raise InputError(f"range.{name} must be a finite number, got {getattr(self, name)}")
        if not self.low <= self.central <= self.high:
            raise InputError(
                f"range must satisfy low <= central <= high, got "
                f"{self.low:g} : {self.central:g} : {self.high:g}",
                hint="write ranges as low:high or low:central:high, smallest first",
            )

    @classmethod
    def point(cls, value: float) -> Range:
        """An exact value."""
        return cls(low=value, central=value, high=value)

    @property
    def is_point(self) -> bool:
        """True when low, central and high are the same number."""
        return self.low == self.central == self.high

    def to_dict(self) -> float | dict[str, float]:
        """A plain number for an exact value, else ``{"low", "central", "high"}``."""
        if self.is_point:
            return self.central
        return {"low": self.low, "central": self.central, "high": self.high}


def parse_number(text: str, *, field: str) -> float:
    """Read one number as people type it (``gpuyield.parsing``'s grammar); ``field`` names the
    value in the error message (the library's name, ``estimate.tokens``, or a file's key,
    ``labs.meta.mfu``)."""
    value = number(text)
    if value is None:
        raise FieldError(field, f": cannot read {text!r} as a number", hint=_HINT)
    if not math.isfinite(value):
        raise FieldError(field, f": {text!r} is too large to be a number", hint=_HINT)
    return value


def parse_range(text: str, *, field: str) -> Range:
    """Read a number or a range ``low:high`` / ``low:central:high``."""
    parts = text.split(":")
    if len(parts) > 3:
        raise FieldError(field, f": {text!r} has more than three parts", hint=_HINT)
    values = [parse_number(part, field=field) for part in parts]
    if len(values) == 1:
        return Range.point(values[0])
    if len(values) == 2:
        low, high = values
        central = math.sqrt(low * high) if low > 0 and high > 0 else (low + high) / 2
        values = [low, central, high]
    low, central, high = values
    if not low <= central <= high:
        raise FieldError(
            field,
            f": range {text!r} is not ordered low <= central <= high",
            hint="write ranges as low:high or low:central:high, smallest first",
        )
    return Range(low=low, central=central, high=high)


#: Anything a library function accepts as a number: typed text, a plain number, or a Range.
NumberLike = str | float | int | Range


def as_range(value: NumberLike, *, field: str) -> Range:
    """Turn any accepted input into a ``Range``, naming ``field`` in errors."""
    if isinstance(value, Range):
        return value
    if isinstance(value, str):
        return parse_range(value, field=field)
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise FieldError(field, f": expected a number, got {type(value).__name__}", hint=_HINT)
    if not math.isfinite(value):
        raise FieldError(field, f": {value!r} is not a finite number", hint=_HINT)
    return Range.point(float(value))


def require_positive(value: Range, *, field: str) -> Range:
    """Raise unless every end of the range is > 0 (counts, rates, sizes and prices are)."""
    if value.low <= 0:
        raise FieldError(field, f"must be > 0, got {format_number(value.low)}")
    return value


def require_fraction(value: Range, *, field: str) -> Range:
    """Raise unless the range lies in (0, 1] (MFU, efficiency): a typed `40` would mean 4000%."""
    if value.low <= 0 or value.high > 1:
        raise FieldError(
            field,
            f"must be a fraction in (0, 1], got {format_range(value)}",
            hint="write 0.4 or 40%",
        )
    return value


def format_number(value: float, unit: str = "") -> str:
    """A short human form: 3.65e25, 30.84M, 65.1, 0.345; ``unit`` is appended after a space."""
    text = _format_bare(value)
    return f"{text} {unit}".rstrip() if unit else text


def _format_bare(value: float) -> str:
    magnitude = abs(value)
    if magnitude == 0:
        return "0"
    if value == int(value) and magnitude < 1e6:
        return f"{int(value):,}"  # counts like 16,384 GPUs read better exact
    if magnitude >= 1e15 or magnitude < 1e-3:
        return f"{value:.3e}".replace("e+", "e")
    for suffix, scale in (("T", 1e12), ("B", 1e9), ("M", 1e6), ("k", 1e3)):
        if magnitude >= scale:
            return f"{value / scale:.4g}{suffix}"
    return f"{value:.4g}"


def format_range(value: Range, unit: str = "") -> str:
    """``format_number`` for a point, ``low .. central .. high`` for a range."""
    if value.is_point:
        return format_number(value.central, unit)
    parts = " .. ".join(_format_bare(v) for v in (value.low, value.central, value.high))
    return f"{parts} {unit}".rstrip() if unit else parts


def format_percent(value: Range) -> str:
    """A fraction shown as a percentage (0.345 -> 34.5%)."""
    if value.is_point:
        return f"{value.central * 100:.3g}%"
    return " .. ".join(f"{v * 100:.3g}%" for v in (value.low, value.central, value.high))


def last_digit_unit(text: str, *, field: str) -> float:
    """Place value of the last nonzero digit as typed: `940k` -> 1e4, `5.5%` -> 1e-3.

    A figure written to that place stands for anything that rounds to it, which is how the essay
    check decides how much slack a stated number gets.
    """
    match = NUMBER.fullmatch(text.strip())
    if match is None:
        raise FieldError(field, f": cannot read {text!r} as a number", hint=_HINT)
    mantissa = match["mantissa"].replace(",", "").replace("_", "")
    whole, _, fraction = mantissa.partition(".")
    if fraction.rstrip("0"):
        place = -len(fraction.rstrip("0"))
    else:
        stripped = whole.rstrip("0")
        place = len(whole) - len(stripped) if stripped else 0
    unit = 10.0**place
    unit *= 10.0 ** int(match["exponent"][1:]) if match["exponent"] else 1.0
    if match["suffix"]:
        unit *= SUFFIXES[match["suffix"].lower()]
    if match["percent"]:
        unit /= 100.0
    return unit
