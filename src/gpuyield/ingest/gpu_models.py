"""GPU model names other sources see on a node, into ``gpu_names`` (ledger/weights reads them):

- the cluster's ``gres.conf`` (``gpuyield ingest gres-conf``): ``NodeName=n[1-2] Name=gpu
  Type=h100 File=/dev/nvidia[0-7]`` names the type of each node's GPUs;
- DCGM's ``modelName`` label on the utilization samples (``gpuyield ingest utilization``), the
  name the hardware itself reports (``NVIDIA H100 80GB HBM3``).

A gres.conf is a capture of one state: its latest ingest replaces the earlier one's names. DCGM
names add up with the samples they came with.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import duckdb

from gpuyield import store
from gpuyield.errors import InputError, ManifestError, ParseError, UnknownIdError
from gpuyield.estimate.catalog import get_accelerator
from gpuyield.hostlist import expand_hostlist
from gpuyield.ingest._files import scan_file
from gpuyield.ingest.source import (
    Content,
    IngestOutcome,
    Loaded,
    RowCounts,
    already_ingested,
    atomically,
    register_loaded,
)
from gpuyield.manifest import Manifest
from gpuyield.sqltext import literal

SOURCE = "slurm.gres_conf"
DCGM = "dcgm"
_KEY = re.compile(r"([A-Za-z]+)=(\S+)")
_HINT = "give the cluster's gres.conf (lines like NodeName=n[1-4] Name=gpu Type=h100 File=...)"


@dataclass(frozen=True, kw_only=True, slots=True)
class NodeName:
    """One GPU name seen on one node."""

    node: str
    name: str
    line: int | None
    """Line of the file it was read from (None: a label of a series)."""


def read_gres_conf(path: Path) -> list[NodeName]:
    """Every (node, GPU type) a gres.conf declares; ``Name=gpu`` lines without ``Type=`` name no
    model and give nothing. A typed line without ``NodeName=`` is an error: which node reads the
    file is not known here."""
    try:
        text = path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as error:
        raise InputError(f"cannot read {path}: {error}", hint=_HINT) from None
    found: list[NodeName] = []
    for number, line in _logical_lines(text):
        fields = {k.lower(): v for k, v in _KEY.findall(line)}
        if fields.get("name", "").lower() != "gpu" or "type" not in fields:
            if not fields and line.strip():
                raise ParseError(
                    f"not a gres.conf line: {line[:60]!r}", path=path, line=number, hint=_HINT
                )
            continue
        if "nodename" not in fields:
            raise ParseError(
                "Type= without NodeName=: the line applies to whichever node reads the file",
                path=path,
                line=number,
                field="NodeName",
                hint="give the cluster-wide gres.conf, whose lines say NodeName=",
            )
        try:
            nodes = expand_hostlist(fields["nodename"])
        except InputError as error:
            raise ParseError(str(error), path=path, line=number, field="NodeName") from None
        found += [NodeName(node=n, name=fields["type"], line=number) for n in nodes]
    return found


def _logical_lines(text: str) -> Iterable[tuple[int, str]]:
    """Lines without comments, a trailing ``\\`` joining the next one (Slurm's syntax)."""
    pending, start = "", 0
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.split("#", 1)[0].rstrip()
        if not pending:
            start = number
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        yield start, pending + line
        pending = ""
    if pending:
        yield start, pending


def ingest_gres_conf(db: str | Path, path: Path, *, cluster: str | None = None) -> IngestOutcome:
    """Load a gres.conf's GPU types into the store, all or nothing; the same file twice is a no-op."""
    info = scan_file(path)
    # Read before the store is opened: a file that does not read creates no store.
    names = GRES_CONF.read(None, info)
    con = store.connect(db)
    try:
        gres = GresRun(con=con, cluster=cluster or _only_cluster(con, path))
        seen = already_ingested(con, SOURCE, info, gres.options)
        if seen is not None:
            return seen

        def work(_: duckdb.DuckDBPyConnection, __: bool) -> IngestOutcome:
            GRES_CONF.stage(gres, names)
            return register_loaded(gres, GRES_CONF, info, GRES_CONF.load(gres, info, names), None)

        return atomically(db, con, work)
    finally:
        con.close()


@dataclass(frozen=True, kw_only=True, slots=True)
class GresRun:
    """One gres.conf ingest: where it writes, and the cluster the file describes."""

    con: duckdb.DuckDBPyConnection
    """The store."""
    cluster: str
    """The cluster whose nodes the file names."""

    @property
    def options(self) -> str:
        """What ``ingests.options`` records: the cluster."""
        return json.dumps({"cluster": self.cluster})


@dataclass(frozen=True, kw_only=True, slots=True)
class GresConfSource:
    """A gres.conf as a ``Source``: the GPU type (``Type=``) of each node's GPUs."""

    kind: str = SOURCE
    input_field: str = "gres_conf.path"
    latest_only: bool = True

    def read(self, run: GresRun | None, info: Content) -> list[NodeName]:
        """The file's GPU types; it needs nothing of the store."""
        return read_gres_conf(Path(info.path))

    def stage(self, run: GresRun, staged: list[NodeName]) -> None:
        """A gres.conf says nothing of other inputs."""

    def load(self, run: GresRun, info: Content, staged: list[NodeName]) -> Loaded:
        ingest_id = store.next_ingest_id(run.con)
        run.con.execute(
            "DELETE FROM gpu_names WHERE source = 'gres.conf' AND cluster = ?", [run.cluster]
        )
        _insert(run.con, run.cluster, staged, "gres.conf", ingest_id)
        return Loaded(ingest_id=ingest_id, counts=RowCounts(read=len(staged)))


GRES_CONF = GresConfSource()


def _only_cluster(con: duckdb.DuckDBPyConnection, path: Path) -> str:
    clusters = [
        r[0] for r in con.execute("SELECT DISTINCT cluster FROM nodes ORDER BY 1").fetchall()
    ]
    if len(clusters) != 1:
        raise InputError(
            f"{path}: which cluster's gres.conf is this? the store has "
            + (f"clusters {', '.join(clusters)}" if clusters else "no node inventory yet"),
            hint="add ingest.cluster NAME",
        )
    return str(clusters[0])


def _insert(
    con: duckdb.DuckDBPyConnection,
    cluster: str,
    names: Sequence[NodeName],
    source: str,
    ingest_id: int,
) -> None:
    if names:
        con.executemany(
            "INSERT INTO gpu_names VALUES (?, ?, ?, ?, ?, ?)",
            [[cluster, n.node, n.name, source, ingest_id, n.line] for n in names],
        )


def dcgm_names(
    paths: Sequence[Path], node_labels: Sequence[str], node_name: Callable[[str], str]
) -> list[NodeName]:
    """The distinct (node, ``modelName``) pairs of saved ``query_range`` responses, read by
    DuckDB on a connection of its own (labels only: a 300 MB response stays out of Python).
    Nothing when the files carry no ``modelName`` label or are not responses DuckDB reads (the
    samples' own reader names that). ``node_name`` turns a host label into Slurm's name."""
    files = "[" + ", ".join(literal(str(p)) for p in paths) + "]"
    hosts = ", ".join(f"nullif(s.metric[{literal(k)}], '')" for k in node_labels)
    size = max((min(1 << 31, max(1 << 24, p.stat().st_size + 1)) for p in paths), default=1 << 24)
    sql = f"""SELECT DISTINCT coalesce({hosts}) AS host, s.metric['modelName'] AS model
              FROM (SELECT unnest(data.result) AS s FROM read_json({files},
                    columns={{'data': 'STRUCT(result STRUCT(metric MAP(VARCHAR, VARCHAR))[])'}},
                    maximum_object_size={literal(size)}))
              WHERE nullif(s.metric['modelName'], '') IS NOT NULL"""
    con = duckdb.connect()
    try:
        rows = con.execute(sql).fetchall()
    except duckdb.Error:
        return []
    finally:
        con.close()
    return _distinct(NodeName(node=node_name(h), name=m, line=None) for h, m in rows if h)


def dcgm_names_of(
    documents: Iterable[object], node_labels: Sequence[str], node_name: Callable[[str], str]
) -> list[NodeName]:
    """The same pairs from responses already parsed (a Prometheus server's)."""
    found = []
    for document in documents:
        data = document.get("data") if isinstance(document, dict) else None
        for series in (data or {}).get("result") or []:
            labels = series.get("metric") if isinstance(series, dict) else None
            if not isinstance(labels, dict) or not labels.get("modelName"):
                continue
            host = next((str(labels[k]) for k in node_labels if labels.get(k)), None)
            if host:
                found.append(
                    NodeName(node=node_name(host), name=str(labels["modelName"]), line=None)
                )
    return _distinct(found)


def _distinct(names: Iterable[NodeName]) -> list[NodeName]:
    return sorted(set(names), key=lambda n: (n.node, n.name))


def store_dcgm_names(
    con: duckdb.DuckDBPyConnection, names: Sequence[NodeName], ingest_id: int, cluster: str | None
) -> None:
    """Keep the model names of a utilization ingest (inside its transaction). Without
    ``--cluster`` the cluster is left empty: the names then apply to that node in any cluster."""
    _insert(con, cluster or "", names, DCGM, ingest_id)


def check_catalog_models(manifest: Manifest, path: Path) -> None:
    """Every ``[[gpu_models]]`` model must be in the accelerator catalog: said when the manifest
    is ingested, not at the first report."""
    for index, rule in enumerate(manifest.gpu_models):
        try:
            get_accelerator(rule.model)
        except UnknownIdError as error:
            raise ManifestError(
                f"{path}: gpu_models[{index}].model {rule.model!r} is not in the catalog",
                hint=error.hint or "gpuyield estimate accelerators lists the catalog's ids",
            ) from None
