"""``gpuyield ingest slurm``: sacct, node events, inventory and manifest in one atomic, idempotent
ingest: one DuckDB transaction (an error or a killed process leaves the store as it was); a file
whose content (SHA-256) was ingested before from the same source is skipped, and rows replace
earlier rows with the same natural key, so overlapping captures do not double count.
"""

from __future__ import annotations

import dataclasses
import json
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb

from gpuyield import attribution, rungs, store
from gpuyield import manifest as manifest_mod
from gpuyield.errors import GpuyieldError, InputError
from gpuyield.ingest import consistency, runlog, running
from gpuyield.ingest import events as events_mod
from gpuyield.ingest import jobs_detail as jobs_detail_mod
from gpuyield.ingest import nodes as nodes_mod
from gpuyield.ingest import reservations as reservations_mod
from gpuyield.ingest import sacct as sacct_mod
from gpuyield.ingest._files import FileInfo, named_sources, plain_copies, scan_file
from gpuyield.ingest._paths import NO_SLURM_INPUT_HINT, check_input_file, long_line_error
from gpuyield.ingest._sql import check_timezone, replace_rows, store_rejects
from gpuyield.ingest.coverage import SINCE_FIELD, UNTIL_FIELD, coverage_notes
from gpuyield.ingest.gpu_models import check_catalog_models
from gpuyield.ingest.sacct import checks as sacct_checks
from gpuyield.ingest.sacct import load as sacct_load
from gpuyield.ingest.source import IngestOutcome, already_ingested, register
from gpuyield.progress import NoProgress, Progress
from gpuyield.times import check_window

# Names the simulator (and `capture` scripts) write into a directory for `--dir`.
DIR_FILES = {
    "sacct": "sacct.psv",
    "events": "events.psv",
    "nodes": "nodes.txt",
    "manifest": "manifest.toml",
    "reservations": "reservations.psv",
    "jobs_detail": "jobs-detail.txt",
}
# The single-file inputs, in the order they are read.
_FILE_KINDS = ("sacct", "events", "nodes", "manifest", "reservations", "jobs_detail")


#: The outcome of one file (the name this module used before every source shared the type).
FileResult = IngestOutcome


@dataclass(frozen=True, kw_only=True, slots=True)
class IngestSummary:
    """The result of one ``ingest_slurm`` call."""

    db: str
    """The store written."""
    files: tuple[IngestOutcome, ...]
    """One entry per input file."""
    as_of_s: int | None
    """Capture time used for running jobs and open events (``--until`` or latest time seen)."""
    warnings: tuple[str, ...] = field(default=())
    """Things the user should know (e.g. no GPU counts in the sacct format)."""

    def to_dict(self) -> dict[str, object]:
        """JSON-ready form."""
        return {
            "db": self.db,
            "as_of_s": self.as_of_s,
            "files": [dataclasses.asdict(f) for f in self.files],
            "warnings": list(self.warnings),
        }


@dataclass(frozen=True, kw_only=True, slots=True)
class SlurmInputs:
    """The files of one Slurm ingest."""

    sacct: Path | None = None
    """sacct -P output."""
    events: Path | None = None
    """sacctmgr show event output."""
    nodes: Path | None = None
    """scontrol/sinfo node inventory."""
    manifest: Path | None = None
    """Release manifest (TOML)."""
    telemetry: tuple[tuple[str, Path], ...] = ()
    """(run, file) pairs of run telemetry (a directory's ``telemetry/<run>.jsonl``)."""
    reservations: Path | None = None
    """sacctmgr/scontrol reservation listing (MAINT reservations are planned down time)."""
    jobs_detail: Path | None = None
    """``scontrol -d -o show job``: the GPU indices running jobs hold (ingest/jobs_detail.py)."""

    @staticmethod
    def from_dir(directory: Path) -> SlurmInputs:
        """The standard file names inside a directory (as the simulator writes them)."""
        if not directory.is_dir():
            raise InputError(f"{directory}: not a directory")
        found = {
            k: directory / name for k, name in DIR_FILES.items() if (directory / name).exists()
        }
        if "sacct" not in found:
            raise InputError(
                f"{directory}: no {DIR_FILES['sacct']} in it",
                hint="expected files: " + ", ".join(DIR_FILES.values()),
            )
        telemetry = tuple((p.stem, p) for p in sorted((directory / "telemetry").glob("*.jsonl")))
        return SlurmInputs(**found, telemetry=telemetry)

    def merged(self, other: SlurmInputs) -> SlurmInputs:
        """Explicit files win over ones found in a directory."""
        return SlurmInputs(
            sacct=self.sacct or other.sacct,
            events=self.events or other.events,
            nodes=self.nodes or other.nodes,
            manifest=self.manifest or other.manifest,
            telemetry=self.telemetry or other.telemetry,
            reservations=self.reservations or other.reservations,
            jobs_detail=self.jobs_detail or other.jobs_detail,
        )


def ingest_slurm(
    db: str | Path | None,
    inputs: SlurmInputs,
    *,
    until_s: int | None = None,
    since_s: int | None = None,
    tz: str = "UTC",
    lenient: bool = False,
    fields: list[str] | None = None,
    cluster: str | None = None,
    strict_manifest: bool = False,
    progress: Progress | None = None,
    con: duckdb.DuckDBPyConnection | None = None,
    now_s: int | None = None,
    sources: Mapping[str, str] | None = None,
) -> IngestSummary:
    """Ingest Slurm files into the store at ``db`` (or into ``con``), all or nothing.

    ``since_s``/``until_s`` are the capture's window (sacct's ``-S``/``-E``): the store records
    that its accounting covers it (without ``since_s``: from the earliest job start). A file may
    be ``-`` (stdin) or ``.gz``/``.zst``. A first ingest that fails leaves no database file.

    A window ending after ``now_s`` (default: the clock) is refused. ``sources``: names for input
    paths in the provenance (a collection's temporary files), set in the ingest's transaction.
    """
    tz = check_timezone(tz)
    check_window(since_s, until_s, since_field=SINCE_FIELD, until_field=UNTIL_FIELD, now_s=now_s)
    if not any(getattr(inputs, kind) for kind in _FILE_KINDS) and not inputs.telemetry:
        raise InputError("nothing to ingest", hint=NO_SLURM_INPUT_HINT)
    fresh = con is None and db is not None and store.is_new(db)
    try:
        with tempfile.TemporaryDirectory(prefix="gpuyield-input-") as tmp:
            plain, renamed = _plain_inputs(inputs, Path(tmp), fields)
            renamed = named_sources(renamed, sources or {})
            try:
                return _ingest_plain(
                    db,
                    plain,
                    con=con,
                    until_s=until_s,
                    since_s=since_s,
                    tz=tz,
                    lenient=lenient,
                    fields=fields,
                    cluster=cluster,
                    strict_manifest=strict_manifest,
                    renamed=renamed,
                    progress=progress or NoProgress(),
                )
            except GpuyieldError as error:
                for copy, original in renamed.items():  # name the file the user gave
                    error.message = error.message.replace(copy, original)
                raise
    except BaseException:
        if fresh:
            store.remove(Path(str(db)))
        raise


def _ingest_plain(
    db: str | Path | None,
    inputs: SlurmInputs,
    *,
    con: duckdb.DuckDBPyConnection | None,
    since_s: int | None,
    renamed: dict[str, str],
    progress: Progress,
    **options: Any,
) -> IngestSummary:
    own = con is None
    con = con if con is not None else store.connect(db)
    try:
        params = _Params(
            con=con,
            scanned=_scan_all(inputs, progress),
            inputs=inputs,
            options=json.dumps(
                {"tz": options["tz"], "fields": options["fields"], "until_s": options["until_s"]}
            ),
            progress=progress,
            renamed=renamed,
            **options,
        )
        try:
            done = _run_atomically(params, since_s=since_s)
        except duckdb.InvalidInputException as error:
            raise long_line_error([i.path for i in params.scanned.values()], error) from None
        results = tuple(
            dataclasses.replace(r, path=renamed.get(r.path, r.path)) for r in done.results
        )
        for copy, original in renamed.items():
            done.warnings = [w.replace(copy, original) for w in done.warnings]
        return IngestSummary(
            db=str(db), files=results, as_of_s=done.as_of, warnings=tuple(done.warnings)
        )
    finally:
        if own:
            con.close()


def _run_atomically(params: _Params, *, since_s: int | None) -> _Attempt:
    try:
        with store.transaction(params.con):
            # Strict mode loads sacct straight into the store; lenient mode stages it to keep
            # and count every rejected row.
            return _ingest_covered(params, direct=not params.lenient, since_s=since_s)
    except sacct_load.DirectLoadFailed:
        with store.transaction(params.con):
            # names the record that stopped the direct load
            return _ingest_covered(params, direct=False, since_s=since_s)


def _plain_inputs(
    inputs: SlurmInputs, directory: Path, fields: list[str] | None
) -> tuple[SlurmInputs, dict[str, str]]:
    """Inputs with stdin and compressed files (and an sacct file written with another delimiter)
    replaced by plain copies in ``directory``, each copy mapped to what the user gave."""
    given = {kind: Path(getattr(inputs, kind)) for kind in _FILE_KINDS if getattr(inputs, kind)}
    copies, renamed = plain_copies(given, directory)
    if "sacct" in given:
        sacct_mod.use_pipe_copy(copies, renamed, given["sacct"], directory, fields)
    changes: dict[str, Any] = dict(copies)
    return dataclasses.replace(inputs, **changes), renamed


def _ingest_covered(params: _Params, *, direct: bool, since_s: int | None) -> _Attempt:
    """The ingest, then (same transaction) its coverage and the paths the user gave."""
    attempt = _ingest_scanned(params, direct=direct)
    sacct = str(params.scanned["sacct"].path) if "sacct" in params.scanned else ""
    attempt.warnings += coverage_notes(
        params.con,
        tuple(attempt.results),
        since_s=since_s,
        until_s=params.until_s,
        as_of_s=attempt.as_of,
        cluster=params.cluster,
        path=params.renamed.get(sacct, sacct),
    )
    for copy, original in params.renamed.items():
        params.con.execute("UPDATE ingests SET path = ? WHERE path = ?", [original, copy])
        params.con.execute("UPDATE rejects SET path = ? WHERE path = ?", [original, copy])
    return attempt


def _scan_all(inputs: SlurmInputs, progress: Progress) -> dict[str, FileInfo]:
    scanned: dict[str, FileInfo] = {}
    for kind in _FILE_KINDS:
        path = getattr(inputs, kind)
        if path is None:
            continue
        path = Path(path)
        check_input_file(path, field=f"ingest.{kind}")
        progress.phase(f"reading {path.name}", total=path.stat().st_size)
        scanned[kind] = scan_file(path, progress=progress.advance)
    return scanned


@dataclass(frozen=True, kw_only=True, slots=True)
class _Params:
    """Everything one ingest attempt reads (it may run twice: direct, then staged)."""

    con: duckdb.DuckDBPyConnection
    scanned: dict[str, FileInfo]
    inputs: SlurmInputs
    options: str
    until_s: int | None
    tz: str
    lenient: bool
    fields: list[str] | None
    cluster: str | None
    progress: Progress
    strict_manifest: bool = False
    #: Plain copies of stdin/compressed inputs -> the path the user gave.
    renamed: dict[str, str] = field(default_factory=dict)


@dataclass(kw_only=True, slots=True)
class _Attempt:
    """What one attempt has done so far (mutable; rolled back with its transaction on failure)."""

    params: _Params
    direct: bool
    results: list[IngestOutcome] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    as_of_candidates: list[int] = field(default_factory=list)
    as_of: int | None = None
    default_cluster: str = "default"

    def fresh(self, kind: str, source: str) -> FileInfo | None:
        """The file of ``kind`` when given and new to the store (a seen one is a skipped outcome)."""
        info = self.params.scanned.get(kind)
        if info is None:
            return None
        seen = already_ingested(self.params.con, source, info, self.params.options)
        if seen is not None:
            self.results.append(seen)
            return None
        return info

    def register(
        self, source: str, info: FileInfo, ingest_id: int, as_of: int | None, **counts: int
    ) -> None:
        con, options = self.params.con, self.params.options
        self.results.append(register(con, source, info, ingest_id, as_of, options, **counts))


@dataclass(frozen=True, kw_only=True, slots=True)
class _StagedSacct:
    info: FileInfo
    ingest_id: int
    stage: sacct_mod.SacctStage


def _ingest_scanned(params: _Params, *, direct: bool) -> _Attempt:
    """Read and stage events and sacct (they fix the capture time and cluster), then load every
    source in order: events, jobs, nodes, reservations, manifest, telemetry."""
    attempt = _Attempt(params=params, direct=direct)
    events_stage = _read_events(attempt)
    cluster = params.cluster or _single_cluster(params.con, events_stage)
    attempt.default_cluster = cluster or "default"
    # Read before sacct: the inventory bounds how many nodes one job's NodeList may name.
    nodes = _read_nodes(attempt)
    max_nodes = sacct_checks.node_cap(params.con, 0 if nodes is None else nodes[1].nodes.num_rows)
    staged = _read_sacct_file(attempt, max_nodes=max_nodes)
    if params.until_s is not None:
        attempt.as_of = params.until_s
    elif attempt.as_of_candidates:
        attempt.as_of = max(attempt.as_of_candidates)
    if events_stage is not None:
        ingest_id = store.next_ingest_id(params.con)
        events_mod.load_events(params.con, events_stage, ingest_id, params.scanned["events"].path)
        attempt.register(
            events_mod.SOURCE,
            params.scanned["events"],
            ingest_id,
            attempt.as_of,
            read=events_stage.rows_read,
            rejected=events_stage.rows_rejected,
        )
    if staged is not None:
        _load_sacct(attempt, staged)
    else:  # the latest sacct ingest's bytes again: carried forward if taken later (running.py)
        con, scanned, options = params.con, params.scanned, params.options
        attempt.results[:] = running.carried(con, attempt.results, scanned, attempt.as_of, options)
    if nodes is not None:
        _load_nodes_file(attempt, *nodes)
    _ingest_reservations(attempt)
    _ingest_jobs_detail(attempt)
    running.apply_live_comments(params.con)
    _ingest_manifest(attempt)
    consistency.check_store(
        params.con,
        new_job_ingests=() if staged is None else (staged.ingest_id,),
        inventory_changed=nodes is not None,
    )
    _ingest_telemetry(attempt)
    attribution.sync(params.con)  # stored samples find the runs stored or changed here
    return attempt


def _read_events(attempt: _Attempt) -> events_mod.EventsStage | None:
    info = attempt.fresh("events", events_mod.SOURCE)
    if info is None:
        return None
    params = attempt.params
    params.progress.phase("parsing node events")
    stage = events_mod.read_events(
        info.path,
        tz=params.tz,
        lenient=params.lenient,
        default_cluster=params.cluster or "default",
        info=info,
    )
    if stage.as_of_s is not None:
        attempt.as_of_candidates.append(stage.as_of_s)
    return stage


def _read_sacct_file(attempt: _Attempt, *, max_nodes: int) -> _StagedSacct | None:
    info = attempt.fresh("sacct", sacct_mod.SOURCE)
    if info is None:
        return None
    params = attempt.params
    params.progress.phase("parsing sacct records")
    ingest_id = store.next_ingest_id(params.con)
    stage = _read_sacct(
        params.con,
        info,
        params.progress,
        direct=attempt.direct,
        lenient=params.lenient,
        ingest_id=ingest_id,
        fields=params.fields,
        tz=params.tz,
        default_cluster=attempt.default_cluster,
        max_nodes=max_nodes,
    )
    if stage.as_of_s is not None:
        attempt.as_of_candidates.append(stage.as_of_s)
    if stage.gpu_count_missing:
        attempt.warnings.append(
            "the sacct file has no AllocTRES column: GPU counts are unknown; "
            "add AllocTRES to --format"
        )
    return _StagedSacct(info=info, ingest_id=ingest_id, stage=stage)


def _load_sacct(attempt: _Attempt, staged: _StagedSacct) -> None:
    con, progress = attempt.params.con, attempt.params.progress
    progress.phase("storing jobs")
    if staged.stage.loaded:
        sacct_load.finish_direct(con, staged.ingest_id)
    else:
        sacct_load.load_staged(con, staged.ingest_id)
    progress.phase("jobs stored, recording provenance")
    attempt.register(
        sacct_mod.SOURCE,
        staged.info,
        staged.ingest_id,
        attempt.as_of,
        read=staged.stage.rows_read,
        rejected=staged.stage.rows_rejected,
        skipped=staged.stage.rows_skipped,
    )


def _read_nodes(attempt: _Attempt) -> tuple[FileInfo, nodes_mod.NodesStage] | None:
    info = attempt.fresh("nodes", nodes_mod.SOURCE)
    if info is None:
        return None
    stage = nodes_mod.read_nodes(
        info.path, lenient=attempt.params.lenient, cluster=attempt.default_cluster
    )
    return info, stage


def _load_nodes_file(attempt: _Attempt, info: FileInfo, stage: nodes_mod.NodesStage) -> None:
    con = attempt.params.con
    ingest_id = store.next_ingest_id(con)
    _load_nodes(con, stage, ingest_id, info.path)
    attempt.register(
        nodes_mod.SOURCE,
        info,
        ingest_id,
        attempt.as_of,
        read=stage.rows_read,
        rejected=len(stage.problems),
    )


def _ingest_manifest(attempt: _Attempt) -> None:
    info = attempt.fresh("manifest", manifest_mod.SOURCE)
    if info is None:
        return
    con = attempt.params.con
    manifest = manifest_mod.load_manifest(info.path, tz=attempt.params.tz)
    check_catalog_models(manifest, info.path)
    if attempt.params.strict_manifest:
        manifest_mod.check_runs_exist(manifest, con, info.path)
    elif missing := manifest_mod.missing_runs(manifest, con):
        attempt.warnings.append(
            f"{info.path}: runs not in the data (yet): {', '.join(missing)}; "
            "they count once jobs carry them (--strict-manifest makes this an error)"
        )
    ingest_id = store.next_ingest_id(con)
    manifest_mod.store_manifest(con, manifest, ingest_id)
    attempt.register(
        manifest_mod.SOURCE,
        info,
        ingest_id,
        None,
        read=len(manifest.releases) + len(manifest.diverged),
    )


def _ingest_telemetry(attempt: _Attempt) -> None:
    for run, path in attempt.params.inputs.telemetry:
        attempt.params.progress.phase(f"reading telemetry of {run}")
        done = runlog.ingest_telemetry(attempt.params.con, run, path)
        attempt.results.append(done.outcome)
    # Inside the transaction: preflight never sees jobs without their ladder summary.
    attempt.params.progress.phase("updating the ladder summary")
    rungs.refresh_summary(attempt.params.con)


def _read_sacct(
    con: duckdb.DuckDBPyConnection,
    info: FileInfo,
    progress: Progress,
    *,
    direct: bool,
    lenient: bool,
    ingest_id: int,
    fields: list[str] | None,
    tz: str,
    default_cluster: str,
    max_nodes: int,
) -> sacct_mod.SacctStage:
    """Straight into ``jobs`` when allowed and possible, else staged (see ingest/sacct/load.py)."""
    if direct:
        stage = sacct_load.load_direct(
            con,
            info,
            ingest_id=ingest_id,
            fields=fields,
            tz=tz,
            default_cluster=default_cluster,
            progress=progress,
            max_nodes=max_nodes,
        )
        if stage is not None:
            return stage
    return sacct_mod.stage_sacct(
        con,
        info,
        ingest_id=ingest_id,
        fields=fields,
        tz=tz,
        lenient=lenient,
        default_cluster=default_cluster,
        progress=progress,
        max_nodes=max_nodes,
    )


def _single_cluster(con: duckdb.DuckDBPyConnection, stage: object) -> str | None:
    """The cluster name, when the events (or the store) know exactly one."""
    names: set[str] = set()
    if isinstance(stage, events_mod.EventsStage):
        names |= set(stage.cluster_events.column("cluster").to_pylist())
        names |= set(stage.node_events.column("cluster").to_pylist())
    if not names:
        names = {
            r[0] for r in con.execute("SELECT DISTINCT cluster FROM cluster_events").fetchall()
        }
    names.discard("default")
    return names.pop() if len(names) == 1 else None


def _ingest_reservations(attempt: _Attempt) -> None:
    info = attempt.fresh("reservations", reservations_mod.SOURCE)
    if info is None:
        return
    params = attempt.params
    stage = reservations_mod.read_reservations(
        info.path, tz=params.tz, lenient=params.lenient, default_cluster=attempt.default_cluster
    )
    ingest_id = store.next_ingest_id(params.con)
    store_rejects(params.con, ingest_id, info.path, list(stage.problems))
    events_mod.replace_node_events(params.con, stage.node_events, ingest_id)
    attempt.register(
        reservations_mod.SOURCE,
        info,
        ingest_id,
        attempt.as_of,
        read=stage.rows_read,
        rejected=len(stage.problems),
        skipped=stage.rows_skipped,
    )


def _load_nodes(
    con: duckdb.DuckDBPyConnection, stage: nodes_mod.NodesStage, ingest_id: int, path: Path
) -> None:
    store_rejects(con, ingest_id, path, list(stage.problems))
    replace_rows(
        con,
        "nodes",
        stage.nodes,
        key=("cluster", "node"),
        columns=("cluster", "node", "num_gpus", "gpu_type", "partitions", "features"),
        ingest_id=ingest_id,
    )


def _ingest_jobs_detail(attempt: _Attempt) -> None:
    info = attempt.fresh("jobs_detail", jobs_detail_mod.SOURCE)
    if info is None:
        return
    params = attempt.params
    stage = jobs_detail_mod.read_jobs_detail(
        info.path, tz=params.tz, lenient=params.lenient, cluster=attempt.default_cluster
    )
    ingest_id = store.next_ingest_id(params.con)
    jobs_detail_mod.load_jobs_detail(params.con, stage, ingest_id, info.path)
    attempt.register(
        jobs_detail_mod.SOURCE,
        info,
        ingest_id,
        attempt.as_of,
        read=stage.rows_read,
        rejected=len(stage.problems),
        skipped=stage.rows_skipped,
    )
