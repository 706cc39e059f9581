"""GPU utilization Slurm itself recorded: ``sacct`` TRES usage and the jobstats summary.

Slurm built with NVML accounts ``gres/gpuutil`` (percent) and ``gres/gpumem`` per job step in
``TRESUsageInAve`` / ``TRESUsageInTot``; Princeton's jobstats stores a per-GPU summary of each job in
``AdminComment`` (``JS1:`` + base64 of a gzip'd JSON document whose ``nodes.<node>.gpu_utilization``
maps GPU index to mean percent). Both are averages over a whole step or job, so each becomes one
sample per GPU whose interval is the step's or job's run: a GPU averaging below the idle threshold
over its whole run was idle for all of it; anything above tells the ledger nothing finer.

Input: ``sacct -a -P -D --format=JobID,JobIDRaw,Start,End,NodeList,AllocTRES,TRESUsageInAve,
AdminComment`` (steps included: usage is per step; the jobstats summary is on the job's line).

Bounded work: a step's GPUs per node are at most the largest node of the inventory (or
``MAX_GPU_INDEX + 1`` without one), its nodes at most the inventory's, a jobstats summary
decompresses to at most ``MAX_SUMMARY_BYTES``, and a file gives at most ``MAX_SAMPLES``.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
import zlib
from datetime import datetime
from pathlib import Path
from zoneinfo import ZoneInfo

import numpy as np
import pyarrow as pa

from gpuyield.attribution import MAX_GPU_INDEX
from gpuyield.errors import GpuyieldError, InputError, ParseError
from gpuyield.hostlist import MAX_HOSTLIST_NAMES, expand_hostlist
from gpuyield.ingest._files import decompress_bounded
from gpuyield.ingest.utilization.promjson import SERIES_SCHEMA, Role

_NEEDED = ("JobID", "Start", "End", "NodeList", "AllocTRES")
_USAGE = ("TRESUsageInAve", "TRESUsageInTot")
#: A jobstats summary is a few kB per job: one larger than this is not one.
MAX_SUMMARY_BYTES = 4 << 20
#: Samples one file may give (each a GPU of a step or job): 250,000 steps of 8 GPUs, a week or
#: more at a large site; more is split by time. Read, checked, stored and attributed, a sample
#: costs about 500 bytes at its peak (4M distinct samples peaked at 2.2 GB), so a file stays
#: within issue 26's 2 GB, whatever its node lists say.
MAX_SAMPLES = 2_000_000
#: Node lists kept expanded (a file's steps name a few lists again and again).
_MAX_CACHED_HOSTLISTS = 4096
_HINT = (
    "sacct -a -P -D --format=JobID,JobIDRaw,Start,End,NodeList,AllocTRES,TRESUsageInAve,"
    "AdminComment"
)


def read(
    path: Path,
    *,
    tz: str = "UTC",
    max_gpus_per_node: int = MAX_GPU_INDEX + 1,
    max_nodes: int = MAX_HOSTLIST_NAMES,
) -> pa.Table:
    """One single-point series (``SERIES_SCHEMA``'s columns, its strings dictionary-encoded) per
    GPU of every step with ``gres/gpuutil`` and every job with a jobstats summary; each covers
    its run (``step_s``). The file is read a line at a time (its bytes were checked by
    ``scan_file``: UTF-8, no NUL, no lone CR)."""
    with path.open(encoding="utf-8", newline="") as handle:
        header = handle.readline().rstrip("\r\n").split("|")
        if header == [""]:
            raise ParseError("empty file", path=path, hint="pass `sacct -P` output with a header")
        missing = [f for f in _NEEDED if f not in header]
        if missing or not any(f in header for f in (*_USAGE, "AdminComment")):
            raise ParseError(
                f"the header lacks {', '.join(missing) or 'TRESUsageInAve or AdminComment'}",
                path=path,
                line=1,
                hint=_HINT,
            )
        reader = _Reader(path, header, ZoneInfo(tz), max_gpus_per_node, max_nodes)
        for number, line in enumerate(handle, start=2):
            text = line.rstrip("\r\n")
            if text.strip():
                reader.line(text, number)
    return reader.samples.table(str(path))


class _Reader:
    """Reads the lines: what bounds them, and the samples so far."""

    def __init__(
        self, path: Path, header: list[str], zone: ZoneInfo, max_gpus: int, max_nodes: int
    ) -> None:
        self.path = path
        self.header = header
        self.col = {name: i for i, name in enumerate(header)}
        self.zone = zone
        self.max_gpus = max_gpus
        self.max_nodes = max_nodes
        self.samples = _Samples()
        # A step's node list expanded once: a file names the same few lists again and again.
        self.hostlists: dict[str, np.ndarray] = {}

    def line(self, text: str, number: int) -> None:
        f = text.split("|")
        if len(f) != len(self.header):
            raise ParseError(
                f"{len(f)} fields, the header has {len(self.header)}", path=self.path, line=number
            )
        run = self._run(f, number)
        if run is None:
            return
        summary = f[self.col["AdminComment"]] if "AdminComment" in self.col else ""
        if summary.startswith("JS1:"):
            found = _jobstats(summary, self.path, number, self.max_gpus)
            nodes = np.array([self.samples.node_id(n) for n, _, _ in found], np.int32)
            gpus = np.array([g for _, g, _ in found], np.int64)
            percents = np.array([p for _, _, p in found], np.float64)
        else:
            spread = self._spread(f, number)
            if spread is None:
                return
            node_ids, per_node, percent = spread
            self._check_total(len(node_ids) * per_node, number)
            nodes = np.repeat(node_ids, per_node)
            gpus = np.tile(np.arange(per_node, dtype=np.int64), len(node_ids))
            percents = np.full(len(nodes), percent)
        self._check_total(len(nodes), number)
        self.samples.add(run, number, nodes, gpus, percents)

    def _check_total(self, more: int, number: int) -> None:
        if self.samples.count + more > MAX_SAMPLES:
            raise ParseError(
                f"more than {MAX_SAMPLES:,} GPU samples in one file",
                path=self.path,
                line=number,
                hint="split the capture by time (sacct -S/-E) and ingest the files",
            )

    def _run(self, f: list[str], number: int) -> tuple[str, int, int] | None:
        """The job (JobIDRaw) and the run's start and end; None when it has not ended."""
        start_text, end_text = f[self.col["Start"]], f[self.col["End"]]
        if start_text in ("Unknown", "None", "") or end_text in ("Unknown", "None", ""):
            return None  # not started or still running: no average over a finished run yet
        start = _epoch(start_text, self.zone, self.path, number, "Start")
        end = _epoch(end_text, self.zone, self.path, number, "End")
        if end <= start:
            return None
        job = f[self.col["JobIDRaw"]] if "JobIDRaw" in self.col else f[self.col["JobID"]]
        return job.split(".", 1)[0], start, end

    def _spread(self, f: list[str], number: int) -> tuple[np.ndarray, int, float] | None:
        """The step's node ids, its GPUs a node and its mean percent; None without usage."""
        usage = next((f[self.col[u]] for u in _USAGE if u in self.col and f[self.col[u]]), "")
        percent = _tres(usage, "gres/gpuutil", self.path, number)
        gpus = _tres(f[self.col["AllocTRES"]], "gres/gpu", self.path, number)
        if percent is None or not gpus:
            return None
        _check_count(gpus, self.path, number)
        nodes = self._nodes(f[self.col["NodeList"]], number)
        if not len(nodes):
            return None
        # sacct has no GPU indices: the step's GPUs are numbered from 0 on each of its nodes
        # (an uneven spread over the nodes is not in sacct: each node gets the even share).
        per_node = max(1, int(gpus) // len(nodes))
        if per_node > self.max_gpus:
            raise ParseError(
                f"gres/gpu={gpus:g} over {len(nodes)} node(s) is {per_node} GPUs a node; "
                f"no node of the cluster has more than {self.max_gpus}",
                path=self.path,
                line=number,
                field="AllocTRES",
                hint="check AllocTRES, and that the inventory (ingest.nodes) is this cluster's",
            )
        return nodes, per_node, percent

    def _nodes(self, text: str, number: int) -> np.ndarray:
        """The ids of the nodes ``text`` names (a hostlist), expanded once per distinct text."""
        if text in ("", "None"):
            return np.zeros(0, np.int32)
        found = self.hostlists.get(text)
        if found is not None:
            return found
        try:
            names = expand_hostlist(text, max_names=self.max_nodes)
        except GpuyieldError as error:
            raise ParseError(
                error.message, path=self.path, line=number, field="NodeList", hint=error.hint
            ) from None
        found = np.array([self.samples.node_id(n) for n in names], np.int32)
        if len(self.hostlists) >= _MAX_CACHED_HOSTLISTS:
            self.hostlists.clear()  # the lists of a file's recent steps are the likely ones
        self.hostlists[text] = found
        return found


class _Samples:
    """The samples read, column by column: per line its job, run and line number; per sample its
    line, node (an id into the names), GPU and percent. About 40 bytes a sample, not a row of
    Python objects (a 10 MB file of 32-GPU steps is 3.6M samples)."""

    def __init__(self) -> None:
        self.names: dict[str, int] = {}
        self.jobs: dict[str, int] = {}
        self.line_job: list[int] = []
        self.line_start: list[int] = []
        self.line_end: list[int] = []
        self.line_number: list[int] = []
        self.line_count: list[int] = []
        self.chunks: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
        self.count = 0

    def node_id(self, name: str) -> int:
        return self.names.setdefault(name, len(self.names))

    def add(
        self,
        run: tuple[str, int, int],
        number: int,
        nodes: np.ndarray,
        gpus: np.ndarray,
        percents: np.ndarray,
    ) -> None:
        if not len(nodes):
            return
        job, start, end = run
        self.line_job.append(self.jobs.setdefault(job, len(self.jobs)))
        self.line_start.append(start)
        self.line_end.append(end)
        self.line_number.append(number)
        self.line_count.append(len(nodes))
        self.chunks.append((nodes, gpus, percents))
        self.count += len(nodes)

    def table(self, source: str) -> pa.Table:
        """``SERIES_SCHEMA``'s columns; strings as dictionaries of the distinct values."""
        if not self.chunks:
            return SERIES_SCHEMA.empty_table()
        line = np.repeat(np.arange(len(self.line_count), dtype=np.int32), self.line_count)
        start, end = np.array(self.line_start), np.array(self.line_end)
        offsets = pa.array(np.arange(self.count + 1, dtype=np.int32))
        columns = {
            "source": _dictionary(np.zeros(self.count, np.int32), [source]),
            "field": _dictionary(line, [f"line {n}" for n in self.line_number]),
            "role": _dictionary(np.zeros(self.count, np.int32), [Role.ACTIVE.value]),
            "node": _dictionary(np.concatenate([c[0] for c in self.chunks]), list(self.names)),
            "gpu": pa.array(np.concatenate([c[1] for c in self.chunks])),
            "job_label": _dictionary(np.array(self.line_job, np.int32)[line], list(self.jobs)),
            "ts": pa.ListArray.from_arrays(offsets, pa.array(end[line])),
            "vs": pa.ListArray.from_arrays(
                offsets, pa.array(np.concatenate([c[2] for c in self.chunks]) / 100)
            ),
            "step_s": pa.array((end - start)[line]),
        }
        return pa.table(columns)


def _dictionary(indices: np.ndarray, values: list[str]) -> pa.DictionaryArray:
    return pa.DictionaryArray.from_arrays(pa.array(indices), pa.array(values, pa.string()))


def _check_count(gpus: float, path: Path, line: int) -> None:
    if gpus != int(gpus):
        raise ParseError(
            f"gres/gpu={gpus:g} is not a whole number of GPUs",
            path=path,
            line=line,
            field="AllocTRES",
        )


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
            if number < 0 or not math.isfinite(number):
                raise ParseError(f"{key}={value} is not a count", path=path, line=line, field=key)
            return number
    return None


def _jobstats(text: str, path: Path, line: int, max_gpus: int) -> list[tuple[str, int, float]]:
    try:
        raw = base64.b64decode(text[4:], validate=True)
        inflated = decompress_bounded(raw, what="the jobstats summary", max_bytes=MAX_SUMMARY_BYTES)
        document = json.loads(inflated)
        nodes = document["nodes"]
        samples = [
            (str(node), _gpu_index(gpu, max_gpus), float(percent))
            for node, stats in nodes.items()
            for gpu, percent in stats.get("gpu_utilization", {}).items()
        ]
    except InputError as error:  # inflates past its budget, or is not gzip
        raise ParseError(
            error.message,
            path=path,
            line=line,
            field="AdminComment",
            hint="a jobstats summary is a few kB of gzip'd JSON; this one is not a summary",
        ) from None
    except (ValueError, KeyError, TypeError, AttributeError, binascii.Error, zlib.error) as error:
        raise ParseError(
            f"not a jobstats summary: {error}",
            path=path,
            line=line,
            field="AdminComment",
            hint="jobstats writes JS1: and base64 of a gzip'd JSON document",
        ) from None
    bad = next((p for _, _, p in samples if not (math.isfinite(p) and p >= 0)), None)
    if bad is not None:
        raise ParseError(
            f"GPU utilization {bad!r} is not a percentage",
            path=path,
            line=line,
            field="AdminComment",
        )
    return samples


def _gpu_index(text: object, max_gpus: int) -> int:
    """A GPU index key of the summary: digits, below the largest node's GPU count."""
    if not (isinstance(text, str) and text.isascii() and text.isdigit()):
        raise ValueError(f"GPU index {text!r} is not a number")
    if int(text) >= max_gpus:
        raise ValueError(f"GPU index {text} is beyond the {max_gpus} GPUs of any node")
    return int(text)


def _epoch(text: str, zone: ZoneInfo, path: Path, line: int, field: str) -> int:
    try:
        value = datetime.fromisoformat(text)
    except ValueError:
        raise ParseError(f"not a time: {text!r}", path=path, line=line, field=field) from None
    if value.tzinfo is None:
        value = value.replace(tzinfo=zone)
    return int(value.timestamp())
