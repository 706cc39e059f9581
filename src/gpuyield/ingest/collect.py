"""``gpuyield collect``: run Slurm's own commands for the period since the last collection, ingest
their output in one transaction, and record the period as covered.

Each collection queries ``[watermark - overlap, now)``, where the watermark is the end of the
cluster's coverage in the store: the overlap re-reads jobs that were running at the last collection,
whose rows (same key: cluster, JobIDRaw, Submit) are then replaced by their finished state, never
added twice. Commands run with ``TZ=UTC`` and without ``SLURM_TIME_FORMAT``, so their times are read
the same way whatever the site's shell sets; their output goes to files under a byte budget
(``slurm_client.py``). A command that fails stops the collection before the store is opened for
writing: the store is unchanged. Inside ``gpuyield serve`` the store's write lock is taken only
for that write, not while Slurm's commands run (``store_lock``).
"""

from __future__ import annotations

import dataclasses
import tempfile
import time
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import duckdb

from gpuyield import store
from gpuyield.errors import FieldError
from gpuyield.ingest import collect_raw, collect_window
from gpuyield.ingest import sacct as sacct_mod
from gpuyield.ingest.collect_commands import (
    COMMAND_TIMEOUT_S,
    CollectError,
    SlurmCommand,
    check_run,
    find_client,
    slurm_commands,
)
from gpuyield.ingest.slurm import IngestSummary, SlurmInputs, ingest_slurm
from gpuyield.ingest.slurm_client import client_environment, run_client
from gpuyield.ingest.sources import SLURM_FILES, slurm_clients
from gpuyield.progress import NoProgress, Progress
from gpuyield.times import iso_utc

DEFAULT_OVERLAP_S = 3600
#: Most bytes one command may print (``--max-output``): far above an hour of a large cluster's
#: sacct (about 300 bytes a job), low enough to stop a runaway before it fills the disk.
DEFAULT_MAX_OUTPUT_BYTES = 4 << 30
#: How far past the local clock ``--until`` may reach: clock skew between hosts, not the future.
CLOCK_SKEW_S = 300


class StoreLock(Protocol):
    """Readers-writer lock over the store inside one process (``gpuyield serve``'s)."""

    def reading(self) -> AbstractContextManager[None]: ...
    def writing(self) -> AbstractContextManager[None]: ...


class _NoLock:
    def reading(self) -> AbstractContextManager[None]:
        return nullcontext()

    def writing(self) -> AbstractContextManager[None]:
        return nullcontext()


@dataclass(frozen=True, kw_only=True, slots=True)
class CollectOutcome:
    """What one collection did."""

    db: str
    """The store written."""
    cluster: str
    """The cluster collected."""
    since_s: int
    """Start of the query window (epoch seconds, UTC): the watermark minus the overlap."""
    until_s: int
    """End of the query window: the capture time."""
    jobs_new: int
    """Job runs not in the store before."""
    jobs_updated: int
    """Job runs already stored whose state or end changed (e.g. running, now finished)."""
    jobs_unchanged: int
    """Job runs read again in the overlap, unchanged."""
    node_events: int
    """Node and cluster events read (0 when the event list was unchanged)."""
    covered_since_s: int
    """Start of the cluster's contiguous coverage that holds ``until_s``."""
    covered_until_s: int
    """Its end: ``until_s`` after a collection; later when ``--until`` was already covered."""
    raw_dir: str | None
    """Where the raw output was kept (``keep_raw``), else None."""
    commands: tuple[SlurmCommand, ...]
    """The commands run."""
    ingest: IngestSummary
    """The ingest of their output."""

    def to_dict(self) -> dict[str, object]:
        """JSON-ready form."""
        data = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        data["since"], data["until"] = iso_utc(self.since_s), iso_utc(self.until_s)
        data["covered_since"] = iso_utc(self.covered_since_s)
        data["covered_until"] = iso_utc(self.covered_until_s)
        data["commands"] = [c.shell for c in self.commands]
        data["ingest"] = self.ingest.to_dict()
        return data


def collect(
    db: str | Path,
    *,
    since_s: int | None = None,
    until_s: int | None = None,
    cluster: str | None = None,
    overlap_s: int = DEFAULT_OVERLAP_S,
    keep_raw: Path | None = None,
    slurm_bin: Path | None = None,
    manifest: Path | None = None,
    progress: Progress | None = None,
    max_output_bytes: int = DEFAULT_MAX_OUTPUT_BYTES,
    store_lock: StoreLock | None = None,
) -> CollectOutcome:
    """Collect the cluster's accounting since the store's watermark into ``db``.

    ``since_s`` is where a store without coverage of the cluster starts (required then), or an
    earlier start to backfill; ``until_s`` defaults to now (later than now plus ``CLOCK_SKEW_S``
    is refused). Each command may print at most ``max_output_bytes``. ``store_lock`` is held for
    reading while the store's watermark is read and for writing only while the store is written.
    Raises ``CollectError`` naming the command when Slurm cannot be queried (the store is then
    unchanged).
    """
    progress = progress or NoProgress()
    lock = store_lock or _NoLock()
    now_s = int(time.time())
    end_s = now_s if until_s is None else until_s
    _check_options(overlap_s=overlap_s, end_s=end_s, now_s=now_s, max_bytes=max_output_bytes)
    binaries = {name: find_client(name, slurm_bin) for name in slurm_clients()}
    with tempfile.TemporaryDirectory(prefix="gpuyield-collect-") as tmp:
        run = _Run(tmp=Path(tmp), max_bytes=max_output_bytes, progress=progress)
        name = cluster or _cluster_name(binaries["scontrol"], run)
        with lock.reading():
            start_s = collect_window.query_start(
                db, name, since_s=since_s, overlap_s=overlap_s, end_s=end_s
            )
            if start_s is None:
                return _nothing_new(db, name, end_s)
        commands = slurm_commands(binaries, cluster=name, start_s=start_s, end_s=end_s)
        files = {c.kind: run.output(c) for c in commands}
        kept, folder = _keep(keep_raw, files, commands, name, start_s, end_s)
        printed = {c.file: files[c.kind] for c in commands}
        collected = {s.name: printed[s.dir_file] for s in SLURM_FILES if s.dir_file in printed}
        inputs = SlurmInputs.of({**collected, "manifest": manifest})
        with lock.writing():
            outcome = _ingest(db, inputs, name, start_s, end_s, commands, kept, progress)
        return dataclasses.replace(outcome, raw_dir=None if folder is None else str(folder))


def _check_options(*, overlap_s: int, end_s: int, now_s: int, max_bytes: int) -> None:
    if overlap_s < 0:
        raise FieldError(
            "collect.overlap_s",
            f": {overlap_s} s is negative",
            hint="give e.g. collect.overlap_s 1h",
        )
    if max_bytes <= 0:
        raise FieldError("collect.max_output_bytes", f"must be > 0, not {max_bytes}", example="4G")
    if end_s > now_s + CLOCK_SKEW_S:
        # A window ending in the future would record the future as covered: every later
        # collection would then do nothing until that time comes.
        error = FieldError(
            "collect.until",
            f"{iso_utc(end_s)} is in the future (now {iso_utc(now_s)}; "
            f"{CLOCK_SKEW_S // 60} min of clock skew allowed)",
        )
        error.hint = "leave collect.until out to collect up to now; check the clock with date -u"
        raise error


@dataclass(frozen=True, kw_only=True, slots=True)
class _Run:
    """Where one collection's command output goes, and its budget."""

    tmp: Path
    max_bytes: int
    progress: Progress

    def output(self, command: SlurmCommand) -> Path:
        """Run ``command`` into a file; a failure raises ``CollectError``."""
        self.progress.phase(f"running {Path(command.argv[0]).name} ({command.kind})")
        result = run_client(
            command.argv,
            self.tmp / command.file,
            timeout_s=COMMAND_TIMEOUT_S,
            max_bytes=self.max_bytes,
        )
        check_run(command.shell, result, self.max_bytes)
        self.progress.advance(1)
        return result.output


def _keep(
    keep_raw: Path | None,
    files: dict[str, Path],
    commands: tuple[SlurmCommand, ...],
    cluster: str,
    start_s: int,
    end_s: int,
) -> tuple[dict[Path, str], Path | None]:
    """With ``--keep-raw``: each output kept gzip-compressed (before the ingest, so a collection
    that fails to ingest can still be looked at). The name provenance gives each temporary file
    (its kept copy, or the command that printed it), and the kept folder."""
    if keep_raw is None:
        return {files[c.kind]: f"TZ=UTC {c.shell}" for c in commands}, None
    folder = collect_raw.raw_dir(keep_raw, cluster, end_s)
    kept = {files[c.kind]: str(collect_raw.keep(files[c.kind], folder, c.file)) for c in commands}
    collect_raw.write_record(
        folder,
        commands,
        cluster=cluster,
        start_s=start_s,
        end_s=end_s,
        environment=client_environment(),
    )
    return kept, folder


def _nothing_new(db: str | Path, cluster: str, end_s: int) -> CollectOutcome:
    """A collection whose period the store already covers: no command runs, nothing changes."""
    con = store.connect(db, read_only=True)
    try:
        covered = collect_window.covered_span(con, cluster, end_s)
    finally:
        con.close()
    return CollectOutcome(
        db=str(db),
        cluster=cluster,
        since_s=end_s,
        until_s=end_s,
        jobs_new=0,
        jobs_updated=0,
        jobs_unchanged=0,
        node_events=0,
        covered_since_s=covered.start_s,
        covered_until_s=covered.end_s,
        raw_dir=None,
        commands=(),
        ingest=IngestSummary(db=str(db), files=(), as_of_s=None),
    )


def _ingest(
    db: str | Path,
    inputs: SlurmInputs,
    cluster: str,
    start_s: int,
    end_s: int,
    commands: tuple[SlurmCommand, ...],
    kept: dict[Path, str],
    progress: Progress,
) -> CollectOutcome:
    fresh = store.is_new(db)
    con = store.connect(db)
    try:
        _snapshot_jobs(con, cluster, start_s)
        # The output files are temporary: provenance names the kept copy (--keep-raw) or the
        # command that printed it, inside the ingest's transaction (a kill right after it commits
        # names no lost file).
        sources = {str(temporary): name for temporary, name in kept.items()}
        summary = ingest_slurm(
            db,
            inputs,
            since_s=start_s,
            until_s=end_s,
            cluster=cluster,
            progress=progress,
            con=con,
            sources=sources,
        )
        counts = _job_changes(con, summary)
        covered = collect_window.covered_span(con, cluster, end_s)
    except BaseException:
        con.close()
        if fresh:
            store.remove(Path(db))
        raise
    con.close()
    events = sum(f.rows_read for f in summary.files if f.source == "slurm.events")
    return CollectOutcome(
        db=str(db),
        cluster=cluster,
        since_s=start_s,
        until_s=end_s,
        jobs_new=counts[0],
        jobs_updated=counts[1],
        jobs_unchanged=counts[2],
        node_events=events,
        covered_since_s=covered.start_s,
        covered_until_s=covered.end_s,
        raw_dir=None,
        commands=commands,
        ingest=dataclasses.replace(
            summary,
            files=tuple(
                dataclasses.replace(f, path=kept.get(Path(f.path), f.path)) for f in summary.files
            ),
        ),
    )


def _snapshot_jobs(con: duckdb.DuckDBPyConnection, cluster: str, start_s: int) -> None:
    """The stored jobs this query window can return again (not ended before it), to tell new,
    updated and unchanged apart after the ingest: O(window) rows, not O(store)."""
    con.execute(
        "CREATE OR REPLACE TEMP TABLE gy_collect_before AS SELECT job_id_raw, submit_s, state, "
        "end_s FROM jobs WHERE cluster = ? AND (end_s IS NULL OR end_s >= ?)",
        [cluster, start_s],
    )


def _job_changes(con: duckdb.DuckDBPyConnection, summary: IngestSummary) -> tuple[int, int, int]:
    sacct = next((f for f in summary.files if f.source == sacct_mod.SOURCE), None)
    if sacct is None or sacct.skipped:
        return 0, 0, 0
    row = con.execute(
        """SELECT count(*) FILTER (b.job_id_raw IS NULL),
                  count(*) FILTER (b.job_id_raw IS NOT NULL AND (b.state IS DISTINCT FROM j.state
                                   OR b.end_s IS DISTINCT FROM j.end_s)),
                  count(*) FILTER (b.job_id_raw IS NOT NULL AND b.state IS NOT DISTINCT FROM j.state
                                   AND b.end_s IS NOT DISTINCT FROM j.end_s)
           FROM jobs j LEFT JOIN gy_collect_before b USING (job_id_raw, submit_s)
           WHERE j.ingest_id = ?""",
        [sacct.ingest_id],
    ).fetchall()[0]
    return int(row[0]), int(row[1]), int(row[2])


def _cluster_name(scontrol: str, run: _Run) -> str:
    command = SlurmCommand(kind="config", file="config.txt", argv=(scontrol, "show", "config"))
    path = run.output(command)
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as error:
        raise CollectError(
            command.shell,
            f"printed text that is not UTF-8 ({error.reason} at byte {error.start})",
            hint="give collect.cluster NAME",
        ) from None
    for line in text.splitlines():
        key, _, value = line.partition("=")
        if key.strip() == "ClusterName" and value.strip():
            return value.strip()
    raise CollectError(command.shell, "printed no ClusterName", hint="give collect.cluster NAME")
