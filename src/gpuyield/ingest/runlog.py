"""``gpuyield ingest telemetry``: run telemetry into the store, with the divergence watch's findings.

Telemetry makes the ledger measure what it otherwise estimates: progress lost at a restart (job end
minus the last checkpoint saved), start-up (job start to first step) and checkpoint stalls (overhead).
The divergence watch replays the loss curve; what it finds is stored with its evidence, and a run that
diverged outside any release lineage is charged to ``diverged`` from that moment.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass
from pathlib import Path

import duckdb
import pyarrow as pa

from gpuyield import store
from gpuyield.guard.watch import DivergenceEvent
from gpuyield.ingest._files import scan_file
from gpuyield.ingest.ft_rows import ft_table
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
from gpuyield.ingest.telemetry import (
    CheckpointLoaded,
    CheckpointSaved,
    JobEnd,
    JobStart,
    StepRecord,
    TelemetryLog,
    read,
    scan_log,
)
from gpuyield.sqltext import identifier

SOURCE = "telemetry"

_COLUMNS = {
    "run": pa.string(),
    "job_id": pa.string(),
    "event": pa.string(),
    "t_s": pa.float64(),
    "step": pa.int64(),
    "duration_s": pa.float64(),
    "status": pa.string(),
    "loss": pa.float64(),
}


@dataclass(frozen=True, kw_only=True, slots=True)
class TelemetryResult:
    """What one telemetry file added."""

    run: str
    """Run the records belong to."""
    path: str
    """The file or directory read."""
    sha256: str
    """Content hash of the source."""
    ingest_id: int
    """Provenance id (the earlier one when skipped)."""
    skipped: bool
    """True when the same content was ingested before for this run."""
    records: int = 0
    """Records stored."""
    torn_lines: int = 0
    """Unreadable tail lines skipped (a writer killed mid-line)."""
    divergence_events: int = 0
    """Events the divergence watch found."""
    ft_events: int = 0
    """Rows stored for fault-tolerance accounting (gpuyield.ledger.ft); 0 without such events."""

    def to_dict(self) -> dict[str, object]:
        """``gpuyield ingest telemetry --json``: one object per file, every field."""
        return asdict(self)

    @property
    def outcome(self) -> IngestOutcome:
        """The same, as every ingest source reports it (torn lines are the rows skipped)."""
        return IngestOutcome(
            source=SOURCE,
            path=self.path,
            sha256=self.sha256,
            ingest_id=self.ingest_id,
            skipped=self.skipped,
            rows_read=self.records,
            rows_skipped=self.torn_lines,
        )


def _rows(run: str, log: TelemetryLog) -> pa.Table:
    rows: list[dict[str, object]] = []
    for record in log.records:
        row: dict[str, object] = dict.fromkeys(_COLUMNS)
        row["run"] = run
        if isinstance(record, StepRecord):
            row.update(event="step", t_s=record.t, step=record.step, loss=record.loss)
        elif isinstance(record, CheckpointSaved):
            row.update(
                event="checkpoint_saved",
                t_s=record.t,
                step=record.step,
                duration_s=record.duration_s,
            )
        elif isinstance(record, CheckpointLoaded):
            row.update(event="checkpoint_loaded", t_s=record.t, step=record.step)
        elif isinstance(record, JobStart):
            row.update(event="job_start", t_s=record.t, job_id=record.job_id)
        elif isinstance(record, JobEnd):
            row.update(event="job_end", t_s=record.t, job_id=record.job_id, status=record.status)
        else:
            continue  # evals carry no time accounting
        rows.append(row)
    return pa.table({c: pa.array([r[c] for r in rows], t) for c, t in _COLUMNS.items()})


@dataclass(frozen=True, kw_only=True, slots=True)
class TelemetryRun:
    """One run's telemetry ingest: where it writes and what it reads."""

    con: duckdb.DuckDBPyConnection
    """The ingest's connection (inside its transaction)."""
    run: str
    """The run the files belong to."""
    fmt: str | None
    """The format given, or None to detect it."""

    @property
    def options(self) -> str:
        """What ``ingests.options`` records: the run (the same log of another run is new)."""
        return json.dumps({"run": self.run})


@dataclass(frozen=True, kw_only=True, slots=True)
class StagedTelemetry:
    """A telemetry log read: the rows to store and what the divergence watch found."""

    table: pa.Table
    """One row per timed record (``telemetry``)."""
    torn_lines: int
    """Unreadable tail lines skipped."""
    events: tuple[DivergenceEvent, ...]
    """The divergence watch's findings."""
    ft_rows: pa.Table | None
    """Fault-tolerance rows (``ft_events``), None without such events."""


@dataclass(frozen=True, kw_only=True, slots=True)
class TelemetrySource:
    """Run telemetry as a ``Source``: logs add up (one per run and file), so any earlier ingest
    of the same content for the same run makes one a no-op."""

    kind: str = SOURCE
    input_field: str = "telemetry.files"
    latest_only: bool = False

    def read(self, run: TelemetryRun, info: Content) -> StagedTelemetry:
        log = read(Path(info.path), run.fmt)
        return StagedTelemetry(
            table=_rows(run.run, log),
            torn_lines=log.torn_lines,
            events=scan_log(log).events,
            ft_rows=ft_table(run.run, log),
        )

    def stage(self, run: TelemetryRun, staged: StagedTelemetry) -> None:
        """A log says nothing of other inputs."""

    def load(self, run: TelemetryRun, info: Content, staged: StagedTelemetry) -> Loaded:
        con = run.con
        ingest_id = store.next_ingest_id(con)
        _drop_older_copy(con, run.run, Path(info.path))
        if staged.ft_rows is not None:
            con.register("new_ft_events", staged.ft_rows)
            con.execute("INSERT INTO ft_events SELECT *, ? FROM new_ft_events", [ingest_id])
            con.unregister("new_ft_events")
        con.register("new_telemetry", staged.table)
        con.execute("INSERT INTO telemetry SELECT *, ?, NULL FROM new_telemetry", [ingest_id])
        con.unregister("new_telemetry")
        _store_events(con, run.run, staged.events, ingest_id)
        counts = RowCounts(read=staged.table.num_rows, skipped=staged.torn_lines)
        return Loaded(ingest_id=ingest_id, counts=counts)


TELEMETRY = TelemetrySource()


def ingest_telemetry(
    con: duckdb.DuckDBPyConnection, run: str, path: Path, *, fmt: str | None = None
) -> TelemetryResult:
    """Store one run's telemetry (inside the caller's transaction); the same file twice is a no-op."""
    digest = scan_file(path).sha256 if path.is_file() else _dir_digest(path)
    # No size: a directory's says nothing, and ``ingests`` has never recorded one for telemetry.
    content = InputContent(path=str(path), sha256=digest)
    telemetry = TelemetryRun(con=con, run=run, fmt=fmt)
    seen = already_ingested(con, SOURCE, content, telemetry.options, latest_only=False)
    if seen is not None:
        return TelemetryResult(
            run=run, path=seen.path, sha256=seen.sha256, ingest_id=seen.ingest_id, skipped=True
        )
    staged = TELEMETRY.read(telemetry, content)
    TELEMETRY.stage(telemetry, staged)
    loaded = TELEMETRY.load(telemetry, content, staged)
    done = register_loaded(telemetry, TELEMETRY, content, loaded, None)
    return TelemetryResult(
        run=run,
        path=done.path,
        sha256=done.sha256,
        ingest_id=done.ingest_id,
        skipped=False,
        records=done.rows_read,
        torn_lines=done.rows_skipped,
        divergence_events=len(staged.events),
        ft_events=0 if staged.ft_rows is None else staged.ft_rows.num_rows,
    )


def _drop_older_copy(con: duckdb.DuckDBPyConnection, run: str, path: Path) -> None:
    """A newer copy of the same file (append-only logs grow) replaces what the older copy stored."""
    for older in ("telemetry", "divergence_events", "ft_events"):
        con.execute(
            f"""DELETE FROM {identifier(older)} WHERE run = ? AND ingest_id IN
               (SELECT ingest_id FROM ingests WHERE source = ? AND path = ?)""",
            [run, SOURCE, str(path)],
        )


def _store_events(
    con: duckdb.DuckDBPyConnection,
    run: str,
    events: tuple[DivergenceEvent, ...],
    ingest_id: int,
) -> None:
    """The divergence watch's findings, with non-finite values (inf, NaN) stored as NULL."""
    if not events:
        return
    con.executemany(
        "INSERT INTO divergence_events VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        [
            (
                run,
                e.step,
                e.t,
                e.kind.value,
                e.metric,
                _finite(e.value),
                _finite(e.threshold),
                ingest_id,
            )
            for e in events
        ],
    )


def _finite(value: float) -> float | None:
    return value if value == value and abs(value) != float("inf") else None


def _dir_digest(path: Path) -> str:
    """One hash over a directory source (TensorBoard logs, an MLflow store): names and contents."""
    digest = hashlib.sha256()
    for child in sorted(p for p in path.rglob("*") if p.is_file()):
        digest.update(str(child.relative_to(path)).encode())
        digest.update(hashlib.sha256(child.read_bytes()).digest())
    return digest.hexdigest()


def ingest_telemetry_files(
    db: str | Path | None,
    run: str,
    paths: list[Path],
    *,
    fmt: str | None = None,
    con: duckdb.DuckDBPyConnection | None = None,
) -> list[TelemetryResult]:
    """Ingest several telemetry sources of one run, all or nothing."""
    return atomically(
        db,
        con,
        lambda connection, _: [ingest_telemetry(connection, run, Path(p), fmt=fmt) for p in paths],
    )
