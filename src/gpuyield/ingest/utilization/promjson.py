"""Prometheus ``query_range`` responses (the JSON ``curl .../api/v1/query_range`` prints) as samples.

One response holds a matrix: a series per label set, each with ``[time, "value"]`` pairs. Which
metric a series is, and which GPU, node and job it belongs to, come from its labels; the names are
configurable (``MetricNames``), with the NVIDIA DCGM exporter's and Princeton jobstats' as defaults.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path

import pyarrow as pa

from gpuyield.attribution import MAX_GPU_INDEX
from gpuyield.errors import ParseError


class Role(StrEnum):
    """What a metric measures, in the store's terms."""

    # Fraction of the interval the graphics engine was busy: the activity the idle rule reads.
    ACTIVE = "active"
    # Fraction of the interval the tensor pipes were busy.
    TENSOR = "tensor"
    # Fraction of the SMs busy, averaged over the interval.
    SM = "sm"
    # The Slurm job id that held the GPU (jobstats exports it as a gauge, not a label).
    JOB = "job"


@dataclass(frozen=True, kw_only=True, slots=True)
class MetricNames:
    """Which metric plays which role, its scale to a 0..1 fraction, and the label names to read."""

    metrics: dict[str, tuple[Role, float]] = field(
        default_factory=lambda: {
            # DCGM profiling metrics are ratios already; the device metric and jobstats' duty
            # cycle are percentages.
            "DCGM_FI_PROF_GR_ENGINE_ACTIVE": (Role.ACTIVE, 1.0),
            "DCGM_FI_DEV_GPU_UTIL": (Role.ACTIVE, 0.01),
            "nvidia_gpu_duty_cycle": (Role.ACTIVE, 0.01),
            "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE": (Role.TENSOR, 1.0),
            "DCGM_FI_PROF_SM_ACTIVE": (Role.SM, 1.0),
            "nvidia_gpu_jobId": (Role.JOB, 1.0),
        }
    )
    """Metric name -> (role, scale)."""
    node_labels: tuple[str, ...] = ("Hostname", "hostname", "node", "instance")
    """Labels naming the node, first present wins (``instance`` loses its ``:port``)."""
    gpu_labels: tuple[str, ...] = ("gpu", "minor_number")
    """Labels giving the GPU's index on its node."""
    job_labels: tuple[str, ...] = ("hpc_job", "job_id", "jobid", "slurm_job_id")
    """Labels naming the Slurm job that held the GPU, where the exporter maps GPUs to jobs."""


# The staged series, one row per series of a known metric: what both readers (this module's and
# DuckDB's, duckjson.py) produce, so everything after the read is one code path. ``field`` says
# where the series is in its source (for errors: ``data.result[3]``, ``line 7``). ``ts`` holds the
# point times in the order given, ``vs`` the values scaled to 0..1 (NaN: no measurement at that
# time; a job-id series keeps the id). ``step_s``: the interval each point covers when the source
# knows it (a run's average), else null (read from the spacing of the points).
SERIES_SCHEMA = pa.schema(
    [
        ("source", pa.string()),
        ("field", pa.string()),
        ("role", pa.string()),
        ("node", pa.string()),
        ("gpu", pa.int64()),
        ("job_label", pa.string()),
        ("ts", pa.list_(pa.int64())),
        ("vs", pa.list_(pa.float64())),
        ("step_s", pa.int64()),
    ]
)
#: Sample times are epoch seconds in [0, MAX_TIME_S] (about the year 3000): anything else is a
#: unit mistake (milliseconds) or garbage, and would overflow the store's integers.
MAX_TIME_S = 1 << 35
#: A job id (jobstats' ``nvidia_gpu_jobId`` gauge) is a whole number below this.
MAX_JOB_ID = 1 << 53


def node_name(raw: str) -> str:
    """Slurm's short node name from an exporter's host label: no ``:port``, no domain.

    An IP address keeps its dots (Slurm nodes are rarely named by address, but then they are).
    """
    host = raw.rsplit(":", 1)[0] if re.fullmatch(r"[^:]*:[0-9]+", raw) else raw
    if re.fullmatch(r"[0-9.]+", host):
        return host
    return host.split(".", 1)[0]


def parse_response(path: Path, names: MetricNames, *, metric: str | None = None) -> pa.Table:
    """The series (``SERIES_SCHEMA``) of a saved ``query_range`` (or matrix ``query``) response,
    or of several written one after the other (one per line, as NDJSON); ``metric`` names the
    series that carry no ``__name__``."""
    try:
        documents = _documents(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, RecursionError) as error:
        raise ParseError(
            f"not a Prometheus JSON response: {error}",
            path=path,
            hint="save exactly what `curl '.../api/v1/query_range?query=...'` prints",
        ) from None
    tables = [series_of(d, names, source=str(path), metric=metric) for d in documents]
    return pa.concat_tables(tables) if tables else SERIES_SCHEMA.empty_table()


def _documents(text: str) -> list[object]:
    """The JSON values of ``text``, one after the other (DuckDB's ``format='unstructured'``)."""
    decoder = json.JSONDecoder()
    documents, at = [], 0
    while True:
        while at < len(text) and text[at] in " \t\r\n":
            at += 1
        if at == len(text):
            break
        document, at = decoder.raw_decode(text, at)
        documents.append(document)
    if not documents:
        raise json.JSONDecodeError("no JSON document", text, 0)
    return documents


def series_of(
    document: object, names: MetricNames, *, source: str, metric: str | None = None
) -> pa.Table:
    """The series of a parsed response; ``source`` names it in errors, ``metric`` is the name of
    series without one (PromQL functions such as ``last_over_time`` drop ``__name__``)."""
    result = _matrix(document, source)
    columns: dict[str, list[object]] = {name: [] for name in SERIES_SCHEMA.names}
    for index, series in enumerate(result):
        where = f"data.result[{index}]"
        if not isinstance(series, dict) or not isinstance(series.get("metric"), dict):
            raise ParseError("a series without a metric object", path=source, field=where)
        labels = series["metric"]
        known = names.metrics.get(str(labels.get("__name__", metric or "")))
        if known is None:
            continue  # another metric in the same response: not ours to read
        role, scale = known
        node, gpu, job = _identity(labels, names, source, where)
        points = _points(series, source, where, job_ids=role is Role.JOB)
        row = {
            "source": source,
            "field": where,
            "role": role.value,
            "node": node,
            "gpu": gpu,
            "job_label": None if role is Role.JOB else job,
            "ts": [t for t, _ in points],
            "vs": [v if role is Role.JOB else v * scale for _, v in points],
            "step_s": None,
        }
        for name, value in row.items():
            columns[name].append(value)
    return pa.table(columns, schema=SERIES_SCHEMA)


def _matrix(document: object, source: str) -> list[object]:
    data = document.get("data") if isinstance(document, dict) else None
    if not isinstance(document, dict) or document.get("status") != "success" or data is None:
        detail = document.get("error") if isinstance(document, dict) else None
        raise ParseError(
            f"not a successful Prometheus response{f': {detail}' if detail else ''}",
            path=source,
            field="status",
            hint="save the response of /api/v1/query_range (status success, resultType matrix)",
        )
    if (
        not isinstance(data, dict)
        or data.get("resultType") != "matrix"
        or not isinstance(data.get("result"), list)
    ):
        kind = data.get("resultType") if isinstance(data, dict) else None
        raise ParseError(
            f"resultType {kind!r}, not a matrix",
            path=source,
            field="data.resultType",
            hint="use query_range (or a range selector): an instant vector has no history",
        )
    return list(data["result"])


def _identity(
    labels: dict[str, object], names: MetricNames, source: str, where: str
) -> tuple[str, int, str | None]:
    node = next((str(labels[k]) for k in names.node_labels if labels.get(k)), None)
    if node is None:
        raise ParseError(
            f"a series with none of the node labels {', '.join(names.node_labels)}",
            path=source,
            field=f"{where}.metric",
            hint="name the exporter's host label with MetricNames.node_labels",
        )
    gpu_text = next((str(labels[k]) for k in names.gpu_labels if k in labels), None)
    if gpu_text is None:
        raise ParseError(
            f"a series with none of the GPU labels {', '.join(names.gpu_labels)}",
            path=source,
            field=f"{where}.metric",
            hint="name the exporter's GPU index label with MetricNames.gpu_labels",
        )
    # Digits only, as DuckDB's reader checks them: "-1", "3.0" or " 3" are not a GPU's index.
    if not (gpu_text.isascii() and gpu_text.isdigit()) or int(gpu_text) > MAX_GPU_INDEX:
        raise ParseError(
            f"GPU index {gpu_text!r} of node {node_name(node)} is not a GPU of a node "
            f"(0 to {MAX_GPU_INDEX})",
            path=source,
            field=f"{where}.metric",
            hint="name the exporter's GPU index label with MetricNames.gpu_labels (gpu or minor_number)",
        )
    job = next((str(labels[k]) for k in names.job_labels if labels.get(k)), None)
    return node_name(node), int(gpu_text), job


def _points(
    series: dict[str, object], source: str, where: str, *, job_ids: bool
) -> list[tuple[int, float]]:
    """The series' ``[time, "value"]`` pairs, in the order given; NaN values are kept (no
    measurement at that time: the next point covers only the time since it)."""
    values = series.get("values")
    if not isinstance(values, list):
        raise ParseError("a series without values", path=source, field=f"{where}.values")
    points: list[tuple[int, float]] = []
    for j, pair in enumerate(values):
        field = f"{where}.values[{j}]"
        t_s, value = _pair(pair, source, field)
        if not (0 <= t_s <= MAX_TIME_S):
            raise ParseError(
                f"time {t_s} is not a time in epoch seconds",
                path=source,
                field=field,
                hint="query_range answers in epoch seconds; was this file converted?",
            )
        if job_ids and not math.isnan(value) and (value != int(value) or value >= MAX_JOB_ID):
            raise ParseError(f"job id {value!r} is not a job id", path=source, field=field)
        if value < 0 or math.isinf(value):
            raise ParseError(f"value {value!r} is not a utilization", path=source, field=field)
        points.append((t_s, value))
    return points


def _pair(pair: object, source: str, field: str) -> tuple[int, float]:
    """A ``[time, "value"]`` pair as DuckDB's reader reads it: a number or its text (JSON's
    ``true`` is not one, though Python's ``float`` takes it)."""
    try:
        if not isinstance(pair, list) or len(pair) != 2:
            raise ValueError
        t, text = pair[0], pair[1]
        if isinstance(t, bool) or isinstance(text, bool):
            raise ValueError
        value = float(text)
        t_s = float(t)
    except (TypeError, ValueError):
        raise ParseError(
            f'not a [time, "value"] pair: {pair!r}', path=source, field=field
        ) from None
    if not math.isfinite(t_s) or t_s != int(t_s):
        raise ParseError(
            f"time {t_s} is not a whole second",
            path=source,
            field=field,
            hint="query with a whole-second start and step",
        )
    return int(t_s), value
