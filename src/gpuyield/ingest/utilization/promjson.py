"""Prometheus ``query_range`` responses (the JSON ``curl .../api/v1/query_range`` prints) as samples.

One response holds a matrix: a series per label set, each with ``[time, "value"]`` pairs. Which
metric a series is, and which GPU, node and job it belongs to, come from its labels; the names are
configurable (``MetricNames``), with the NVIDIA DCGM exporter's and Princeton jobstats' as defaults.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path

import pyarrow as pa

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


# Columns of the raw samples: one row per series point, before metrics are pivoted per GPU.
RAW_SCHEMA = pa.schema(
    [
        ("role", pa.string()),
        ("node", pa.string()),
        ("gpu", pa.int64()),
        ("job_id", pa.string()),
        ("t_s", pa.int64()),
        ("value", pa.float64()),
    ]
)


def node_name(raw: str) -> str:
    """Slurm's short node name from an exporter's host label: no ``:port``, no domain.

    An IP address keeps its dots (Slurm nodes are rarely named by address, but then they are).
    """
    host = raw.rsplit(":", 1)[0] if raw.count(":") == 1 else raw
    if host.replace(".", "").isdigit():
        return host
    return host.split(".", 1)[0]


def parse_response(path: Path, names: MetricNames) -> pa.Table:
    """The samples of one saved ``query_range`` (or matrix ``query``) response."""
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ParseError(
            f"not a Prometheus JSON response: {error}",
            path=path,
            hint="save exactly what `curl '.../api/v1/query_range?query=...'` prints",
        ) from None
    return samples_of(document, names, source=str(path))


def samples_of(
    document: object, names: MetricNames, *, source: str, metric: str | None = None
) -> pa.Table:
    """The samples of a parsed response; ``source`` names it in errors, ``metric`` is the name of
    series without one (PromQL functions such as ``last_over_time`` drop ``__name__``)."""
    result = _matrix(document, source)
    columns: dict[str, list[object]] = {name: [] for name in RAW_SCHEMA.names}
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
        for t_s, value in _points(series, source, where):
            if role is Role.JOB:
                job_value: str | None = None if value <= 0 else f"{value:.0f}"
                columns["job_id"].append(job_value)
                value = math.nan
            else:
                columns["job_id"].append(job)
                value *= scale
            columns["role"].append(role.value)
            columns["node"].append(node)
            columns["gpu"].append(gpu)
            columns["t_s"].append(t_s)
            columns["value"].append(value)
    return pa.table(columns, schema=RAW_SCHEMA)


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
    if data.get("resultType") != "matrix" or not isinstance(data.get("result"), list):
        raise ParseError(
            f"resultType {data.get('resultType')!r}, not a matrix",
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
    try:
        gpu = int(gpu_text) if gpu_text is not None else None
    except ValueError:
        gpu = None
    if gpu is None:
        raise ParseError(
            f"GPU index {gpu_text!r} is not a number"
            if gpu_text is not None
            else f"a series with none of the GPU labels {', '.join(names.gpu_labels)}",
            path=source,
            field=f"{where}.metric",
            hint="name the exporter's GPU index label with MetricNames.gpu_labels",
        )
    job = next((str(labels[k]) for k in names.job_labels if labels.get(k)), None)
    return node_name(node), gpu, job


def _points(series: dict[str, object], source: str, where: str) -> list[tuple[int, float]]:
    values = series.get("values")
    if not isinstance(values, list):
        raise ParseError("a series without values", path=source, field=f"{where}.values")
    points: list[tuple[int, float]] = []
    for j, pair in enumerate(values):
        try:
            t, text = pair
            value = float(text)
            t_s = float(t)
        except (TypeError, ValueError):
            raise ParseError(
                f'not a [time, "value"] pair: {pair!r}',
                path=source,
                field=f"{where}.values[{j}]",
            ) from None
        if not math.isfinite(t_s) or t_s != int(t_s):
            raise ParseError(
                f"time {t} is not a whole second",
                path=source,
                field=f"{where}.values[{j}]",
                hint="query with a whole-second start and step",
            )
        if math.isnan(value):
            continue  # no measurement at this step: the interval stays unmeasured
        if value < 0 or math.isinf(value):
            raise ParseError(
                f"value {text!r} is not a utilization",
                path=source,
                field=f"{where}.values[{j}]",
            )
        points.append((int(t_s), value))
    return points
