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
from typing import Any, Generic

import duckdb

from gpuyield import attribution, rungs, store
from gpuyield.errors import GpuyieldError, InputError
from gpuyield.ingest import consistency, runlog, running
from gpuyield.ingest import events as events_mod
from gpuyield.ingest import sacct as sacct_mod
from gpuyield.ingest._files import FileInfo, named_sources, plain_copies, scan_file
from gpuyield.ingest._paths import NO_SLURM_INPUT_HINT, check_input_file, long_line_error
from gpuyield.ingest._sql import check_timezone
from gpuyield.ingest.coverage import SINCE_FIELD, UNTIL_FIELD, coverage_notes
from gpuyield.ingest.sacct import checks as sacct_checks
from gpuyield.ingest.sacct import load as sacct_load
from gpuyield.ingest.slurm_sources import (
    EVENTS,
    JOBS_DETAIL,
    MANIFEST,
    NODES,
    RESERVATIONS,
    SACCT,
    SlurmParams,
    SlurmRun,
    SlurmSource,
)
from gpuyield.ingest.source import IngestOutcome, StagedT, atomically, ingest_input, register_loaded
from gpuyield.ingest.sources import SLURM_FILES
from gpuyield.progress import NoProgress, Progress
from gpuyield.times import check_window

# Names the simulator (and `capture` scripts) write into a directory for `--dir`.
DIR_FILES = {source.name: source.dir_file for source in SLURM_FILES}


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
    def of(
        files: Mapping[str, Path | None], telemetry: tuple[tuple[str, Path], ...] = ()
    ) -> SlurmInputs:
        """The inputs from files by ``SlurmFile.name`` (``gpuyield.ingest.sources``)."""
        unknown = set(files) - {s.name for s in SLURM_FILES}
        if unknown:
            raise ValueError(f"not Slurm ingest files: {sorted(unknown)}")
        return SlurmInputs(
            sacct=files.get("sacct"),
            events=files.get("events"),
            nodes=files.get("nodes"),
            manifest=files.get("manifest"),
            telemetry=telemetry,
            reservations=files.get("reservations"),
            jobs_detail=files.get("jobs_detail"),
        )

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
        return SlurmInputs.of(found, telemetry)

    def merged(self, other: SlurmInputs) -> SlurmInputs:
        """Explicit files win over ones found in a directory."""
        files = {s.name: getattr(self, s.name) or getattr(other, s.name) for s in SLURM_FILES}
        return SlurmInputs.of(files, self.telemetry or other.telemetry)

    def given(self) -> dict[str, Path]:
        """The files given, by ``SlurmFile.name``, in the order they are read."""
        return {s.name: Path(getattr(self, s.name)) for s in SLURM_FILES if getattr(self, s.name)}


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
    if not inputs.given() and not inputs.telemetry:
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
        scanned = _scan_all(inputs, progress)
        params = SlurmParams(
            con=con,
            scanned=scanned,
            telemetry=inputs.telemetry,
            options=json.dumps(
                {"tz": options["tz"], "fields": options["fields"], "until_s": options["until_s"]}
            ),
            progress=progress,
            renamed=renamed,
            **options,
        )

        def work(_: duckdb.DuckDBPyConnection, fast: bool) -> SlurmRun:
            # Strict mode loads sacct straight into the store; lenient mode stages it to keep
            # and count every rejected row, as does the redo after a record stopped the direct
            # load (the staged way names it).
            return _ingest_covered(params, direct=fast and not params.lenient, since_s=since_s)

        try:
            done = atomically(db, con, work, redo_on=sacct_load.DirectLoadFailed)
        except duckdb.InvalidInputException as error:
            raise long_line_error([i.path for i in scanned.values()], error) from None
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


def _plain_inputs(
    inputs: SlurmInputs, directory: Path, fields: list[str] | None
) -> tuple[SlurmInputs, dict[str, str]]:
    """Inputs with stdin and compressed files (and an sacct file written with another delimiter)
    replaced by plain copies in ``directory``, each copy mapped to what the user gave."""
    given = inputs.given()
    copies, renamed = plain_copies(given, directory)
    if "sacct" in given:
        sacct_mod.use_pipe_copy(copies, renamed, given["sacct"], directory, fields)
    return SlurmInputs.of({**given, **copies}, inputs.telemetry), renamed


def _ingest_covered(params: SlurmParams, *, direct: bool, since_s: int | None) -> SlurmRun:
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
    for kind, path in inputs.given().items():
        check_input_file(path, field=f"ingest.{kind}")
        progress.phase(f"reading {path.name}", total=path.stat().st_size)
        scanned[kind] = scan_file(path, progress=progress.advance)
    return scanned


def _ingest_scanned(params: SlurmParams, *, direct: bool) -> SlurmRun:
    """Read and stage events, nodes and sacct (they fix the capture time and cluster), then load
    every source in order: events, jobs, nodes, reservations, GPU indices, manifest, telemetry."""
    run = SlurmRun(params=params, direct=direct)
    events = _read(run, EVENTS)
    cluster = params.cluster or _single_cluster(
        params.con, None if events is None else events.staged
    )
    run.default_cluster = cluster or "default"
    # Read before sacct: the inventory bounds how many nodes one job's NodeList may name.
    nodes = _read(run, NODES)
    run.max_nodes = sacct_checks.node_cap(
        params.con, 0 if nodes is None else nodes.staged.nodes.num_rows
    )
    sacct = _read(run, SACCT)
    if params.until_s is not None:
        run.as_of = params.until_s
    elif run.as_of_candidates:
        run.as_of = max(run.as_of_candidates)
    if events is not None:
        _load(run, EVENTS, events)
    if sacct is not None:
        _load(run, SACCT, sacct)
    else:  # the latest sacct ingest's bytes again: carried forward if taken later (running.py)
        run.results[:] = running.carried(
            params.con, run.results, params.scanned, run.as_of, params.options
        )
    if nodes is not None:
        _load(run, NODES, nodes)
    _ingest_file(run, RESERVATIONS, run.as_of)
    _ingest_file(run, JOBS_DETAIL, run.as_of)
    running.apply_live_comments(params.con)
    _ingest_file(run, MANIFEST, None)
    consistency.check_store(
        params.con,
        new_job_ingests=() if sacct is None else (sacct.staged.ingest_id,),
        inventory_changed=nodes is not None,
    )
    _ingest_telemetry(run, params.telemetry)
    attribution.sync(params.con)  # stored samples find the runs stored or changed here
    return run


@dataclass(frozen=True, kw_only=True, slots=True)
class _Read(Generic[StagedT]):
    """A file read and staged, waiting for its load."""

    info: FileInfo
    staged: StagedT


def _read(run: SlurmRun, source: SlurmSource[StagedT]) -> _Read[StagedT] | None:
    """Read and stage ``source``'s file when given and new (its load waits for the others)."""
    info = run.fresh(source)
    if info is None:
        return None
    staged = source.read(run, info)
    source.stage(run, staged)
    return _Read(info=info, staged=staged)


def _load(run: SlurmRun, source: SlurmSource[StagedT], read: _Read[StagedT]) -> None:
    loaded = source.load(run, read.info, read.staged)
    run.results.append(register_loaded(run, source, read.info, loaded, run.as_of))


def _ingest_file(run: SlurmRun, source: SlurmSource[StagedT], as_of_s: int | None) -> None:
    """A file that needs nothing of the others read first: every step at once."""
    info = run.params.scanned.get(source.name)
    if info is not None:
        run.results.append(ingest_input(run, source, info, as_of_s=as_of_s))


def _ingest_telemetry(run: SlurmRun, telemetry: tuple[tuple[str, Path], ...]) -> None:
    for name, path in telemetry:
        run.params.progress.phase(f"reading telemetry of {name}")
        done = runlog.ingest_telemetry(run.con, name, path)
        run.results.append(done.outcome)
    # Inside the transaction: preflight never sees jobs without their ladder summary.
    run.params.progress.phase("updating the ladder summary")
    rungs.refresh_summary(run.con)


def _single_cluster(
    con: duckdb.DuckDBPyConnection, stage: events_mod.EventsStage | None
) -> str | None:
    """The cluster name, when the events (or the store) know exactly one."""
    names: set[str] = set()
    if stage is not None:
        names |= set(stage.cluster_events.column("cluster").to_pylist())
        names |= set(stage.node_events.column("cluster").to_pylist())
    if not names:
        names = {
            r[0] for r in con.execute("SELECT DISTINCT cluster FROM cluster_events").fetchall()
        }
    names.discard("default")
    return names.pop() if len(names) == 1 else None
