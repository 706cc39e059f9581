"""``gpuyield collect``: run Slurm's own commands for the period since the last collection, ingest
their output in one transaction, and record the period as covered.

Each collection queries ``[watermark - overlap, now)``, where the watermark is the end of the
cluster's coverage in the store: the overlap re-reads jobs that were running at the last collection,
whose rows (same key: cluster, JobIDRaw, Submit) are then replaced by their finished state, never
added twice. Commands run with ``TZ=UTC`` and without ``SLURM_TIME_FORMAT``, so their times are read
the same way whatever the site's shell sets. A command that fails stops the collection before the
store is opened for writing: the store is unchanged.
"""

from __future__ import annotations

import dataclasses
import gzip
import json
import os
import shlex
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import duckdb

from gpuyield import store
from gpuyield.errors import InputError
from gpuyield.ingest import sacct as sacct_mod
from gpuyield.ingest.slurm import IngestSummary, SlurmInputs, ingest_slurm
from gpuyield.progress import NoProgress, Progress
from gpuyield.times import iso_utc

# The format docs/ledger.md documents for `ingest slurm` (one record per line: no SubmitLine),
# less ElapsedRaw: a running job's grows with the clock even for the same -S/-E, and collect gives
# the capture time itself, so ElapsedRaw would only make identical queries look changed.
SACCT_FORMAT = (
    "JobID,JobIDRaw,JobName,User,Account,Partition,QOS,State,ExitCode,Submit,Start,End,"
    "AllocTRES,NodeList,NNodes,Comment,Cluster"
)
EVENT_FORMAT = "Cluster,ClusterNodes,NodeName,Event,EventRaw,State,StateRaw,Start,End,Duration,Reason,User,TRES"
RESERVATION_FORMAT = "Cluster,Name,TimeStart,TimeEnd,Flags,NodeNames"
COMMAND_TIMEOUT_S = 600
DEFAULT_OVERLAP_S = 3600
_SLURM_TIME = "%Y-%m-%dT%H:%M:%S"


class CollectError(InputError):
    """A Slurm command could not run or failed; names the command."""

    def __init__(self, command: str, message: str, *, hint: str) -> None:
        self.command = command
        super().__init__(f"`{command}` {message}", hint=hint)


@dataclass(frozen=True, kw_only=True, slots=True)
class SlurmCommand:
    """One command a collection runs, and the file its output went to."""

    kind: str
    """Input kind: sacct, events, reservations, nodes, jobs-detail (the ``ingest slurm`` flag)."""
    argv: tuple[str, ...]
    """The exact command line."""
    file: str
    """The output's file name (in ``--keep-raw``, gzip-compressed)."""

    @property
    def shell(self) -> str:
        """The command as a shell line (for logs, errors and ``commands.tsv``)."""
        return shlex.join(self.argv)


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
    """The cluster's coverage now, as one span ending at ``until_s``: its start."""
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
) -> CollectOutcome:
    """Collect the cluster's accounting since the store's watermark into ``db``.

    ``since_s`` is where a store without coverage of the cluster starts (required then), or an
    earlier start to backfill; ``until_s`` defaults to now. Raises ``CollectError`` naming the
    command when Slurm cannot be queried (the store is then unchanged).
    """
    progress = progress or NoProgress()
    if overlap_s < 0:
        raise InputError(f"--overlap: {overlap_s} s is negative", hint="give e.g. --overlap 1h")
    binaries = {name: _find(name, slurm_bin) for name in ("sacct", "sacctmgr", "scontrol")}
    name = cluster or _cluster_name(binaries["scontrol"])
    end_s = int(time.time()) if until_s is None else until_s
    start_s = _query_start(db, name, since_s=since_s, overlap_s=overlap_s, end_s=end_s)
    if start_s is None:
        return _nothing_new(db, name, end_s)
    commands = slurm_commands(binaries, cluster=name, start_s=start_s, end_s=end_s)
    with tempfile.TemporaryDirectory(prefix="gpuyield-collect-") as tmp:
        out = _raw_dir(keep_raw, name, end_s) if keep_raw is not None else Path(tmp)
        files = {c.kind: _run(c, out, compress=keep_raw is not None, progress=progress)
                 for c in commands}  # fmt: skip
        if keep_raw is not None:
            _write_manifest_of_run(out, commands, name, start_s, end_s)
        inputs = SlurmInputs(
            sacct=files["sacct"],
            events=files["events"],
            nodes=files["nodes"],
            reservations=files["reservations"],
            jobs_detail=files["jobs-detail"],
            manifest=manifest,
        )
        return _ingest(db, inputs, name, start_s, end_s, commands, out, keep_raw, progress)


def _nothing_new(db: str | Path, cluster: str, end_s: int) -> CollectOutcome:
    """A collection whose period the store already covers: no command runs, nothing changes."""
    con = store.connect(db, read_only=True)
    try:
        covered = _covered_since(con, cluster, end_s)
    finally:
        con.close()
    return CollectOutcome(
        db=str(db), cluster=cluster, since_s=end_s, until_s=end_s, jobs_new=0, jobs_updated=0,
        jobs_unchanged=0, node_events=0, covered_since_s=covered, raw_dir=None, commands=(),
        ingest=IngestSummary(db=str(db), files=(), as_of_s=None),
    )  # fmt: skip


def slurm_commands(
    binaries: dict[str, str], *, cluster: str, start_s: int, end_s: int
) -> tuple[SlurmCommand, ...]:
    """The queries of one collection (formats as docs/ledger.md reads them)."""
    start, end = _slurm_time(start_s), _slurm_time(end_s)
    sacct, sacctmgr = binaries["sacct"], binaries["sacctmgr"]
    return (
        SlurmCommand(kind="sacct", file="sacct.psv", argv=(
            sacct, "-a", "-P", "-X", "-D", f"--clusters={cluster}", f"--format={SACCT_FORMAT}",
            "-S", start, "-E", end)),
        # All of time: an event is small, and a node down since last month is down today.
        SlurmCommand(kind="events", file="events.psv", argv=(
            sacctmgr, "-P", "show", "event", "All_Time", f"clusters={cluster}",
            f"format={EVENT_FORMAT}")),
        SlurmCommand(kind="reservations", file="reservations.psv", argv=(
            sacctmgr, "-P", "show", "reservation", f"clusters={cluster}", f"start={start}",
            f"format={RESERVATION_FORMAT}")),
        SlurmCommand(kind="nodes", file="nodes.txt", argv=(
            binaries["scontrol"], "-o", "show", "nodes")),
        # Which GPUs each running job holds: Slurm forgets it once the job ends (jobs_detail.py).
        SlurmCommand(kind="jobs-detail", file="jobs-detail.txt", argv=(
            binaries["scontrol"], "-d", "-o", "show", "job")),
    )  # fmt: skip


def _ingest(
    db: str | Path,
    inputs: SlurmInputs,
    cluster: str,
    start_s: int,
    end_s: int,
    commands: tuple[SlurmCommand, ...],
    out: Path,
    keep_raw: Path | None,
    progress: Progress,
) -> CollectOutcome:
    fresh = store.is_new(db)
    con = store.connect(db)
    try:
        _snapshot_jobs(con, cluster, start_s)
        # Without --keep-raw the files are temporary: provenance names the command instead,
        # inside the ingest's transaction (a kill right after it commits names no lost file).
        sources = (
            {str(out / c.file): f"TZ=UTC {c.shell}" for c in commands} if keep_raw is None else {}
        )
        summary = ingest_slurm(db, inputs, since_s=start_s, until_s=end_s, cluster=cluster,
                               progress=progress, con=con, sources=sources)  # fmt: skip
        counts = _job_changes(con, summary)
        covered = _covered_since(con, cluster, end_s)
    except BaseException:
        con.close()
        if fresh:
            store.remove(Path(db))
        raise
    con.close()
    events = sum(f.rows_read for f in summary.files if f.source == "slurm.events")
    return CollectOutcome(
        db=str(db), cluster=cluster, since_s=start_s, until_s=end_s, jobs_new=counts[0],
        jobs_updated=counts[1], jobs_unchanged=counts[2], node_events=events,
        covered_since_s=covered, raw_dir=None if keep_raw is None else str(out),
        commands=commands, ingest=summary,
    )  # fmt: skip


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


@dataclass(frozen=True, kw_only=True, slots=True)
class Watermark:
    """The outer bounds of a cluster's coverage in the store (epoch seconds, UTC)."""

    first_start_s: int
    """First covered second of the earliest collection."""
    last_end_s: int
    """First second after the latest collection: the next one continues from here."""


def watermark(con: duckdb.DuckDBPyConnection, cluster: str) -> Watermark | None:
    """The cluster's coverage bounds, or None when it has none."""
    try:
        row = con.execute(
            "SELECT min(start_s), max(end_s) FROM coverage WHERE cluster = ?", [cluster]
        ).fetchall()[0]
    except duckdb.CatalogException:
        return None
    if row[0] is None:
        return None
    return Watermark(first_start_s=int(row[0]), last_end_s=int(row[1]))


def _covered_since(con: duckdb.DuckDBPyConnection, cluster: str, end_s: int) -> int:
    """Start of the contiguous coverage that ends at ``end_s``."""
    spans = con.execute(
        "SELECT start_s, end_s FROM coverage WHERE cluster = ? ORDER BY start_s", [cluster]
    ).fetchall()
    merged: list[list[int]] = []
    for span_start, span_end in spans:
        if merged and span_start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], int(span_end))
        else:
            merged.append([int(span_start), int(span_end)])
    return next((a for a, b in merged if a <= end_s <= b), end_s)


def _query_start(
    db: str | Path, cluster: str, *, since_s: int | None, overlap_s: int, end_s: int
) -> int | None:
    """Start of the query window; None when the store already covers up to ``end_s``."""
    known = None
    if Path(db).exists():
        con = store.connect(db, read_only=True)
        try:
            known = watermark(con, cluster)
        finally:
            con.close()
    if known is None:
        if since_s is None:
            raise InputError(
                f"the store has no accounting of cluster {cluster!r} yet: where should the "
                "first collection start?",
                hint="give --since (e.g. --since 2026-12-01); later runs continue from where "
                "the last one ended",
            )
        start_s = since_s
    else:
        # Not before the first collection's start: that time was never asked for.
        start_s = max(known.first_start_s, known.last_end_s - overlap_s)
        if since_s is not None and since_s < known.first_start_s:
            start_s = since_s  # a backfill: everything from --since again
        elif end_s <= known.last_end_s:
            return None  # already covered up to --until: nothing to add
    if start_s >= end_s:
        raise InputError(
            f"nothing to collect: the window starts at {iso_utc(start_s)}, not before "
            f"--until {iso_utc(end_s)}",
            hint="give a later --until (default: now)",
        )
    return start_s


def _find(name: str, slurm_bin: Path | None) -> str:
    if slurm_bin is not None:
        path = slurm_bin / name
        if not os.access(path, os.X_OK):
            raise CollectError(name, f"not found in {slurm_bin}", hint="check --slurm-bin")
        return str(path)
    found = shutil.which(name)
    if found is None:
        raise CollectError(
            name, "not found on PATH", hint="run on a Slurm login node, or give --slurm-bin DIR"
        )
    return found


def _env() -> dict[str, str]:
    """UTC times in a format the ingest reads, whatever the caller's shell sets."""
    env = {k: v for k, v in os.environ.items() if k != "SLURM_TIME_FORMAT"}
    env["TZ"] = "UTC"
    return env


def _call(argv: tuple[str, ...]) -> bytes:
    command = shlex.join(argv)
    try:
        proc = subprocess.run(
            argv, capture_output=True, env=_env(), timeout=COMMAND_TIMEOUT_S, check=False
        )
    except subprocess.TimeoutExpired:
        raise CollectError(
            command, f"ran past {COMMAND_TIMEOUT_S} s", hint="is slurmdbd/slurmctld answering?"
        ) from None
    except OSError as error:
        raise CollectError(command, f"could not run: {error}", hint="check --slurm-bin") from None
    if proc.returncode != 0:
        tail = proc.stderr.decode("utf-8", "replace").strip()[-1500:]
        raise CollectError(
            command,
            f"exited {proc.returncode}: {tail or '(no message)'}",
            hint="are slurmctld and slurmdbd running? `gpuyield doctor` checks them; the store "
            "is unchanged, run collect again when Slurm answers",
        )
    return proc.stdout


def _cluster_name(scontrol: str) -> str:
    text = _call((scontrol, "show", "config")).decode("utf-8", "replace")
    for line in text.splitlines():
        key, _, value = line.partition("=")
        if key.strip() == "ClusterName" and value.strip():
            return value.strip()
    raise CollectError(
        f"{scontrol} show config", "printed no ClusterName", hint="give --cluster NAME"
    )


def _run(command: SlurmCommand, out: Path, *, compress: bool, progress: Progress) -> Path:
    progress.phase(f"running {Path(command.argv[0]).name} ({command.kind})")
    data = _call(command.argv)
    progress.advance(1)
    if compress:
        target = out / (command.file + ".gz")
        target.write_bytes(gzip.compress(data, compresslevel=6, mtime=0))
    else:
        target = out / command.file
        target.write_bytes(data)
    return target


def _raw_dir(keep_raw: Path, cluster: str, end_s: int) -> Path:
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(end_s))
    target = keep_raw / f"{cluster}-{stamp}"
    target.mkdir(parents=True, exist_ok=True)
    return target


def _write_manifest_of_run(
    out: Path, commands: tuple[SlurmCommand, ...], cluster: str, start_s: int, end_s: int
) -> None:
    """``commands.tsv`` (file, exact command, environment) and ``collection.json`` with the
    ``gpuyield ingest slurm`` line that loads this collection again (the store is rebuilt by
    running those lines in order)."""
    lines = [f"{c.file}.gz\tTZ=UTC {c.shell}\n" for c in commands]
    (out / "commands.tsv").write_text("".join(lines))
    files = {c.kind: str(out / f"{c.file}.gz") for c in commands}
    rebuild = ["gpuyield", "ingest", "slurm", "--db", "DB", "--cluster", cluster,
               "--since", iso_utc(start_s), "--until", iso_utc(end_s),
               *[a for kind, path in files.items() for a in (f"--{kind}", path)]]  # fmt: skip
    record = {
        "cluster": cluster,
        "since": iso_utc(start_s),
        "until": iso_utc(end_s),
        "commands": [c.shell for c in commands],
        "ingest_again": shlex.join(rebuild),
    }
    (out / "collection.json").write_text(json.dumps(record, indent=2) + "\n")


def _slurm_time(epoch_s: int) -> str:
    return time.strftime(_SLURM_TIME, time.gmtime(epoch_s))
