"""``gpuyield ingest utilization``: per-GPU activity samples, to tell allocated from used.

Sources, each in the format labs already have:

- saved Prometheus ``query_range`` responses (``--prom-json``), from the NVIDIA DCGM exporter
  (``DCGM_FI_PROF_GR_ENGINE_ACTIVE``, ``DCGM_FI_DEV_GPU_UTIL``, ``DCGM_FI_PROF_PIPE_TENSOR_ACTIVE``,
  ``DCGM_FI_PROF_SM_ACTIVE``) or Princeton's jobstats exporter (``nvidia_gpu_duty_cycle``,
  ``nvidia_gpu_jobId``), one response per file or several one after the other (NDJSON);
- a Prometheus server itself (``--prometheus URL``), read through the same HTTP API;
- Slurm's own per-step averages and jobstats summaries (``--sacct-usage``).

Every source is read into staged series (``stage``), checked, stored as one row per GPU and
sample time with the interval it covers, and attributed to the jobs that held the GPUs
(``gpuyield.attribution``), all in one transaction; the same content twice is a no-op.
"""

from __future__ import annotations

import hashlib
import json
import tempfile
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path

import duckdb
import pyarrow as pa

from gpuyield import store
from gpuyield.errors import FieldError, InputError
from gpuyield.ingest import gpu_models
from gpuyield.ingest._files import scan_file
from gpuyield.ingest.source import (
    Content,
    IngestOutcome,
    InputContent,
    Loaded,
    RowCounts,
    already_ingested,
    atomically,
    register_loaded,
)
from gpuyield.ingest.utilization import duckjson, load, prometheus, sacct_usage, stage
from gpuyield.ingest.utilization.prometheus import Limits
from gpuyield.ingest.utilization.promjson import MetricNames, Role, node_name, parse_response

__all__ = [
    "Limits",
    "MetricNames",
    "PrometheusSource",
    "Role",
    "UtilizationResult",
    "ingest_utilization",
]

SOURCE = "utilization"
#: Input read, stored and attributed at a time (several files, so DuckDB reads them in parallel):
#: memory holds one batch's series and groups, not the whole capture's.
BATCH_BYTES = 256 << 20
#: The Python reader (the fallback that names a fault DuckDB's reader refused) holds a file's
#: parsed JSON in memory, about twenty times its size: larger files are refused with a hint.
PYTHON_READER_MAX_BYTES = 256 << 20
_SPLIT_HINT = (
    "save the answers in files of some tens of MB (fewer nodes or hours a query; several "
    "answers one a line in one file are fine), or check the file is a Prometheus answer"
)


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

    def to_dict(self) -> dict[str, object]:
        """``gpuyield ingest utilization --json``: one object per source, every field."""
        return asdict(self)

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
    limits: Limits = field(default_factory=Limits)
    """How long and how much to read from it."""


def ingest_utilization(
    db: str | Path | None,
    *,
    prom_json: Iterable[Path] = (),
    server: PrometheusSource | None = None,
    sacct_usage: Iterable[Path] = (),
    tz: str = "UTC",
    step_s: int | None = None,
    names: MetricNames | None = None,
    cluster: str | None = None,
    con: duckdb.DuckDBPyConnection | None = None,
) -> list[UtilizationResult]:
    """Ingest utilization samples, all sources or none.

    ``step_s``: the interval the saved responses were taken at, when the user declares it (the
    data must agree); None reads each series' spacing from its data. A server is asked at
    ``step_s`` (60 s when None).
    """
    names = names or MetricNames()
    files = [Path(p) for p in prom_json]
    usage = [Path(p) for p in sacct_usage]
    if not files and server is None and not usage:
        raise InputError(
            "no utilization source given",
            hint="pass utilization.prom_json FILE..., utilization.server URL or "
            "utilization.sacct_usage FILE",
        )
    if step_s is not None and step_s <= 0:
        raise FieldError(
            "utilization.step_s", f"must be positive, not {step_s}", hint="the scrape interval"
        )
    own = con is None
    con = con if con is not None else store.connect(db)
    try:
        with tempfile.TemporaryDirectory(prefix="gpuyield-prometheus-") as answers_dir:
            plan = _Plan(names=names, step_s=step_s, cluster=cluster, tz=tz)
            for path in files:
                plan.add_file(path)
            if server is not None:
                plan.add_server(server, Path(answers_dir))
            plan.usage = usage
            return _ingest(con, plan)
    finally:
        if own:
            con.close()


@dataclass(kw_only=True, slots=True)
class _Saved:
    """A saved response to read: a file given, or a server's answer written to one."""

    path: Path
    """The file."""
    result_index: int
    """Which result it belongs to."""
    metric: str | None = None
    """The metric of its series that name none."""


@dataclass(kw_only=True, slots=True)
class _Source:
    """One input and what became of it."""

    content: InputContent
    options: str
    declared_step_s: int | None
    saved: list[_Saved] = field(default_factory=list)
    usage: Path | None = None
    result: UtilizationResult | None = None
    ingest_id: int = 0


@dataclass(kw_only=True, slots=True)
class _Plan:
    """Every input of one call, in order."""

    names: MetricNames
    step_s: int | None
    cluster: str | None
    tz: str
    sources: list[_Source] = field(default_factory=list)
    usage: list[Path] = field(default_factory=list)

    def add_file(self, path: Path) -> None:
        content = InputContent(path=str(path), sha256=scan_file(path).sha256)
        source = _Source(
            content=content, options=self._options(self.step_s), declared_step_s=self.step_s
        )
        source.saved.append(_Saved(path=path, result_index=len(self.sources)))
        self.sources.append(source)

    def add_server(self, server: PrometheusSource, out_dir: Path) -> None:
        """The server's answers, fetched once (before any transaction) and saved as files."""
        step_s = self.step_s or stage.DEFAULT_STEP_S
        digest = hashlib.sha256()
        answers = list(
            prometheus.query_answers(
                server.url,
                sorted(self.names.metrics),
                since_s=server.since_s,
                until_s=server.until_s,
                step_s=step_s,
                out_dir=out_dir,
                limits=server.limits,
                feed=digest.update,
            )
        )
        content = InputContent(path=server.url, sha256=digest.hexdigest())
        # The server answers on the grid asked: its step is declared.
        source = _Source(content=content, options=self._options(step_s), declared_step_s=step_s)
        index = len(self.sources)
        source.saved = [_Saved(path=a.path, result_index=index, metric=a.metric) for a in answers]
        self.sources.append(source)

    def _options(self, step_s: int | None) -> str:
        metrics = sorted(self.names.metrics)
        return json.dumps(
            {"step_s": step_s, "cluster": self.cluster, "metrics": metrics}, sort_keys=True
        )


def _ingest(con: duckdb.DuckDBPyConnection, plan: _Plan) -> list[UtilizationResult]:
    for path in plan.usage:
        content = InputContent(path=str(path), sha256=scan_file(path).sha256)
        options = {"sacct_usage": True, "tz": plan.tz, "cluster": plan.cluster}
        plan.sources.append(
            _Source(
                content=content,
                options=json.dumps(options, sort_keys=True),
                declared_step_s=None,
                usage=path,
            )
        )
    # The fast way reads saved responses with DuckDB's JSON reader; when it refuses one, the
    # transaction is rolled back and they are read again in Python, which names the fault (or,
    # where DuckDB's reader was stricter, accepts them).
    atomically(
        None,
        con,
        lambda connection, fast: _load_all(UtilizationRun(con=connection, plan=plan, fast=fast)),
        redo_on=duckjson.CHECK_ERRORS,
    )
    return [s.result for s in plan.sources if s.result is not None]


def _load_all(run: UtilizationRun) -> None:
    """Read every input not ingested before, stage them in batches (each stored and attributed
    before the next), register each."""
    stage.create(run.con)
    fresh: list[_Source] = []
    for planned in run.plan.sources:
        seen = already_ingested(
            run.con, SOURCE, planned.content, planned.options, latest_only=False
        )
        planned.result = None if seen is None else UtilizationResult.of(seen)
        if seen is None:
            fresh.append(UTILIZATION.read(run, planned.content))
    for source in fresh:
        UTILIZATION.stage(run, source)
    for source in fresh:
        loaded = UTILIZATION.load(run, source.content, source)
        done = register_loaded(
            run, UTILIZATION, source.content, loaded, None, options=source.options
        )
        source.result = UtilizationResult.of(done)


@dataclass(kw_only=True, slots=True)
class UtilizationRun:
    """One attempt at a utilization ingest (mutable; rolled back with its transaction)."""

    con: duckdb.DuckDBPyConnection
    """The ingest's connection."""
    plan: _Plan
    """Every input of the call."""
    fast: bool
    """Saved responses read by DuckDB's JSON reader (else one by one in Python)."""
    batch: list[_Source] = field(default_factory=list)
    """Inputs staged and not yet stored."""
    batch_bytes: int = 0
    """Their size."""
    stored: dict[int, int] = field(default_factory=dict)
    """GPU samples stored, by ingest id."""

    @property
    def options(self) -> str:
        """Each input records its own options (``_Source.options``); none for the whole run."""
        return ""


@dataclass(frozen=True, kw_only=True, slots=True)
class UtilizationSource:
    """Utilization samples as a ``Source``. The inputs add up (one file per metric), so any
    earlier ingest of the same content with the same options makes one a no-op."""

    kind: str = SOURCE
    input_field: str = "utilization.prom_json"
    latest_only: bool = False

    def read(self, run: UtilizationRun, info: Content) -> _Source:
        """The input as planned (a file scanned, a server's answers saved before the
        transaction), with its ingest id; DuckDB reads its answers when its batch is staged."""
        source = next(s for s in run.plan.sources if s.content is info)
        source.ingest_id = store.next_ingest_id(run.con)
        return source

    def stage(self, run: UtilizationRun, staged: _Source) -> None:
        """Hold inputs in batches of about ``BATCH_BYTES`` (an input whole): each batch is read,
        stored and attributed before the next, so memory holds one batch, whatever the size of
        the capture. The later batches find the earlier ones' samples stored, as a later ingest
        would (the store's rules are the same)."""
        paths = [x.path for x in staged.saved] + ([staged.usage] if staged.usage else [])
        size = sum(p.stat().st_size for p in paths)
        if run.batch and run.batch_bytes + size > BATCH_BYTES:
            _store_batch(run)
        run.batch.append(staged)
        run.batch_bytes += size

    def load(self, run: UtilizationRun, info: Content, staged: _Source) -> Loaded:
        if any(s is staged for s in run.batch):
            _store_batch(run)
        samples = run.stored.get(staged.ingest_id, 0)
        return Loaded(ingest_id=staged.ingest_id, counts=RowCounts(read=samples))


UTILIZATION = UtilizationSource()


def _store_batch(run: UtilizationRun) -> None:
    """Stage the batch's inputs (all saved responses in one read), store and attribute them."""
    con, plan, batch = run.con, run.plan, run.batch
    stage.create(con)
    saved = [(x, s.ingest_id) for s in batch for x in s.saved]
    if saved:
        _stage_saved(con, saved, plan.names, fast=run.fast)
    for source in batch:
        if source.usage is not None:
            _stage_usage(con, source.usage, source.ingest_id, plan)
    declared = {s.ingest_id: s.declared_step_s for s in batch}
    run.stored |= load.load(con, declared, cluster=plan.cluster)
    for source in batch:
        _store_gpu_models(con, source, plan, fast=run.fast)
    run.batch, run.batch_bytes = [], 0


def _store_gpu_models(
    con: duckdb.DuckDBPyConnection, source: _Source, plan: _Plan, *, fast: bool
) -> None:
    """DCGM's ``modelName`` label of the source's saved answers: which GPU model each node
    holds (ledger/weights). DuckDB's reader kept the labels as it read the samples; after the
    Python reader, ``gpu_models`` reads the files' labels again."""
    if not source.saved:
        return
    if fast:
        rows = con.execute(
            """SELECT DISTINCT node, model FROM gy_series
               WHERE ingest_id = $id AND model IS NOT NULL AND node IS NOT NULL""",
            {"id": source.ingest_id},
        ).fetchall()
        found = (gpu_models.NodeName(node=n, name=m, line=None) for n, m in rows)
        models = sorted(found, key=lambda n: (n.node, n.name))
    else:
        paths = [x.path for x in source.saved]
        models = gpu_models.dcgm_names(paths, plan.names.node_labels, node_name)
    gpu_models.store_dcgm_names(con, models, source.ingest_id, plan.cluster)


def _stage_saved(
    con: duckdb.DuckDBPyConnection,
    saved: list[tuple[_Saved, int]],
    names: MetricNames,
    *,
    fast: bool,
) -> None:
    """Saved responses into ``gy_series``: all files in one read by DuckDB (it reads several
    files in parallel), or one by one in Python."""
    if fast:
        duckjson.register_roles(con, names)
        sources = pa.table(
            {
                "source": [duckjson.source_name(x.path) for x, _ in saved],
                "ingest_id": pa.array([i for _, i in saved], pa.int64()),
                "metric": pa.array([x.metric for x, _ in saved], pa.string()),
            }
        )
        con.register("gy_sources", sources)
        paths = [x.path for x, _ in saved]
        try:
            con.execute(f"INSERT INTO gy_series {duckjson.stage_sql(paths, names)}")
        except duckdb.OutOfMemoryException as error:
            raise InputError(
                f"DuckDB's JSON reader ran out of memory reading {len(paths)} file(s) "
                f"({paths[0]}...): {str(error).splitlines()[0]}",
                hint=_SPLIT_HINT,
            ) from None
        return
    for item, ingest_id in saved:
        size = item.path.stat().st_size
        if size > PYTHON_READER_MAX_BYTES:
            raise InputError(
                f"{item.path}: DuckDB's JSON reader could not read it, and at {size:,} bytes it "
                "is too large to read again in Python to say why",
                hint=_SPLIT_HINT,
            )
        table = parse_response(item.path, names, metric=item.metric)
        _stage_table(con, table, ingest_id)


def _stage_usage(con: duckdb.DuckDBPyConnection, path: Path, ingest_id: int, plan: _Plan) -> None:
    """Slurm's run averages: at most as many GPUs a node, and nodes a step, as the inventory
    has (bounded work whatever the file says)."""
    rows = con.execute(
        """SELECT max(num_gpus), count(*) FROM nodes WHERE $cluster IS NULL OR cluster = $cluster""",
        {"cluster": plan.cluster},
    ).fetchall()
    max_gpus, num_nodes = rows[0]
    bounds = {}
    if max_gpus:
        bounds = {"max_gpus_per_node": int(max_gpus), "max_nodes": int(num_nodes)}
    table = sacct_usage.read(path, tz=plan.tz, **bounds)
    _stage_table(con, table, ingest_id)


def _stage_table(con: duckdb.DuckDBPyConnection, table: pa.Table, ingest_id: int) -> None:
    ids = pa.array([ingest_id] * table.num_rows, pa.int64())
    con.register("gy_staged_arrow", table.append_column("ingest_id", ids))
    con.execute("INSERT INTO gy_series BY NAME SELECT * FROM gy_staged_arrow")
    con.unregister("gy_staged_arrow")
