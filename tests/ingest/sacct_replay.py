"""A recorded ``sacct`` replayed as it would have printed at its ``-E`` (run as a fake sacct).

``python sacct_replay.py RECORDING [sacct arguments]`` prints the records of RECORDING (a real
``sacct -a -P -X -D`` capture taken after the jobs ended, e.g. ``examples/slurm-lab/``) as sacct
prints them at the instant ``-E`` names, in the columns ``--format`` asks for:

- a job submitted after ``-E`` is not listed yet, nor one that ended before ``-S``;
- a job started by ``-E`` that ended after it is ``RUNNING`` with ``End`` ``Unknown``, exit code
  ``0:0`` and an empty ``Comment`` (Slurm stores the comment at the job's end; the slurm-lab
  README);
- a job submitted but not started by ``-E`` is ``PENDING`` (no start, end, allocation or nodes)
  if it was eligible by then, and not listed if not: sacct's window selects eligible jobs (the
  held job of ``tests/ingest/fixtures/live-comments/`` is never listed; a requeued run becomes
  eligible about 2 minutes after its requeue);
- everything else is printed as recorded.

Standalone (standard library only): the fake Slurm runs it with the test's Python.
"""

from __future__ import annotations

import sys
from datetime import UTC, datetime

UNKNOWN = "Unknown"


def _instant(text: str) -> int | None:
    if text in ("", UNKNOWN, "None"):
        return None
    return int(datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp())


def records(text: str) -> tuple[list[str], list[dict[str, str]]]:
    """Header and records of an unquoted ``sacct -P`` capture (a record may span lines)."""
    lines = text.splitlines()
    header = lines[0].split("|")
    joined: list[str] = []
    for line in lines[1:]:
        if joined and len(joined[-1].split("|")) < len(header):
            joined[-1] += "\n" + line
        else:
            joined.append(line)
    return header, [dict(zip(header, r.split("|"), strict=True)) for r in joined]


def at(record: dict[str, str], start_s: int, end_s: int) -> dict[str, str] | None:
    """The record as sacct printed it at ``end_s``, or None when not listed then."""
    submit, start, end = (_instant(record[k]) for k in ("Submit", "Start", "End"))
    if submit is None or submit > end_s or (end is not None and end < start_s):
        return None
    if end is not None and end <= end_s:
        return record
    row = {**record, "End": UNKNOWN, "ExitCode": "0:0", "Comment": ""}
    if start is not None and start <= end_s:
        return {**row, "State": "RUNNING"}
    eligible = _instant(record.get("Eligible", record["Submit"]))
    if eligible is None or eligible > end_s:
        return None
    return {**row, "State": "PENDING", "Start": UNKNOWN, "AllocTRES": "", "NodeList": "None assigned",
            "NNodes": "1"}  # fmt: skip


def main(argv: list[str]) -> int:
    recording, args = argv[0], argv[1:]
    fields = next(a.split("=", 1)[1] for a in args if a.startswith("--format=")).split(",")
    start_s = _instant(args[args.index("-S") + 1])
    end_s = _instant(args[args.index("-E") + 1])
    assert start_s is not None and end_s is not None
    with open(recording, encoding="utf-8") as handle:
        _, rows = records(handle.read())
    print("|".join(fields))
    for row in rows:
        shown = at(row, start_s, end_s)
        if shown is not None:
            print("|".join(shown.get(f, "") for f in fields))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
