"""GPU utilization Slurm itself recorded: ``sacct`` TRES usage and the jobstats summary.

Slurm built with NVML accounts ``gres/gpuutil`` (percent) and ``gres/gpumem`` per job step in
``TRESUsageInAve`` / ``TRESUsageInTot``; Princeton's jobstats stores a per-GPU summary of each job in
``AdminComment`` (``JS1:`` + base64 of a gzip'd JSON document whose ``nodes.<node>.gpu_utilization``
maps GPU index to mean percent). Both are averages over a whole step or job, so each becomes one
sample per GPU whose interval is the step's or job's run: a GPU averaging below the idle threshold
over its whole run was idle for all of it; anything above tells the ledger nothing finer.

Input: ``sacct -a -P -D --format=JobID,JobIDRaw,Start,End,NodeList,AllocTRES,TRESUsageInAve,
AdminComment`` (steps included: usage is per step; the jobstats summary is on the job's line).
"""

from __future__ import annotations

import base64
import gzip
import json
import zlib
from datetime import datetime
from pathlib import Path
from zoneinfo import ZoneInfo

import pyarrow as pa

from gpuyield.errors import ParseError
from gpuyield.hostlist import expand_hostlist
from gpuyield.ingest.utilization.promjson import RAW_SCHEMA, Role

_NEEDED = ("JobID", "Start", "End", "NodeList", "AllocTRES")
_USAGE = ("TRESUsageInAve", "TRESUsageInTot")

# The raw samples' columns, plus each sample's own length (a run average covers the whole run).
SCHEMA = RAW_SCHEMA.append(pa.field("step_s", pa.int64()))


def read(path: Path, *, tz: str = "UTC") -> pa.Table:
    """One sample per GPU of every step with ``gres/gpuutil`` and every job with a jobstats
    summary (``SCHEMA``)."""
    lines = path.read_text(encoding="utf-8").splitlines()
    if not lines:
        raise ParseError("empty file", path=path, hint="pass `sacct -P` output with a header")
    header = lines[0].split("|")
    missing = [f for f in _NEEDED if f not in header]
    if missing or not any(f in header for f in (*_USAGE, "AdminComment")):
        raise ParseError(
            f"the header lacks {', '.join(missing) or 'TRESUsageInAve or AdminComment'}",
            path=path,
            line=1,
            hint="sacct -a -P -D --format=JobID,JobIDRaw,Start,End,NodeList,AllocTRES,"
            "TRESUsageInAve,AdminComment",
        )
    col = {name: i for i, name in enumerate(header)}
    rows: dict[str, list[object]] = {name: [] for name in SCHEMA.names}
    zone = ZoneInfo(tz)
    for number, line in enumerate(lines[1:], start=2):
        if not line.strip():
            continue
        f = line.split("|")
        if len(f) != len(header):
            raise ParseError(
                f"{len(f)} fields, the header has {len(header)}", path=path, line=number
            )
        for sample in _samples(f, col, path, number, zone):
            for name, value in zip(SCHEMA.names, sample, strict=True):
                rows[name].append(value)
    return pa.table(rows, schema=SCHEMA)


def _samples(
    f: list[str], col: dict[str, int], path: Path, line: int, zone: ZoneInfo
) -> list[tuple[object, ...]]:
    start_text, end_text = f[col["Start"]], f[col["End"]]
    if start_text in ("Unknown", "None", "") or end_text in ("Unknown", "None", ""):
        return []  # not started or still running: no average over a finished run yet
    start = _epoch(start_text, zone, path, line, "Start")
    end = _epoch(end_text, zone, path, line, "End")
    if end <= start:
        return []
    job = f[col["JobIDRaw"]] if "JobIDRaw" in col else f[col["JobID"]]
    job = job.split(".", 1)[0]
    nodes = expand_hostlist(f[col["NodeList"]]) if f[col["NodeList"]] not in ("", "None") else []
    out: list[tuple[object, ...]] = []
    summary = f[col["AdminComment"]] if "AdminComment" in col else ""
    if summary.startswith("JS1:"):
        for node, gpu, mean in _jobstats(summary, path, line):
            out.append((Role.ACTIVE.value, node, gpu, job, end, mean / 100, end - start))
        return out
    usage = next((f[col[u]] for u in _USAGE if u in col and f[col[u]]), "")
    percent = _tres(usage, "gres/gpuutil", path, line)
    gpus = _tres(f[col["AllocTRES"]], "gres/gpu", path, line)
    if percent is None or not gpus or not nodes:
        return out
    # sacct has no GPU indices: the step's GPUs are numbered from 0 on each of its nodes.
    per_node = max(1, int(gpus) // len(nodes))
    for node in nodes:
        for gpu in range(per_node):
            out.append((Role.ACTIVE.value, node, gpu, job, end, percent / 100, end - start))
    return out


def _tres(text: str, key: str, path: Path, line: int) -> float | None:
    for item in text.split(","):
        name, _, value = item.partition("=")
        if name == key:
            try:
                number = float(value)
            except ValueError:
                raise ParseError(
                    f"{key}={value!r} is not a number", path=path, line=line, field=key
                ) from None
            if number < 0:
                raise ParseError(f"{key}={value} is negative", path=path, line=line, field=key)
            return number
    return None


def _jobstats(text: str, path: Path, line: int) -> list[tuple[str, int, float]]:
    try:
        raw = base64.b64decode(text[4:])
        try:
            document = json.loads(gzip.decompress(raw))
        except OSError:
            document = json.loads(zlib.decompress(raw))
        nodes = document["nodes"]
        return [
            (node, int(gpu), float(percent))
            for node, stats in nodes.items()
            for gpu, percent in stats.get("gpu_utilization", {}).items()
        ]
    except (ValueError, KeyError, TypeError, AttributeError, zlib.error) as error:
        raise ParseError(
            f"not a jobstats summary: {error}",
            path=path,
            line=line,
            field="AdminComment",
            hint="jobstats writes JS1: and base64 of a gzip'd JSON document",
        ) from None


def _epoch(text: str, zone: ZoneInfo, path: Path, line: int, field: str) -> int:
    try:
        value = datetime.fromisoformat(text)
    except ValueError:
        raise ParseError(f"not a time: {text!r}", path=path, line=line, field=field) from None
    if value.tzinfo is None:
        value = value.replace(tzinfo=zone)
    return int(value.timestamp())
