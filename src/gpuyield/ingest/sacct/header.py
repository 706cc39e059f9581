"""What an sacct file's first line (or ``ingest.fields``) says: the field names, the delimiter they
are written with, and which column holds each field gpuyield reads.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from gpuyield.errors import ParseError, UnknownFormat

# Fields the ledger cannot work without, by any of the names sacct may print them under.
_REQUIRED = {
    "jobidraw": ("jobidraw", "jobid"),
    "state": ("state",),
    "start": ("start",),
    "end": ("end",),
    "nodelist": ("nodelist",),
}
_OPTIONAL = (
    "jobid",
    "jobname",
    "user",
    "account",
    "partition",
    "qos",
    "exitcode",
    "submit",
    "elapsedraw",
    "elapsed",
    "alloctres",
    "allocgres",
    "reqtres",
    "nnodes",
    "comment",
    "reason",
    "cluster",
)
# A pipe found inside a record goes to the first of these present: free text most likely to hold one.
FREE_TEXT = ("submitline", "comment", "jobname", "workdir")


@dataclass(frozen=True, kw_only=True, slots=True)
class SacctHeader:
    """What an sacct file's first line (or ``--fields``) says about its records."""

    field_names: tuple[str, ...]
    """The fields of every record, in file order (``TRAILING`` for ``sacct -p``'s last, empty one)."""
    header_lines: int
    """Lines before the first record: 1 for a header line, 0 with ``--fields``."""


def read_header(path: Path, fields: list[str] | None) -> SacctHeader:
    """The field names and how many lines they take (0 with ``--fields``).

    ``sacct -p`` (``--parsable``) ends every line, the header too, with a ``|``: its names end
    with ``TRAILING``, a field that is always empty and that nothing reads.
    """
    # utf-8-sig: a byte-order mark some editors put first is not part of the first name.
    with path.open(encoding="utf-8-sig") as handle:
        first = handle.readline().rstrip("\r\n")
    if fields:
        fields = _format_names(path, fields)
        if "|" not in first and len(fields) > 1:
            raise UnknownFormat(
                f"{path}: line 1 has no '|' between its fields: not sacct -P output, or written "
                "with an sacct --delimiter that line 1 does not show",
                hint="capture with sacct -P (or -p), or keep the header line (no sacct --noheader)",
            )
        # -p without a header: the first record has one (empty) field more than ingest.fields names.
        parts = first.split("|")
        trailing = len(parts) == len(fields) + 1 and parts[-1] == ""
        given = (*fields, TRAILING) if trailing else tuple(fields)
        return SacctHeader(field_names=given, header_lines=0)
    names = first.split("|")
    if len(names) > 2 and names[-1] == "":
        names[-1] = TRAILING
    if len(names) < 2 or any(not _is_field_name(n) for n in names):
        raise UnknownFormat(
            f"{path}: line 1 is not an sacct -P header: {first[:80]!r}",
            hint=_other_delimiter_hint(first)
            or "run sacct with -P (--parsable2) or -p; for sacct --noheader output pass ingest.fields",
        )
    return SacctHeader(field_names=tuple(names), header_lines=1)


def detect_delimiter(path: Path, fields: list[str] | None) -> str | None:
    """The character between the fields of an sacct file: ``|`` (``-P``/``-p``), or another one
    written with ``sacct --delimiter`` (found on the header line, or, with ``--fields``, as the
    one character every field boundary of line 1 has); None when line 1 shows none."""
    with path.open(encoding="utf-8-sig", errors="replace") as handle:
        first = handle.readline(_FIRST_LINE_BYTES).rstrip("\r\n")
    if "|" in first or not first:
        return "|" if first else None
    if not fields:
        return _header_delimiter(first)
    wanted = (len(fields) - 1, len(fields))  # -P, or -p with its trailing delimiter
    found = [
        c
        for c in sorted(set(first))
        if not (c.isalnum() or c in _IN_VALUES or c == "\ufffd") and first.count(c) in wanted
    ]
    return found[0] if len(found) == 1 else None


def _header_delimiter(first: str) -> str | None:
    other = next((c for c in first if not (c.isalnum() or c in "_|")), None)
    if other is None or other == "\ufffd" or (other.isspace() and other != "\t"):
        return None
    names = first.rstrip(other).split(other)
    if len(names) < 2 or not all(_SACCT_NAME.fullmatch(n) for n in names):
        return None
    return other


# What every sacct field name looks like (a header of other text is no header).
_SACCT_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_]*")


def delimiter_copy(path: Path, directory: Path, fields: list[str] | None) -> Path | None:
    """A copy of ``path`` in ``directory`` with its ``sacct --delimiter`` character replaced by
    ``|``, or None when the file uses ``|`` already (or shows no delimiter: the reader then names
    what it found). Refused when a value holds a ``|``: which ones are delimiters is unknown."""
    delimiter = detect_delimiter(path, fields)
    if delimiter in (None, "|"):
        return None
    assert delimiter is not None
    target = directory / path.name
    # Bytes, not text: bytes that are not UTF-8 are named by the file scan, with their line.
    old, new = delimiter.encode("utf-8"), b"|"
    with path.open("rb") as source, target.open("wb") as out:
        for number, line in enumerate(source, start=1):
            if new in line:
                raise ParseError(
                    f"the fields are separated by {delimiter!r} (sacct --delimiter) and a value "
                    "holds '|'",
                    path=path,
                    line=number,
                    hint="capture again with sacct -P, whose delimiter is '|'",
                )
            out.write(line.replace(old, new))
    return target


def use_pipe_copy(
    copies: dict[str, Path],
    renamed: dict[str, str],
    given: Path,
    directory: Path,
    fields: list[str] | None,
) -> None:
    """Replace the sacct input (its plain copy, or ``given``) in ``copies`` by a ``delimiter_copy``
    when it was written with another delimiter, mapping the copy to the path the user gave."""
    current = copies.get("sacct", given)
    if not current.is_file():
        return  # the reader names what is wrong with it
    (directory / "sacct-delimited").mkdir()
    delimited = delimiter_copy(current, directory / "sacct-delimited", fields)
    if delimited is not None:
        copies["sacct"] = delimited
        renamed[str(delimited)] = renamed.pop(str(current), str(given))


# Characters that appear inside sacct values (times, TRES, node lists, names): never taken for a
# delimiter. The first line read for detection is bounded: a header is a few hundred bytes.
_IN_VALUES = "_-.:/,=[]()%+@ "
_FIRST_LINE_BYTES = 1 << 20


def _other_delimiter_hint(first: str) -> str | None:
    """A hint when line 1 is a header written with ``sacct --delimiter`` (names split by
    another character): gpuyield reads sacct's own ``|``."""
    other = next((c for c in first if not (c.isalnum() or c in "_|")), None)
    if other is None or "|" in first or other.isspace():
        return None
    names = first.rstrip(other).split(other)
    if len(names) < 2 or not all(_is_field_name(n) for n in names):
        return None
    return (
        f"this looks like sacct --delimiter={other!r} output; re-run sacct -P without --delimiter"
    )


# The name of the empty field after the last ``|`` of ``sacct -p`` lines (never a sacct field).
TRAILING = "(end of line)"
# sacct --format takes an output width after a name (JobName%30, State%-12): the name is the field.
_WIDTH = re.compile(r"%-?\d+$")


def _format_names(path: Path, fields: list[str]) -> list[str]:
    """The field names of a ``--format`` list as given to sacct, widths dropped."""
    names = [_WIDTH.sub("", f.strip()) for f in fields]
    for given, name in zip(fields, names, strict=True):
        if not _is_field_name(name) or name == TRAILING:
            raise UnknownFormat(
                f"{path}: ingest.fields names {given!r}, which is not an sacct field",
                hint="give ingest.fields the sacct --format list of the capture, e.g. JobID,"
                "JobIDRaw,State,Start,End,AllocTRES,NodeList (widths such as JobName%30 are fine)",
            )
    return names


def _is_field_name(name: str) -> bool:
    return name == TRAILING or (bool(name) and name.replace("_", "").isalnum())


def column_map(path: Path, names: Sequence[str]) -> dict[str, int]:
    lowered = [n.lower() for n in names]
    columns: dict[str, int] = {}
    for key, aliases in _REQUIRED.items():
        found = next((lowered.index(a) for a in aliases if a in lowered), None)
        if found is None:
            raise UnknownFormat(
                f"{path}: sacct output lacks the field {aliases[0]!r}",
                hint="include JobIDRaw,State,Start,End,NodeList,AllocTRES,Submit in sacct --format",
            )
        columns[key] = found
    for key in (*_OPTIONAL, *FREE_TEXT):
        if key in lowered:
            columns[key] = lowered.index(key)
    return columns
