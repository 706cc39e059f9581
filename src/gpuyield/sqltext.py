"""The one way a value written by someone else reaches the text of an SQL statement.

Values go to DuckDB as parameters (``con.execute(sql, [value])``) wherever a statement is run
whole. Where a statement is composed of fragments built in several places (a ``read_csv`` of a
file whose path the user chose, a cluster name as a column default, a manifest's regex inside a
``CASE``), the value is written into the text by ``literal`` here, and by nothing else:
``tests/test_sql_text.py`` fails on an f-string, ``%`` or ``.format`` that puts anything else into
SQL text. Identifiers (table names) are the code's own; ``identifier`` quotes the few that are not.
"""

from __future__ import annotations

import math

from gpuyield.errors import InputError


def literal(value: str | int | float | bool | None) -> str:
    """``value`` as an SQL literal: a string quoted (DuckDB's standard strings: a quote doubled,
    a backslash as it is), a whole number or a finite float in decimal, a boolean, ``NULL``."""
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        if isinstance(value, float) and not math.isfinite(value):
            raise ValueError(f"not a finite number for SQL: {value!r}")
        # int()/float() drop a subclass's own __str__; a negative number is bracketed, so that
        # "x - {literal(-2)}" never reads as "x --2", a comment.
        text = str(int(value)) if isinstance(value, int) else repr(float(value))
        return f"({text})" if value < 0 else text
    if not isinstance(value, str):
        raise TypeError(f"no SQL literal for {type(value).__name__}")
    return "'" + _encodable(value).replace("'", "''") + "'"


def identifier(name: str) -> str:
    """``name`` as a quoted SQL identifier (a double quote doubled)."""
    return '"' + _encodable(name).replace('"', '""') + '"'


def _encodable(text: str) -> str:
    """``text`` if DuckDB can hold it: UTF-8 without lone surrogates (a path with bytes that
    are not UTF-8 decodes to those) and without NUL, which ends a C string in the engine."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise InputError(
            f"{text.encode('utf-8', 'backslashreplace').decode('ascii', 'backslashreplace')!r} "
            "is not valid UTF-8",
            hint="rename the file (or the value) to UTF-8 text",
        ) from None
    if "\x00" in text:
        raise InputError(f"{text!r} holds a NUL character", hint="remove it")
    return text
