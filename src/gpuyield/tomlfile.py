"""The one TOML loader: every TOML file gpuyield reads (manifests, scenarios, lab scenarios,
calibrations, catalogs, failure tables) goes through ``parse``, by ``load`` (a bundled name or a
path), ``read_file`` (a path) or ``read_bundled``.

Bundled files live under ``gpuyield/data/`` and are read with ``importlib.resources`` (they work from
a wheel or a zip); a user's file is any path, read as a small regular file (no FIFO, no device, at
most ``MAX_TOML_BYTES``). Errors name the file, the line of a syntax error and the key that is
wrong; nesting too deep for the parser is an error too, never a traceback.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import date, datetime, time
from pathlib import Path
from typing import Any

from gpuyield.errors import InputError, ParseError, UnknownIdError

_LINE = re.compile(r"\(at line (\d+), column \d+\)")
# No number gpuyield reads from TOML is near this (training compute is ~1e26 FLOPs): a value past
# it is a typo, and 1e300 days or GPUs overflowed every sum it reached.
MAX_MAGNITUDE = 1e30

#: A TOML value as ``tomllib`` returns it: what a loader validates, key by key, into its records.
TomlValue = (
    bool | int | float | str | datetime | date | time | list["TomlValue"] | dict[str, "TomlValue"]
)


@dataclass(frozen=True, kw_only=True, slots=True)
class TomlDocument:
    """A parsed TOML file and where it came from."""

    #: What errors name: the path given, or the bundled file's name.
    origin: str
    #: The parsed tables, as tomllib returns them; the caller validates their keys and values.
    data: dict[str, Any]


def read_small_text(path: Path, *, max_bytes: int, what: str) -> str:
    """A small text file (a manifest, a scenario, a token) read whole: a regular file of at most
    ``max_bytes`` of UTF-8. A FIFO or ``/dev/zero`` would block or never end; a file past the
    budget is not the small file it should be."""
    import os
    import stat

    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as error:
        raise InputError(
            f"{path}: cannot read {what}: {error.strerror}", hint="check the path"
        ) from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise InputError(
                f"{path}: {what} is not a regular file (a device, a FIFO or a folder)",
                hint="give the path of the file itself",
            )
        with os.fdopen(os.dup(fd), "rb") as handle:
            data = handle.read(max_bytes + 1)
    finally:
        os.close(fd)
    if len(data) > max_bytes:
        raise InputError(
            f"{path}: {what} is larger than {max_bytes:,} bytes",
            hint=f"a {what} is a small text file; is this the right file?",
        )
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        raise InputError(
            f"{path}: {what} is not UTF-8 text (byte {error.start})",
            hint="save it as UTF-8",
        ) from None


# A TOML file gpuyield reads (a manifest, a scenario, a lab) is kilobytes; 64 MiB holds a
# manifest of a million runs' settings.
MAX_TOML_BYTES = 64 << 20


def bundled_names(folder: str) -> list[str]:
    """The names of the TOML files bundled in ``gpuyield/data/<folder>``, sorted."""
    from importlib import resources

    root = resources.files("gpuyield").joinpath("data").joinpath(folder)
    return sorted(p.name.removesuffix(".toml") for p in root.iterdir() if p.name.endswith(".toml"))


def parse(text: str, origin: str) -> TomlDocument:
    """Parse TOML text; a syntax error becomes a ``ParseError`` with the file and line."""
    import tomllib  # here, not above: the manifest model imports this module, preflight no TOML

    try:
        data = tomllib.loads(text)
    except RecursionError:  # thousands of nested [ or { exhaust tomllib's recursion
        raise ParseError("nested too deeply", path=origin, hint="fix the TOML syntax") from None
    except tomllib.TOMLDecodeError as error:
        found = _LINE.search(str(error))
        raise ParseError(
            str(error),
            path=origin,
            line=int(found.group(1)) if found else None,
            hint="fix the TOML syntax",
        ) from error
    check_numbers(data, origin)
    return TomlDocument(origin=origin, data=data)


def check_numbers(data: Any, origin: str, where: str = "") -> None:
    """Refuse any number in a parsed TOML document that is not finite or is larger than
    ``MAX_MAGNITUDE``, naming its key (``run_settings.a.restart_s``): TOML reads ``inf`` and
    ``nan``, which compare false with every bound a setting is checked against."""
    if isinstance(data, dict):
        for key, value in data.items():
            check_numbers(value, origin, f"{where}.{key}" if where else str(key))
    elif isinstance(data, list):
        for index, value in enumerate(data):
            check_numbers(value, origin, f"{where}[{index}]")
    elif isinstance(data, int | float) and not isinstance(data, bool):
        if isinstance(data, float) and not math.isfinite(data):
            raise ParseError(
                f"{where} = {data!r} is not a finite number",
                path=origin,
                field=where,
                hint="write a number (inf and nan are not settings)",
            )
        if abs(data) > MAX_MAGNITUDE:
            raise ParseError(
                f"{where} = {data!r} is out of range (larger than {MAX_MAGNITUDE:g})",
                path=origin,
                field=where,
                hint="check the number's exponent",
            )


def read_bundled(folder: str, name: str) -> TomlDocument:
    """The bundled ``gpuyield/data/<folder>/<name>.toml``."""
    from importlib import resources

    resource = resources.files("gpuyield").joinpath("data").joinpath(folder)
    return parse(resource.joinpath(f"{name}.toml").read_text(encoding="utf-8"), f"{name}.toml")


def read_file(path: str | Path, *, kind: str) -> TomlDocument:
    """A user's TOML file ``path``; ``kind`` (``manifest``, ``calibration``) names it in errors."""
    path = Path(path)
    if not path.exists() and not path.is_symlink():
        raise InputError(f"{kind} file {path} does not exist", hint="check the path")
    return parse(read_small_text(path, max_bytes=MAX_TOML_BYTES, what=kind + " file"), str(path))


def load(name_or_path: str | Path, *, folder: str, kind: str) -> TomlDocument:
    """A bundled ``kind`` by name (from ``data/<folder>``), or a TOML file by path.

    A value ending in ``.toml``, or naming an existing file, is a path; anything else is a bundled
    name, and an unknown one gets the closest bundled names as a hint.
    """
    path = Path(name_or_path)
    if path.suffix == ".toml" or path.exists():
        return read_file(path, kind=kind)
    name = str(name_or_path)
    known = bundled_names(folder)
    if name not in known:
        raise UnknownIdError(kind, name, known)
    return read_bundled(folder, name)


def check_keys(
    table: Mapping[str, Any], known: Iterable[str], *, origin: str, where: str = ""
) -> None:
    """Refuse a key not in ``known``: the error names it (``fleet.num_gpu``) and lists the keys."""
    allowed = sorted(known)
    for key in table:
        if key not in allowed:
            field = f"{where}.{key}" if where else key
            raise ParseError(
                f"unknown key {field!r}",
                path=origin,
                field=field,
                hint=f"known: {', '.join(allowed)}",
            )
