"""``gpuyield ingest utilization``: per-GPU activity samples, to tell allocated from used.

Sources, each in the format labs already have:

- saved Prometheus ``query_range`` responses (``--prom-json``), from the NVIDIA DCGM exporter
  (``DCGM_FI_PROF_GR_ENGINE_ACTIVE``, ``DCGM_FI_DEV_GPU_UTIL``, ``DCGM_FI_PROF_PIPE_TENSOR_ACTIVE``,
  ``DCGM_FI_PROF_SM_ACTIVE``) or Princeton's jobstats exporter (``nvidia_gpu_duty_cycle``,
  ``nvidia_gpu_jobId``);
- a Prometheus server itself (``--prometheus URL``), read through the same HTTP API.

Every source is read, staged (one row per GPU and sample time) and loaded in one transaction;
the same content twice is a no-op. The ledger joins the samples to allocations (ledger/utilization).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import duckdb
import pyarrow as pa

from gpuyield import store
from gpuyield.errors import InputError
from gpuyield.ingest import gpu_models
from gpuyield.ingest._files import scan_file
from gpuyield.ingest.source import IngestOutcome, InputContent, already_ingested, register
from gpuyield.ingest.utilization import duckjson, load, prometheus, sacct_usage
from gpuyield.ingest.utilization.promjson import (
    MetricNames,
    Role,
    node_name,
    parse_response,
    samples_of,
)

__all__ = [
    "MetricNames",
    "PrometheusSource",
    "Role",
    "UtilizationResult",
    "ingest_utilization",
]

SOURCE = "utilization"


@dataclass(frozen=True, kw_only=True, slots=True)
class UtilizationResult:
    """What one utilization source added."""

    path: str
    """The file read, or the Prometheus URL."""
    sha256: str
    """Content hash (of the responses, for a server)."""
    ingest_id: int
    """Provenance id (the earlier one when skipped)."""
    skipped: bool
    """True when the same content was ingested before."""
    samples: int = 0
    """GPU samples stored (one per GPU and sample time, all metrics of it together)."""

    @classmethod
    def of(cls, outcome: IngestOutcome) -> UtilizationResult:
        """The result ``already_ingested`` or ``register`` gave (the rows read are the samples)."""
        return cls(
            path=outcome.path,
            sha256=outcome.sha256,
            ingest_id=outcome.ingest_id,
            skipped=outcome.skipped,
            samples=outcome.rows_read,
        )

    @property
    def outcome(self) -> IngestOutcome:
        """The same, as every ingest source reports it."""
        return IngestOutcome(
            source=SOURCE,
            path=self.path,
            sha256=self.sha256,
            ingest_id=self.ingest_id,
            skipped=self.skipped,
            rows_read=self.samples,
        )


@dataclass(frozen=True, kw_only=True, slots=True)
class PrometheusSource:
    """A window of a Prometheus server to read."""

    url: str
    """Base URL, e.g. ``http://prometheus:9090``."""
    since_s: int
    """Window start (epoch seconds)."""
    until_s: int
    """Window end (epoch seconds, inclusive of a sample at that instant)."""


def ingest_utilization(
    db: str | Path | None,
    *,
    prom_json: Iterable[Path] = (),
    server: PrometheusSource | None = None,
    sacct_usage: Iterable[Path] = (),
    tz: str = "UTC",
    step_s: int = 60,
    names: MetricNames | None = None,
    cluster: str | None = None,
    con: duckdb.DuckDBPyConnection | None = None,
) -> list[UtilizationResult]:
    """Ingest utilization samples, all sources or none."""
    names = names or MetricNames()
    files = [Path(p) for p in prom_json]
    usage = [Path(p) for p in sacct_usage]
    if not files and server is None and not usage:
        raise InputError(
            "no utilization source given",
            hint="pass --prom-json FILE..., --prometheus URL or --sacct-usage FILE",
        )
    if step_s <= 0:
        raise InputError(f"--step must be positive, not {step_s}", hint="the scrape interval")
    own = con is None
    con = con if con is not None else store.connect(db)
    try:
        for fast in (True, False):
            try:
                with store.transaction(con):
                    results = _ingest_files(
                        con, files, names, step_s=step_s, cluster=cluster, fast=fast
                    )
                    if server is not None:
                        results.append(
                            _ingest_server(con, server, names, step_s=step_s, cluster=cluster)
                        )
                    results.extend(_ingest_usage(con, p, tz=tz, cluster=cluster) for p in usage)
                    return results
            except _Refused:
                continue  # rolled back: read every file again in Python, which names the fault
        raise AssertionError("the Python reader never refuses silently")
    finally:
        if own:
            con.close()


class _Refused(Exception):
    """DuckDB's reader refused a point that the Python reader must name (or accept)."""


def _options(step_s: int, cluster: str | None, names: MetricNames) -> str:
    return json.dumps(
        {"step_s": step_s, "cluster": cluster, "metrics": sorted(names.metrics)}, sort_keys=True
    )


def _ingest_files(
    con: duckdb.DuckDBPyConnection,
    files: list[Path],
    names: MetricNames,
    *,
    step_s: int,
    cluster: str | None,
    fast: bool = True,
) -> list[UtilizationResult]:
    """Saved responses, read together: DuckDB reads many files in parallel (``fast``), else
    Python reads them one by one."""
    options = _options(step_s, cluster, names)
    results: dict[Path, UtilizationResult] = {}
    fresh: dict[Path, InputContent] = {}
    for path in files:
        content = _content(path)
        seen = already_ingested(con, SOURCE, content, options, latest_only=False)
        if seen is not None:
            results[path] = UtilizationResult.of(seen)
        else:
            fresh[path] = content
    if fresh:
        paths = list(fresh)
        ids = {duckjson.source_name(p): store.next_ingest_id(con) for p in paths}
        replace = load.has_rows(con)
        surveyed = duckjson.survey(paths, names) if fast else None
        if surveyed is not None:
            _load_fast(con, paths, surveyed, ids, names, step_s=step_s, cluster=cluster)
        else:  # read again in Python, which names the series and field at fault
            tables = [
                _with_ingest(parse_response(p, names), ids[duckjson.source_name(p)]) for p in paths
            ]
            con.register("gy_raw_points", pa.concat_tables(tables))
            load.load(con, "SELECT * FROM gy_raw_points", step_s=step_s, cluster=cluster)
        staged = load.finish(con, list(ids.values()), replace=replace)
        for path in paths:
            ingest_id = ids[duckjson.source_name(path)]
            # DCGM's modelName label: which GPU model each node holds (ledger/weights).
            models = gpu_models.dcgm_names([path], names.node_labels, node_name)
            gpu_models.store_dcgm_names(con, models, ingest_id, cluster)
            samples = staged.get(ingest_id, 0)
            done = register(con, SOURCE, fresh[path], ingest_id, None, options, read=samples)
            results[path] = UtilizationResult.of(done)
    return [results[p] for p in files]


def _load_fast(
    con: duckdb.DuckDBPyConnection,
    paths: list[Path],
    surveyed: dict[str, duckjson.FileSurvey],
    ids: dict[str, int],
    names: MetricNames,
    *,
    step_s: int,
    cluster: str | None,
) -> None:
    """DuckDB's reader, group by group of files sharing nodes; ``_Refused`` when a check fails."""
    duckjson.register_roles(con, names)
    duckjson.register_ingest_ids(con, ids)
    nodes = {source: s.nodes for source, s in surveyed.items()}
    groups = _sharing_nodes(paths, nodes)
    # Files alone on their nodes with one metric go in one statement: DuckDB reads a JSON
    # document on one thread, so only several files at once keep every core busy, and without
    # the pivot nothing grows with the number of files.
    direct = [
        g[0]
        for g in groups
        if len(g) == 1 and surveyed[duckjson.source_name(g[0])].loads_without_pivot()
    ]
    pivoted = [g for g in groups if not (len(g) == 1 and g[0] in direct)]
    try:
        if direct:
            sql = duckjson.points_sql(direct, names, pivot=False, step_s=step_s)
            load.load(con, sql, step_s=step_s, cluster=cluster, pivot=False)
        for group in pivoted:
            sql = duckjson.points_sql(group, names, step_s=step_s)
            load.load(con, sql, step_s=step_s, cluster=cluster)
    except duckjson.CHECK_ERRORS as error:
        raise _Refused from error


def _ingest_usage(
    con: duckdb.DuckDBPyConnection, path: Path, *, tz: str, cluster: str | None
) -> UtilizationResult:
    """Slurm's own per-step GPU utilization or the jobstats summary: one sample per GPU and run."""
    content = _content(path)
    options = json.dumps({"sacct_usage": True, "tz": tz, "cluster": cluster}, sort_keys=True)
    seen = already_ingested(con, SOURCE, content, options, latest_only=False)
    if seen is not None:
        return UtilizationResult.of(seen)
    table = sacct_usage.read(path, tz=tz)
    ingest_id = store.next_ingest_id(con)
    replace = load.has_rows(con)
    con.register("gy_raw_points", _with_ingest(table, ingest_id))
    load.load(
        con,
        "SELECT * FROM gy_raw_points",
        step_s=0,
        cluster=cluster,
        step_column=True,
    )
    samples = load.finish(con, [ingest_id], replace=replace).get(ingest_id, 0)
    return UtilizationResult.of(
        register(con, SOURCE, content, ingest_id, None, options, read=samples)
    )


def _sharing_nodes(paths: list[Path], nodes: dict[str, frozenset[str]]) -> list[list[Path]]:
    """Files in groups that share no node: samples of one GPU and time (say, one metric per
    file) are pivoted together, and each group's pivot stays as small as its files."""
    groups: list[tuple[set[str], list[Path]]] = []
    for path in paths:
        mine = set(nodes[duckjson.source_name(path)])
        touching = [g for g in groups if g[0] & mine]
        merged = (mine.union(*(g[0] for g in touching)), [p for g in touching for p in g[1]])
        merged[1].append(path)
        groups = [g for g in groups if not g[0] & mine] + [merged]
    return [g[1] for g in groups]


def _with_ingest(table: pa.Table, ingest_id: int) -> pa.Table:
    return table.append_column("ingest_id", pa.array([ingest_id] * table.num_rows, pa.int64()))


def _content(path: Path) -> InputContent:
    """A file's content hash; ``ingests`` records no size for utilization inputs."""
    return InputContent(path=str(path), sha256=scan_file(path).sha256)


def _ingest_server(
    con: duckdb.DuckDBPyConnection,
    server: PrometheusSource,
    names: MetricNames,
    *,
    step_s: int,
    cluster: str | None,
) -> UtilizationResult:
    metrics = sorted(names.metrics)
    documents = list(
        prometheus.query_documents(
            server.url, metrics, since_s=server.since_s, until_s=server.until_s, step_s=step_s
        )
    )
    digest = hashlib.sha256()
    for _, _, document in documents:
        digest.update(json.dumps(document, sort_keys=True).encode())
    options = _options(step_s, cluster, names)
    content = InputContent(path=server.url, sha256=digest.hexdigest())
    seen = already_ingested(con, SOURCE, content, options, latest_only=False)
    if seen is not None:
        return UtilizationResult.of(seen)
    tables = [samples_of(doc, names, source=where, metric=m) for where, m, doc in documents]
    ingest_id = store.next_ingest_id(con)
    con.register("gy_raw_points", _with_ingest(pa.concat_tables(tables), ingest_id))
    replace = load.has_rows(con)
    load.load(con, "SELECT * FROM gy_raw_points", step_s=step_s, cluster=cluster)
    samples = load.finish(con, [ingest_id], replace=replace).get(ingest_id, 0)
    docs = (doc for _, _, doc in documents)
    models = gpu_models.dcgm_names_of(docs, names.node_labels, node_name)
    gpu_models.store_dcgm_names(con, models, ingest_id, cluster)
    return UtilizationResult.of(
        register(con, SOURCE, content, ingest_id, None, options, read=samples)
    )
