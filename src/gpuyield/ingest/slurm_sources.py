"""The files of a Slurm ingest as ``Source``s: node events, the inventory, sacct, reservations,
the running jobs' GPU indices and the release manifest, each with its read, stage and load.

They share one ``SlurmRun``: the ingest's connection and options, and what the reads found that
the loads need (the capture time, the default cluster, how many nodes a job may name). Which file
of a directory or a collection each one is, and which Slurm client prints it, is said here too.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

import duckdb

from gpuyield import manifest as manifest_mod
from gpuyield import store
from gpuyield.ingest import events as events_mod
from gpuyield.ingest import jobs_detail as jobs_detail_mod
from gpuyield.ingest import nodes as nodes_mod
from gpuyield.ingest import reservations as reservations_mod
from gpuyield.ingest import sacct as sacct_mod
from gpuyield.ingest._files import FileInfo
from gpuyield.ingest._sql import replace_rows, store_rejects
from gpuyield.ingest.gpu_models import check_catalog_models
from gpuyield.ingest.sacct import load as sacct_load
from gpuyield.ingest.source import (
    Content,
    IngestOutcome,
    Loaded,
    RowCounts,
    Source,
    StagedT,
    already_ingested,
)
from gpuyield.progress import Progress


@dataclass(frozen=True, kw_only=True, slots=True)
class SlurmParams:
    """Everything one ingest attempt reads (it may run twice: direct, then staged)."""

    con: duckdb.DuckDBPyConnection
    scanned: dict[str, FileInfo]
    """The files given, by ``SlurmFile.name``."""
    options: str
    until_s: int | None
    tz: str
    lenient: bool
    fields: list[str] | None
    cluster: str | None
    progress: Progress
    strict_manifest: bool = False
    telemetry: tuple[tuple[str, Path], ...] = ()
    """(run, file) pairs of run telemetry, ingested after the files."""
    #: Plain copies of stdin/compressed inputs -> the path the user gave.
    renamed: dict[str, str] = field(default_factory=dict)


@dataclass(kw_only=True, slots=True)
class SlurmRun:
    """What one attempt has done so far (mutable; rolled back with its transaction on failure)."""

    params: SlurmParams
    direct: bool
    """Strict mode: sacct goes straight into ``jobs`` (``sacct/load.py``)."""
    results: list[IngestOutcome] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    as_of_candidates: list[int] = field(default_factory=list)
    as_of: int | None = None
    default_cluster: str = "default"
    max_nodes: int = 0
    """The most nodes one job's NodeList may name (the inventory bounds it)."""

    @property
    def con(self) -> duckdb.DuckDBPyConnection:
        """The ingest's connection."""
        return self.params.con

    @property
    def options(self) -> str:
        """The options recorded with every file (``ingests.options``)."""
        return self.params.options

    def fresh(self, source: SlurmSource[StagedT]) -> FileInfo | None:
        """The file of ``source`` when given and new to the store (a seen one is a skipped outcome)."""
        info = self.params.scanned.get(source.name)
        if info is None:
            return None
        seen = already_ingested(self.con, source.kind, info, self.options)
        if seen is not None:
            self.results.append(seen)
            return None
        return info

    def next_ingest_id(self) -> int:
        """A fresh provenance id."""
        return store.next_ingest_id(self.con)


class SlurmSource(Source[SlurmRun, StagedT], Protocol[StagedT]):
    """A ``Source`` of a Slurm ingest: one file, found by its ``name`` among the inputs."""

    @property
    def name(self) -> str:
        """Its field of ``SlurmInputs``."""
        ...

    @property
    def dir_file(self) -> str:
        """Its name in a ``--dir`` directory."""
        ...

    @property
    def client(self) -> str | None:
        """The Slurm client a collection runs to print it."""
        ...


@dataclass(frozen=True, kw_only=True, slots=True)
class SlurmFile:
    """What every Slurm ingest file says of itself, besides its steps."""

    name: str
    """Its field of ``SlurmInputs`` (and ``ingest.<name>``)."""
    kind: str
    """``ingests.source``."""
    dir_file: str
    """Its name in a ``--dir`` directory (as the simulator and ``collect --keep-raw`` write it)."""
    client: str | None
    """The Slurm client a collection runs to print it (None: not printed by Slurm)."""

    @property
    def input_field(self) -> str:
        """The library field naming the file."""
        return f"ingest.{self.name}"

    @property
    def latest_only(self) -> bool:
        """Slurm's files and the manifest are captures of one state."""
        return True


@dataclass(frozen=True, kw_only=True, slots=True)
class EventsSource(SlurmFile):
    """``sacctmgr show event``: node and cluster events (``events.py``)."""

    def read(self, run: SlurmRun, info: Content) -> events_mod.EventsStage:
        params = run.params
        params.progress.phase("parsing node events")
        assert isinstance(info, FileInfo)
        return events_mod.read_events(
            info.path,
            tz=params.tz,
            lenient=params.lenient,
            default_cluster=params.cluster or "default",
            info=info,
        )

    def stage(self, run: SlurmRun, staged: events_mod.EventsStage) -> None:
        if staged.as_of_s is not None:
            run.as_of_candidates.append(staged.as_of_s)

    def load(self, run: SlurmRun, info: Content, staged: events_mod.EventsStage) -> Loaded:
        ingest_id = run.next_ingest_id()
        events_mod.load_events(run.con, staged, ingest_id, Path(info.path))
        counts = RowCounts(read=staged.rows_read, rejected=staged.rows_rejected)
        return Loaded(ingest_id=ingest_id, counts=counts)


@dataclass(frozen=True, kw_only=True, slots=True)
class NodesSource(SlurmFile):
    """``scontrol show nodes`` or ``sinfo -N``: the inventory (``nodes.py``)."""

    def read(self, run: SlurmRun, info: Content) -> nodes_mod.NodesStage:
        return nodes_mod.read_nodes(
            Path(info.path), lenient=run.params.lenient, cluster=run.default_cluster
        )

    def stage(self, run: SlurmRun, staged: nodes_mod.NodesStage) -> None:
        """Says nothing of the whole ingest."""

    def load(self, run: SlurmRun, info: Content, staged: nodes_mod.NodesStage) -> Loaded:
        ingest_id = run.next_ingest_id()
        store_rejects(run.con, ingest_id, Path(info.path), list(staged.problems))
        replace_rows(
            run.con,
            "nodes",
            staged.nodes,
            key=("cluster", "node"),
            columns=("cluster", "node", "num_gpus", "gpu_type", "partitions", "features"),
            ingest_id=ingest_id,
        )
        counts = RowCounts(read=staged.rows_read, rejected=len(staged.problems))
        return Loaded(ingest_id=ingest_id, counts=counts)


@dataclass(frozen=True, kw_only=True, slots=True)
class StagedSacct:
    """An sacct file read: its ingest id (taken by the read: the direct load writes ``jobs``)."""

    ingest_id: int
    stage: sacct_mod.SacctStage


@dataclass(frozen=True, kw_only=True, slots=True)
class SacctSource(SlurmFile):
    """``sacct -P``: the jobs (``sacct/``)."""

    def read(self, run: SlurmRun, info: Content) -> StagedSacct:
        params = run.params
        params.progress.phase("parsing sacct records")
        ingest_id = run.next_ingest_id()
        assert isinstance(info, FileInfo)
        return StagedSacct(ingest_id=ingest_id, stage=_read_sacct(run, info, ingest_id))

    def stage(self, run: SlurmRun, staged: StagedSacct) -> None:
        if staged.stage.as_of_s is not None:
            run.as_of_candidates.append(staged.stage.as_of_s)
        if staged.stage.gpu_count_missing:
            run.warnings.append(
                "the sacct file has no AllocTRES column: GPU counts are unknown; "
                "add AllocTRES to --format"
            )

    def load(self, run: SlurmRun, info: Content, staged: StagedSacct) -> Loaded:
        progress = run.params.progress
        progress.phase("storing jobs")
        if staged.stage.loaded:
            sacct_load.finish_direct(run.con, staged.ingest_id)
        else:
            sacct_load.load_staged(run.con, staged.ingest_id)
        progress.phase("jobs stored, recording provenance")
        stage = staged.stage
        counts = RowCounts(
            read=stage.rows_read, rejected=stage.rows_rejected, skipped=stage.rows_skipped
        )
        return Loaded(ingest_id=staged.ingest_id, counts=counts)


def _read_sacct(run: SlurmRun, info: FileInfo, ingest_id: int) -> sacct_mod.SacctStage:
    """Straight into ``jobs`` when allowed and possible, else staged (see ingest/sacct/load.py)."""
    params = run.params
    if run.direct:
        stage = sacct_load.load_direct(
            params.con,
            info,
            ingest_id=ingest_id,
            fields=params.fields,
            tz=params.tz,
            default_cluster=run.default_cluster,
            progress=params.progress,
            max_nodes=run.max_nodes,
        )
        if stage is not None:
            return stage
    return sacct_mod.stage_sacct(
        params.con,
        info,
        ingest_id=ingest_id,
        fields=params.fields,
        tz=params.tz,
        lenient=params.lenient,
        default_cluster=run.default_cluster,
        progress=params.progress,
        max_nodes=run.max_nodes,
    )


@dataclass(frozen=True, kw_only=True, slots=True)
class ReservationsSource(SlurmFile):
    """``sacctmgr show reservation``: MAINT reservations are planned down time."""

    def read(self, run: SlurmRun, info: Content) -> reservations_mod.ReservationsStage:
        return reservations_mod.read_reservations(
            Path(info.path),
            tz=run.params.tz,
            lenient=run.params.lenient,
            default_cluster=run.default_cluster,
        )

    def stage(self, run: SlurmRun, staged: reservations_mod.ReservationsStage) -> None:
        """Says nothing of the whole ingest."""

    def load(
        self, run: SlurmRun, info: Content, staged: reservations_mod.ReservationsStage
    ) -> Loaded:
        ingest_id = run.next_ingest_id()
        store_rejects(run.con, ingest_id, Path(info.path), list(staged.problems))
        events_mod.replace_node_events(run.con, staged.node_events, ingest_id)
        counts = RowCounts(
            read=staged.rows_read, rejected=len(staged.problems), skipped=staged.rows_skipped
        )
        return Loaded(ingest_id=ingest_id, counts=counts)


@dataclass(frozen=True, kw_only=True, slots=True)
class JobsDetailSource(SlurmFile):
    """``scontrol -d -o show job``: the GPU indices running jobs hold (``jobs_detail.py``)."""

    def read(self, run: SlurmRun, info: Content) -> jobs_detail_mod.JobsDetailStage:
        return jobs_detail_mod.read_jobs_detail(
            Path(info.path),
            tz=run.params.tz,
            lenient=run.params.lenient,
            cluster=run.default_cluster,
        )

    def stage(self, run: SlurmRun, staged: jobs_detail_mod.JobsDetailStage) -> None:
        """Says nothing of the whole ingest."""

    def load(self, run: SlurmRun, info: Content, staged: jobs_detail_mod.JobsDetailStage) -> Loaded:
        ingest_id = run.next_ingest_id()
        jobs_detail_mod.load_jobs_detail(run.con, staged, ingest_id, Path(info.path))
        counts = RowCounts(
            read=staged.rows_read, rejected=len(staged.problems), skipped=staged.rows_skipped
        )
        return Loaded(ingest_id=ingest_id, counts=counts)


@dataclass(frozen=True, kw_only=True, slots=True)
class ManifestSource(SlurmFile):
    """The release manifest (TOML): which runs became which releases (``gpuyield.manifest``)."""

    def read(self, run: SlurmRun, info: Content) -> manifest_mod.Manifest:
        path = Path(info.path)
        manifest = manifest_mod.load_manifest(path, tz=run.params.tz)
        check_catalog_models(manifest, path)
        if run.params.strict_manifest:
            manifest_mod.check_runs_exist(manifest, run.con, path)
        elif missing := manifest_mod.missing_runs(manifest, run.con):
            run.warnings.append(
                f"{info.path}: runs not in the data (yet): {', '.join(missing)}; "
                "they count once jobs carry them (--strict-manifest makes this an error)"
            )
        return manifest

    def stage(self, run: SlurmRun, staged: manifest_mod.Manifest) -> None:
        """Says nothing of the whole ingest."""

    def load(self, run: SlurmRun, info: Content, staged: manifest_mod.Manifest) -> Loaded:
        ingest_id = run.next_ingest_id()
        manifest_mod.store_manifest(run.con, staged, ingest_id)
        counts = RowCounts(read=len(staged.releases) + len(staged.diverged))
        return Loaded(ingest_id=ingest_id, counts=counts)


EVENTS = EventsSource(
    name="events", kind=events_mod.SOURCE, dir_file="events.psv", client="sacctmgr"
)
NODES = NodesSource(name="nodes", kind=nodes_mod.SOURCE, dir_file="nodes.txt", client="scontrol")
SACCT = SacctSource(name="sacct", kind=sacct_mod.SOURCE, dir_file="sacct.psv", client="sacct")
RESERVATIONS = ReservationsSource(
    name="reservations",
    kind=reservations_mod.SOURCE,
    dir_file="reservations.psv",
    client="sacctmgr",
)
JOBS_DETAIL = JobsDetailSource(
    name="jobs_detail",
    kind=jobs_detail_mod.SOURCE,
    dir_file="jobs-detail.txt",
    client="scontrol",
)
MANIFEST = ManifestSource(
    name="manifest", kind=manifest_mod.SOURCE, dir_file="manifest.toml", client=None
)
