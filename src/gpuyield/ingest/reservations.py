"""Maintenance reservations: ``sacctmgr -P show reservation`` or ``scontrol -o show reservation``.

A reservation with the ``MAINT`` flag takes its nodes out of service for maintenance, but Slurm
writes no node event for it (sreport counts it as "PLND Down"): without this input its time would
be idle. Each MAINT reservation becomes a planned node event per node (state ``MAINT``, reason
``reservation <name>``) in ``node_events``, so the ledger's down rule applies unchanged: a job
still running there (``IGNORE_JOBS``) keeps its GPUs allocated. Other reservations hold nodes for
someone who may not use them: that is idle time, and they are counted as skipped.

Formats, detected from the content:
- ``sacctmgr -P show reservation start=... format=Cluster,Name,TimeStart,TimeEnd,Flags,NodeNames``
  (history; the default format lacks the flags and nodes, and is refused with the format to use);
- ``scontrol -o show reservation`` (current and future reservations only).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa

from gpuyield.errors import ParseError, UnknownFormat
from gpuyield.hostlist import expand_hostlist
from gpuyield.ingest._sql import Problem
from gpuyield.ingest.events import NODE_COLUMNS, rows_table, time_field
from gpuyield.ingest.nodes import key_values

SOURCE = "slurm.reservations"

FORMAT = "Cluster,Name,TimeStart,TimeEnd,Flags,NodeNames"
_HINT = f"give `sacctmgr -P show reservation start=<window start> format={FORMAT}`"
# sacctmgr's header names (the format's NodeNames prints as NodeName), and scontrol's keys.
_SACCTMGR = {
    "name": "Name",
    "start": "TimeStart",
    "end": "TimeEnd",
    "flags": "Flags",
    "nodes": "NodeName",
}
_SCONTROL = {
    "name": "ReservationName",
    "start": "StartTime",
    "end": "EndTime",
    "flags": "Flags",
    "nodes": "Nodes",
}


@dataclass(frozen=True, kw_only=True, slots=True)
class ReservationsStage:
    """Planned node events from the MAINT reservations of one file."""

    rows_read: int
    """Reservations in the file."""
    rows_skipped: int
    """Reservations without the MAINT flag: not down time."""
    node_events: pa.Table
    """Columns of ``node_events`` (as events.py makes them), one row per reservation and node."""
    problems: tuple[Problem, ...]
    """Rejected reservations in lenient mode."""


def read_reservations(
    path: Path, *, tz: str, lenient: bool, default_cluster: str
) -> ReservationsStage:
    """Parse a reservation listing, detecting its format from the first line."""
    lines = [
        (n, t) for n, t in enumerate(path.read_text(encoding="utf-8-sig").splitlines(), 1) if t
    ]
    first = lines[0][1] if lines else ""
    if first.startswith("ReservationName="):
        records = [(n, key_values(t)) for n, t in lines]
        names = _SCONTROL
    elif "|" in first:
        header = first.split("|")
        missing = [v for v in _SACCTMGR.values() if v not in header]
        if missing:
            raise UnknownFormat(
                f"{path}: reservation listing without {', '.join(missing)}", hint=_HINT
            )
        records = [(n, dict(zip(header, t.split("|"), strict=False))) for n, t in lines[1:]]
        names = _SACCTMGR
    else:
        raise UnknownFormat(f"{path}: not a reservation listing ({first[:60]!r})", hint=_HINT)
    rows: list[dict[str, object]] = []
    problems: list[Problem] = []
    skipped = 0
    for number, fields in records:
        flags = {f.strip().upper() for f in fields.get(names["flags"], "").split(",")}
        if "MAINT" not in flags:
            skipped += 1
            continue
        try:
            rows += _maintenance(fields, names, tz, number, default_cluster)
        except ParseError as error:
            if not lenient:
                raise ParseError(
                    error.reason, path=path, line=number, field=error.field, hint=error.hint
                ) from None
            problems.append(
                Problem(line=number, field=error.field or "", message=error.reason, raw=str(fields))
            )
    return ReservationsStage(
        rows_read=len(records),
        rows_skipped=skipped,
        node_events=rows_table(rows, NODE_COLUMNS),
        problems=tuple(problems),
    )


def _maintenance(
    fields: dict[str, str], names: dict[str, str], tz: str, number: int, default_cluster: str
) -> list[dict[str, object]]:
    start, end = (
        time_field(fields.get(names[key], ""), tz, field=names[key]) for key in ("start", "end")
    )
    if start is None:
        raise ParseError("reservation without a start", field=names["start"], hint=_HINT)
    # No end (an infinite reservation): open, like an open node event it lasts until the capture.
    if end is not None and end < start:
        raise ParseError("reservation ends before it starts", field=names["end"], hint=_HINT)
    try:
        nodes = expand_hostlist(fields.get(names["nodes"], ""))
    except ValueError as error:
        raise ParseError(str(error), field=names["nodes"], hint=_HINT) from None
    name = fields.get(names["name"], "").strip()
    cluster = fields.get("Cluster", "").strip() or default_cluster
    return [
        {
            "cluster": cluster,
            "node": node,
            "state": "MAINT",
            "reason": f"reservation {name}",
            "user_name": None,
            "start_s": start,
            "end_s": end,
            "planned": True,
            "line": number,
        }
        for node in nodes
    ]
