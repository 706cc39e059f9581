"""Type checks of scenario TOML tables before they become dataclasses.

A value of the wrong type (``tokens = "100B"``) used to surface as a Python ``TypeError`` from deep
inside the simulator; here it is a ``ParseError`` naming the key, the type expected and the value.
"""

from __future__ import annotations

import typing
from enum import Enum
from typing import Any

from gpuyield.errors import ParseError

_NAMES = {int: "an integer", float: "a number", str: "a string", bool: "true or false"}


def check_array(value: Any, where: str, origin: str) -> list[Any]:
    """``value`` when it is an array of tables (``[[where]]``), else a ``ParseError``."""
    if not isinstance(value, list):
        raise ParseError(
            f"{where} must be an array of tables ([[{where}]]), got {type(value).__name__}",
            path=origin,
            field=where,
            hint="see docs/simulate.md for the scenario format",
        )
    return value


def check_table(cls: type, data: Any, where: str, origin: str) -> None:
    """Raise a ``ParseError`` unless ``data`` is a dict whose keys are fields of ``cls`` with
    values of their types."""
    if not isinstance(data, dict):
        raise ParseError(
            f"[{where}] must be a table, got {_kind(data)}",
            path=origin,
            field=where,
            hint="see docs/simulate.md for the scenario format",
        )
    hints = typing.get_type_hints(cls)
    for key, value in data.items():
        if key not in hints:
            raise ParseError(
                f"{where}.{key} is not a known key",
                path=origin,
                field=f"{where}.{key}",
                hint=f"known keys of [{where}]: {', '.join(sorted(hints))}",
            )
        expected = _expected(hints[key])
        if expected is not None and not _matches(value, hints[key]):
            raise ParseError(
                f"{where}.{key} must be {expected}, got {_kind(value)} {value!r}",
                path=origin,
                field=f"{where}.{key}",
                hint="write numbers without quotes or units (e.g. tokens = 1.5e13)",
            )


def _expected(hint: Any) -> str | None:
    if hint in _NAMES:
        return _NAMES[hint]
    if isinstance(hint, type) and issubclass(hint, Enum):
        return "one of " + ", ".join(repr(m.value) for m in hint)
    if typing.get_origin(hint) is dict:
        return "a table of numbers"
    return None  # nested tables, lists of tables and dates are checked where they are built


def _matches(value: Any, hint: Any) -> bool:
    if hint is bool:
        return isinstance(value, bool)
    if isinstance(value, bool):
        return False  # true/false is not a number or a string
    if hint is int:
        return isinstance(value, int)
    if hint is float:
        return isinstance(value, int | float)
    if hint is str:
        return isinstance(value, str)
    if isinstance(hint, type) and issubclass(hint, Enum):
        return isinstance(value, str)
    if typing.get_origin(hint) is dict:
        return isinstance(value, dict) and all(
            isinstance(v, int | float) and not isinstance(v, bool) for v in value.values()
        )
    return True


def _kind(value: Any) -> str:
    names = {bool: "a boolean", int: "an integer", float: "a number", str: "a string"}
    names.update({dict: "a table", list: "an array"})
    return names.get(type(value), type(value).__name__)
