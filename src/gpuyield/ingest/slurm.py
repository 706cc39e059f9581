"""``gpuyield ingest slurm``: sacct, node events, inventory and manifest as one atomic, idempotent ingest.

Atomic: everything runs in one DuckDB transaction; an error (or a killed process) leaves the store as
it was. Idempotent: a file whose content (SHA-256) was ingested before from the same source is skipped,
and rows replace earlier rows with the same natural key, so overlapping captures do not double count.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

import duckdb

from gpuyield import manifest as manifest_mod
from gpuyield import store
from gpuyield.errors import InputError
from gpuyield.ingest import consistency, runlog, sacct_checks, sacct_load
from gpuyield.ingest import events as events_mod
from gpuyield.ingest import nodes as nodes_mod
from gpuyield.ingest import reservations as reservations_mod
from gpuyield.ingest import sacct as sacct_mod
from gpuyield.ingest._files import FileInfo, scan_file
from gpuyield.ingest._paths import check_input_file, long_line_error
from gpuyield.ingest._sql import check_timezone, replace_rows, store_rejects
from gpuyield.progress import NoProgress, Progress

# Names the simulator (and `capture` scripts) write into a directory for `--dir`.
DIR_FILES = {
    "sacct": "sacct.psv",
    "events": "events.psv",
    "nodes": "nodes.txt",
    "manifest": "manifest.toml",
    "reservations": "reservations.psv",
}


@dataclass(frozen=True, kw_only=True, slots=True)
class FileResult:
    """What happened to one input file."""

    source: str
    """Source kind: slurm.sacct, slurm.events, slurm.nodes, manifest."""
    path: str
    """The file."""
    sha256: str
    """Content hash."""
    ingest_id: int
    """Provenance id (an earlier one when the file was skipped as already ingested)."""
    skipped: bool
    """True when the same content had been ingested before: nothing changed."""
    rows_read: int = 0
    """Records read."""
    rows_rejected: int = 0
    """Records rejected (lenient mode)."""
    rows_skipped: int = 0
    """Records deliberately not loaded (sacct step rows, duplicates)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class IngestSummary:
    """The result of one ``ingest_slurm`` call."""

    db: str
    """The store written."""
    files: tuple[FileResult, ...]
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
        )


def ingest_slurm(
    db: str | Path | None,
    inputs: SlurmInputs,
    *,
    until_s: int | None = None,
    tz: str = "UTC",
    lenient: bool = False,
    fields: list[str] | None = None,
    cluster: str | None = None,
    progress: Progress | None = None,
    con: duckdb.DuckDBPyConnection | None = None,
) -> IngestSummary:
    """Ingest Slurm files into the store at ``db`` (or into ``con``), all or nothing."""
    tz = check_timezone(tz)
    progress = progress or NoProgress()
    given = (inputs.sacct, inputs.events, inputs.nodes, inputs.manifest, inputs.reservations)
    if not any(given) and not inputs.telemetry:
        raise InputError("nothing to ingest", hint="give --sacct, --events, --nodes or --dir")
    own = con is None
    con = con if con is not None else store.connect(db)
    try:
        scanned = _scan_all(inputs, progress)
        options = json.dumps({"tz": tz, "fields": fields, "until_s": until_s})
        run = partial(
            _ingest_scanned,
            con,
            scanned,
            inputs,
            options,
            until_s=until_s,
            tz=tz,
            lenient=lenient,
            fields=fields,
            cluster=cluster,
            progress=progress,
        )
        try:
            summary = _run_atomically(con, run, lenient=lenient)
        except duckdb.InvalidInputException as error:
            raise long_line_error([i.path for i in scanned.values()], error) from None
        return IngestSummary(db=str(db), files=summary[0], as_of_s=summary[1], warnings=summary[2])
    finally:
        if own:
            con.close()


def _run_atomically(
    con: duckdb.DuckDBPyConnection,
    run: partial[tuple[tuple[FileResult, ...], int | None, tuple[str, ...]]],
    *,
    lenient: bool,
) -> tuple[tuple[FileResult, ...], int | None, tuple[str, ...]]:
    try:
        with store.transaction(con):
            # Strict mode loads sacct straight into the store; lenient mode stages it to keep
            # and count every rejected row.
            return run(direct=not lenient)
    except sacct_load.DirectLoadFailed:
        with store.transaction(con):
            return run(direct=False)  # names the record that stopped the direct load


def _scan_all(inputs: SlurmInputs, progress: Progress) -> dict[str, FileInfo]:
    scanned: dict[str, FileInfo] = {}
    for kind in ("sacct", "events", "nodes", "manifest", "reservations"):
        path = getattr(inputs, kind)
        if path is None:
            continue
        path = Path(path)
        check_input_file(path, flag=kind)
        progress.phase(f"reading {path.name}", total=path.stat().st_size)
        scanned[kind] = scan_file(path, progress=progress.advance)
    return scanned


def _ingest_scanned(
    con: duckdb.DuckDBPyConnection,
    scanned: dict[str, FileInfo],
    inputs: SlurmInputs,
    options: str,
    *,
    until_s: int | None,
    tz: str,
    lenient: bool,
    fields: list[str] | None,
    cluster: str | None,
    progress: Progress,
    direct: bool,
) -> tuple[tuple[FileResult, ...], int | None, tuple[str, ...]]:
    results: list[FileResult] = []
    warnings: list[str] = []
    as_of_candidates: list[int] = []
    staged: list[tuple[str, FileInfo, int, sacct_mod.SacctStage]] = []
    events_stage = None
    if "events" in scanned and not _already(
        con, events_mod.SOURCE, scanned["events"], results, options
    ):
        progress.phase("parsing node events")
        events_stage = events_mod.read_events(
            scanned["events"].path,
            tz=tz,
            lenient=lenient,
            default_cluster=cluster or "default",
            info=scanned["events"],
        )
        if events_stage.as_of_s is not None:
            as_of_candidates.append(events_stage.as_of_s)
    default_cluster = cluster or _single_cluster(con, events_stage) or "default"
    nodes_stage = None
    # Read before sacct: the inventory bounds how many nodes one job's NodeList may name.
    if "nodes" in scanned and not _already(
        con, nodes_mod.SOURCE, scanned["nodes"], results, options
    ):
        nodes_stage = nodes_mod.read_nodes(
            scanned["nodes"].path, lenient=lenient, cluster=default_cluster
        )
    max_nodes = sacct_checks.node_cap(con, 0 if nodes_stage is None else nodes_stage.nodes.num_rows)
    if "sacct" in scanned and not _already(
        con, sacct_mod.SOURCE, scanned["sacct"], results, options
    ):
        progress.phase("parsing sacct records")
        ingest_id = store.next_ingest_id(con)
        stage = _read_sacct(
            con,
            scanned["sacct"],
            progress,
            direct=direct,
            lenient=lenient,
            ingest_id=ingest_id,
            fields=fields,
            tz=tz,
            default_cluster=default_cluster,
            max_nodes=max_nodes,
        )
        if stage.as_of_s is not None:
            as_of_candidates.append(stage.as_of_s)
        if stage.gpu_count_missing:
            warnings.append(
                "the sacct file has no AllocTRES column: GPU counts are unknown; "
                "add AllocTRES to --format"
            )
        staged.append(("sacct", scanned["sacct"], ingest_id, stage))
    as_of = (
        until_s if until_s is not None else (max(as_of_candidates) if as_of_candidates else None)
    )
    if events_stage is not None:
        ingest_id = store.next_ingest_id(con)
        events_mod.load_events(con, events_stage, ingest_id, scanned["events"].path)
        _record(
            con,
            results,
            events_mod.SOURCE,
            scanned["events"],
            ingest_id,
            as_of,
            options,
            read=events_stage.rows_read,
            rejected=events_stage.rows_rejected,
        )
    for _, info, ingest_id, stage in staged:
        progress.phase("storing jobs")
        if stage.loaded:
            sacct_load.finish_direct(con, ingest_id)
        else:
            sacct_load.load_staged(con, ingest_id)
        progress.phase("jobs stored, recording provenance")
        _record(
            con,
            results,
            sacct_mod.SOURCE,
            info,
            ingest_id,
            as_of,
            options,
            read=stage.rows_read,
            rejected=stage.rows_rejected,
            skipped=stage.rows_skipped,
        )
    if nodes_stage is not None:
        ingest_id = store.next_ingest_id(con)
        _load_nodes(con, nodes_stage, ingest_id, scanned["nodes"].path)
        _record(
            con,
            results,
            nodes_mod.SOURCE,
            scanned["nodes"],
            ingest_id,
            as_of,
            options,
            read=nodes_stage.rows_read,
            rejected=len(nodes_stage.problems),
        )
    if "reservations" in scanned and not _already(
        con, reservations_mod.SOURCE, scanned["reservations"], results, options
    ):
        _ingest_reservations(
            con, scanned["reservations"], results, as_of, options, tz=tz, lenient=lenient,
            default_cluster=default_cluster,
        )  # fmt: skip
    if "manifest" in scanned and not _already(
        con, manifest_mod.SOURCE, scanned["manifest"], results, options
    ):
        manifest = manifest_mod.load_manifest(scanned["manifest"].path, tz=tz)
        manifest_mod.check_runs_exist(manifest, con, scanned["manifest"].path)
        ingest_id = store.next_ingest_id(con)
        manifest_mod.store_manifest(con, manifest, ingest_id)
        _record(
            con,
            results,
            manifest_mod.SOURCE,
            scanned["manifest"],
            ingest_id,
            None,
            options,
            read=len(manifest.releases) + len(manifest.diverged),
        )
    consistency.check_store(
        con,
        new_job_ingests=tuple(i for _, _, i, _ in staged),
        inventory_changed=nodes_stage is not None,
    )
    for run, path in inputs.telemetry:
        progress.phase(f"reading telemetry of {run}")
        done = runlog.ingest_telemetry(con, run, path)
        results.append(
            FileResult(
                source=runlog.SOURCE,
                path=str(path),
                sha256=done.sha256,
                ingest_id=done.ingest_id,
                skipped=done.skipped,
                rows_read=done.records,
                rows_skipped=done.torn_lines,
            )
        )
    return tuple(results), as_of, tuple(warnings)


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
    """Straight into ``jobs`` when allowed and possible, else staged (see ingest/sacct_load.py)."""
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


def _already(
    con: duckdb.DuckDBPyConnection,
    source: str,
    info: FileInfo,
    results: list[FileResult],
    options: str,
) -> bool:
    """Skip a file whose content is the latest ingest of its kind; different options for it are
    an error."""
    row = _latest_ingest(con, source, info.sha256)
    if row is None:
        return False
    if source != manifest_mod.SOURCE and json.loads(row[1]) != json.loads(options):
        raise InputError(
            f"{info.path} was ingested before (ingest #{row[0]}) with other options {row[1]}",
            hint="re-ingest with the same --tz/--fields/--until, or use a new --db",
        )
    results.append(
        FileResult(
            source=source,
            path=str(info.path),
            sha256=info.sha256,
            ingest_id=int(row[0]),
            skipped=True,
        )
    )
    return True


def _latest_ingest(
    con: duckdb.DuckDBPyConnection, source: str, sha256: str
) -> tuple[int, str] | None:
    """(ingest id, options) of the latest ingest of ``source`` when it had this content, else None.

    Only the latest one makes a file a no-op: manifest A, then B, then A again must put A back in
    effect (the latest ingest of a kind wins, whatever its hash), which skipping A as "seen
    before" would not.
    """
    rows = con.execute(
        "SELECT ingest_id, options, sha256 FROM ingests WHERE source = ? "
        "ORDER BY ingest_id DESC LIMIT 1",
        [source],
    ).fetchall()
    if not rows or rows[0][2] != sha256:
        return None
    return int(rows[0][0]), str(rows[0][1])


def _record(
    con: duckdb.DuckDBPyConnection,
    results: list[FileResult],
    source: str,
    info: FileInfo,
    ingest_id: int,
    as_of: int | None,
    options: str,
    *,
    read: int,
    rejected: int = 0,
    skipped: int = 0,
) -> None:
    con.execute(
        "INSERT INTO ingests VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, current_timestamp)",
        [
            ingest_id,
            source,
            str(info.path),
            info.sha256,
            info.size_bytes,
            read,
            rejected,
            skipped,
            as_of,
            options,
        ],
    )
    results.append(
        FileResult(
            source=source,
            path=str(info.path),
            sha256=info.sha256,
            ingest_id=ingest_id,
            skipped=False,
            rows_read=read,
            rows_rejected=rejected,
            rows_skipped=skipped,
        )
    )


def _ingest_reservations(
    con: duckdb.DuckDBPyConnection,
    info: FileInfo,
    results: list[FileResult],
    as_of: int | None,
    options: str,
    *,
    tz: str,
    lenient: bool,
    default_cluster: str,
) -> None:
    stage = reservations_mod.read_reservations(
        info.path, tz=tz, lenient=lenient, default_cluster=default_cluster
    )
    ingest_id = store.next_ingest_id(con)
    store_rejects(con, ingest_id, info.path, list(stage.problems))
    events_mod.replace_node_events(con, stage.node_events, ingest_id)
    _record(
        con, results, reservations_mod.SOURCE, info, ingest_id, as_of, options,
        read=stage.rows_read, rejected=len(stage.problems), skipped=stage.rows_skipped,
    )  # fmt: skip


def _load_nodes(
    con: duckdb.DuckDBPyConnection, stage: nodes_mod.NodesStage, ingest_id: int, path: Path
) -> None:
    store_rejects(con, ingest_id, path, list(stage.problems))
    replace_rows(
        con,
        "nodes",
        stage.nodes,
        key=("cluster", "node"),
        columns=("cluster", "node", "num_gpus", "gpu_type", "partitions"),
        ingest_id=ingest_id,
    )
