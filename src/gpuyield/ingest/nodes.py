"""Node inventory: ``scontrol [-o] show nodes`` or ``sinfo -N`` output into the ``nodes`` table.

The inventory says how many GPUs each node has, which is the installed capacity. Formats are detected
from the content: ``NodeName=`` records (one per line with ``-o``, or blocks), ``sinfo -N -o`` with
``|`` separators and a ``GRES`` column (or without a header, ``-h -o '%N|%G'`` or ``'%N|%P|%G'``),
or ``sinfo -N -O`` fixed-width columns with ``GRES``.
``sinfo`` prints a node once per partition; the rows are merged.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa

from gpuyield.errors import InputError, ParseError, UnknownFormat
from gpuyield.hostlist import expand_hostlist, hostlist_size
from gpuyield.ingest._sql import Problem

SOURCE = "slurm.nodes"

_KEY = re.compile(r"(?:(?<=\s)|^)([A-Za-z][A-Za-z0-9_]*)=")
_TRES_GPU = re.compile(r"(?:^|,)gres/gpu=(\d+)(?:,|$)")
# One GRES item: gpu, optional type, count, optional socket binding: gpu:a100:4(S:0-1).
_GRES_GPU = re.compile(r"(?:^|,)gpu(?::([^:,(]+))?:(\d+)(?:\([^)]*\))?")
# Every GRES item that is a GPU, and the shape each must have (name, optional type, digits).
_GPU_ITEM = re.compile(r"(?:^|,)(gpu(?:[:(][^,(]*)?)")
_GPU_ITEM_STRICT = re.compile(r"gpu(?::[^:,(]+)?:\d+")
_TRES_GPU_ANY = re.compile(r"(?:^|,)gres/gpu=([^,]*)")
# More nodes than this in one inventory file (sinfo prints ranges) is not a cluster: ten times the
# largest Slurm clusters. Each node is a Python row here, so 1M would take about 1 GB and a minute.
MAX_INVENTORY_NODES = 200_000
_HINT = "give `scontrol -o show nodes` output (or `sinfo -N -o '%N|%P|%G'`, with or without -h)"


@dataclass(frozen=True, kw_only=True, slots=True)
class NodesStage:
    """Typed inventory rows read from one file."""

    rows_read: int
    """Records in the file (sinfo: rows, before merging partitions)."""
    nodes: pa.Table
    """Columns cluster, node, num_gpus, gpu_type, partitions, features, line."""
    problems: tuple[Problem, ...]
    """Rejected records in lenient mode."""


@dataclass(frozen=True, kw_only=True, slots=True)
class GresGpus:
    """The GPUs one node's ``Gres`` value declares."""

    num_gpus: int
    """GPUs on the node, every GPU item's count summed (0 when none is a GPU)."""
    gpu_type: str | None
    """The GPU types named, sorted and comma-joined (``a100,h100``); None when no item names one."""


def gpus_from_gres(gres: str) -> GresGpus:
    """GPU count and type from a ``Gres`` value such as ``gpu:8`` or ``gpu:a100:4(S:0),gpu:h100:4``.

    A GPU item whose count is not a whole number (``gpu:-8``, ``gpu:1.5``) is an InputError: read
    loosely it would be dropped or cut, and the node's capacity silently wrong.
    """
    if gres.strip() in ("", "(null)"):
        return GresGpus(num_gpus=0, gpu_type=None)
    for item in _GPU_ITEM.findall(gres):
        if not _GPU_ITEM_STRICT.fullmatch(item):
            raise InputError(f"GPU count is not a whole number: {item!r}")
    items = _GRES_GPU.findall(gres)
    types = sorted({t for t, _ in items if t})
    return GresGpus(num_gpus=sum(int(n) for _, n in items), gpu_type=",".join(types) or None)


def read_nodes(path: Path, *, lenient: bool, cluster: str) -> NodesStage:
    """Parse an inventory file, detecting its format from the content."""
    text = path.read_text(encoding="utf-8-sig")  # without a byte-order mark
    first = next((line for line in text.splitlines() if line.strip()), "")
    if first.lstrip().startswith("NodeName="):
        rows, problems, count = _read_scontrol(path, text, lenient)
    elif "|" in first and "NODELIST" in first.upper():
        rows, problems, count = _read_sinfo(path, text, lenient, separator="|")
    elif (header := _headerless_sinfo(first)) is not None:
        rows, problems, count = _read_sinfo(path, text, lenient, separator="|", header=header)
    elif first.upper().startswith("NODELIST") and "GRES" in first.upper():
        rows, problems, count = _read_sinfo(path, text, lenient, separator=None)
    else:
        raise UnknownFormat(f"{path}: not a node inventory I can read ({first[:60]!r})", hint=_HINT)
    merged: dict[str, dict[str, object]] = {}
    for row in rows:
        node = str(row["node"])
        if node in merged:
            old = merged[node]
            parts = {
                *str(old["partitions"] or "").split(","),
                *str(row["partitions"] or "").split(","),
            }
            old["partitions"] = ",".join(sorted(p for p in parts if p)) or None
        else:
            merged[node] = {**row, "cluster": cluster}
    columns = {
        "cluster": pa.string(),
        "node": pa.string(),
        "num_gpus": pa.int64(),
        "gpu_type": pa.string(),
        "partitions": pa.string(),
        "features": pa.string(),
        "line": pa.int64(),
    }
    table = pa.table({c: pa.array([r[c] for r in merged.values()], t) for c, t in columns.items()})
    return NodesStage(rows_read=count, nodes=table, problems=tuple(problems))


def _records_scontrol(text: str) -> list[tuple[int, str]]:
    """(first line, record text): ``-o`` has a record per line, plain output blank-line blocks."""
    records: list[tuple[int, str]] = []
    current: list[str] = []
    start = 0
    for number, line in enumerate(text.splitlines(), start=1):
        if line.startswith("NodeName="):
            if current:
                records.append((start, " ".join(current)))
            current, start = [line], number
        elif line.strip() and current:
            current.append(line.strip())
    if current:
        records.append((start, " ".join(current)))
    return records


# AvailableFeatures (Features before Slurm 17.11): sites often name the GPU model there
# (``h100,sxm5``), which ledger/weights reads when Gres names no type.
_WANTED_KEYS = frozenset(
    {"NodeName", "CfgTRES", "Gres", "Partitions", "AvailableFeatures", "Features"}
)


def key_values(record: str, wanted: frozenset[str] | None = None) -> dict[str, str]:
    """``Key=value`` pairs of one scontrol ``-o`` record (only the ``wanted`` keys when given).

    A value runs to the next key, since values may hold spaces (``OS=Linux 5.15 ...``).
    """
    keys = list(_KEY.finditer(record))
    return {
        m.group(1): record[m.end() : keys[i + 1].start() if i + 1 < len(keys) else None].strip()
        for i, m in enumerate(keys)
        if wanted is None or m.group(1) in wanted
    }


def _read_scontrol(
    path: Path, text: str, lenient: bool
) -> tuple[list[dict[str, object]], list[Problem], int]:
    rows: list[dict[str, object]] = []
    problems: list[Problem] = []
    records = _records_scontrol(text)
    if len(records) > MAX_INVENTORY_NODES:
        raise ParseError(
            f"{len(records):,} nodes, more than {MAX_INVENTORY_NODES:,}",
            path=path,
            line=records[MAX_INVENTORY_NODES][0],
            field="NodeName",
            hint="this is not one cluster's inventory; check the file",
        )
    for number, record in records:
        fields = key_values(record, _WANTED_KEYS)
        tres = _TRES_GPU.search(fields.get("CfgTRES", ""))
        problem = _scontrol_problem(fields, number, record)
        if problem is not None:
            if not lenient:
                raise ParseError(
                    problem.message, path=path, line=number, field=problem.field, hint=_HINT
                )
            problems.append(problem)
            continue
        gres = gpus_from_gres(fields.get("Gres", ""))
        rows.append(
            {
                "node": fields["NodeName"],
                # CfgTRES is what accounting counts; Gres is the fallback for older Slurm.
                "num_gpus": int(tres.group(1)) if tres else gres.num_gpus,
                "gpu_type": gres.gpu_type,
                "partitions": fields.get("Partitions") or None,
                "features": _features(fields.get("AvailableFeatures", fields.get("Features"))),
                "line": number,
            }
        )
    return rows, problems, len(records)


def _features(value: str | None) -> str | None:
    """A node's features as printed, or None when it has none (``(null)``, empty)."""
    if value is None or value.strip() in ("", "(null)"):
        return None
    return value.strip()


def _scontrol_problem(fields: dict[str, str], number: int, record: str) -> Problem | None:
    """What makes one scontrol record unusable: no GPU field at all, or a GPU count that is not a
    whole non-negative number (``gres/gpu=-8``, ``gpu:1.5``)."""
    if "CfgTRES" not in fields and "Gres" not in fields:
        return Problem(
            line=number, field="Gres", message="node has neither Gres nor CfgTRES", raw=record
        )
    tres = _TRES_GPU_ANY.search(fields.get("CfgTRES", ""))
    if tres is not None and not (tres.group(1).isascii() and tres.group(1).isdigit()):
        message = f"GPU count is not a whole number: gres/gpu={tres.group(1)}"
        return Problem(line=number, field="CfgTRES", message=message, raw=record)
    try:
        gpus_from_gres(fields.get("Gres", ""))
    except InputError as error:
        return Problem(line=number, field="Gres", message=str(error), raw=record)
    return None


def _sinfo_values(values: dict[str, str], names_so_far: int) -> tuple[list[str], int, str | None]:
    """One sinfo row's nodes, GPUs per node and GPU type; a ParseError naming the field when the
    list is unreadable or would take the file past the cap (counted before expanding)."""
    text = values.get("NODELIST", "")
    try:
        size = hostlist_size(text)
        if names_so_far + size > MAX_INVENTORY_NODES:
            raise InputError(
                f"hostlist {text[:60]!r} takes the inventory to {names_so_far + size:,} nodes, "
                f"more than {MAX_INVENTORY_NODES:,}"
            )
        nodes = expand_hostlist(text)
    except InputError as error:
        raise ParseError(str(error), field="NODELIST") from None
    try:
        gres = gpus_from_gres(values.get("GRES", ""))
    except InputError as error:
        raise ParseError(str(error), field="GRES") from None
    return nodes, gres.num_gpus, gres.gpu_type


def _headerless_sinfo(first: str) -> list[str] | None:
    """Column names of ``sinfo -h -N -o '%N|%G'`` (or ``'%N|%P|%G'``) output, None if it is not.

    Without a header the columns are known by their shape: a node name first, a GRES last.
    """
    parts = first.split("|")
    gres = parts[-1].strip()
    if len(parts) not in (2, 3) or not (gres == "(null)" or gres.startswith("gpu")):
        return None
    return ["NODELIST", "PARTITION", "GRES"] if len(parts) == 3 else ["NODELIST", "GRES"]


def _read_sinfo(
    path: Path,
    text: str,
    lenient: bool,
    *,
    separator: str | None,
    header: list[str] | None = None,
) -> tuple[list[dict[str, object]], list[Problem], int]:
    lines = [(n, line) for n, line in enumerate(text.splitlines(), start=1) if line.strip()]
    if header is not None:
        lines = [(0, "|".join(header)), *lines]  # the names -h left out
    header_line = lines[0][1]
    # With a separator, split on it; fixed-width columns start where their header word starts.
    starts = [m.start() for m in re.finditer(r"\S+", header_line)]
    bounds = list(zip(starts, [*starts[1:], None], strict=True))

    def split(line: str) -> list[str]:
        if separator:
            return [v.strip() for v in line.split(separator)]
        return [line[s:e].strip() for s, e in bounds]

    names = [v.upper() for v in split(header_line)]
    if "NODELIST" not in names or "GRES" not in names:
        raise UnknownFormat(f"{path}: sinfo output without NODELIST and GRES columns", hint=_HINT)
    rows: list[dict[str, object]] = []
    problems: list[Problem] = []
    total = 0
    for number, line in lines[1:]:
        values = dict(zip(names, split(line), strict=False))
        try:
            nodes, count, gpu_type = _sinfo_values(values, total)
        except ParseError as error:
            if not lenient:
                raise ParseError(
                    error.reason, path=path, line=number, field=error.field, hint=_HINT
                ) from None
            problems.append(
                Problem(line=number, field=error.field or "", message=error.reason, raw=line)
            )
            continue
        total += len(nodes)
        partition = values.get("PARTITION", "").rstrip("*") or None
        features = _features(values.get("AVAIL_FEATURES", values.get("FEATURES")))
        rows.extend(
            {
                "node": node,
                "num_gpus": count,
                "gpu_type": gpu_type,
                "partitions": partition,
                "features": features,
                "line": number,
            }
            for node in nodes
        )
    return rows, problems, len(lines) - 1
