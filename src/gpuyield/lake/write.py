"""Bringing a lake up to date with a store: the partitions whose rows changed, as Parquet.

The store stays where rows are parsed, checked and replaced (DuckDB, on the collecting machine);
the lake receives what the store holds, table by table, partition by partition. A partition is
written again only when its rows changed: each partition's fingerprint (row count and an
order-free sum of row hashes) is kept in the writer's manifest and compared at the next sync. Large
tables are fingerprinted only where ingests since the last sync added rows (a replaced row shares
its partition with the row replacing it: ``layout.day_sql``), so a collect every few minutes
does not rehash a year of samples.

Each file is written under a temporary name inside the lake and renamed into place; the manifest
is renamed last. A sync that dies leaves the previous manifest, which names only complete files.
"""

from __future__ import annotations

import fcntl
import hashlib
import shutil
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq

from gpuyield import store
from gpuyield.errors import InputError
from gpuyield.lake import layout
from gpuyield.lake.layout import LakeFile, Partition, WriterManifest
from gpuyield.lake.manifest_facts import covered_windows, ingest_entries
from gpuyield.sqltext import identifier, literal

_WRITER_KEY = "lake_writer_id"


@dataclass(frozen=True, kw_only=True, slots=True)
class LakeSync:
    """What a sync (``gpuyield lake export``, ``ingest --lake``, ``collect --lake``) did."""

    lake: str
    """The lake directory."""
    writer: str
    """The store's identity in the lake."""
    generation: int
    """The writer's manifest generation after the sync (unchanged when nothing changed)."""
    files_written: int
    """New Parquet files (partitions whose rows changed)."""
    rows_written: int
    """Rows in them."""
    files_unchanged: int
    """Files kept as they were."""
    files_retired: int
    """Files replaced (deleted at the next sync)."""

    def to_dict(self) -> dict[str, Any]:
        """The ``--json`` shape."""
        return {
            "lake": self.lake,
            "writer": self.writer,
            "generation": self.generation,
            "files_written": self.files_written,
            "rows_written": self.rows_written,
            "files_unchanged": self.files_unchanged,
            "files_retired": self.files_retired,
        }


def export_lake(db: str | Path, lake: str | Path) -> LakeSync:
    """Write the whole store at ``db`` into ``lake`` (every partition compared, not only new ones)."""
    con = store.connect(db, read_only=False)
    try:
        return sync_lake(con, Path(lake), store_path=str(db), full=True)
    finally:
        con.close()


def sync_store(db: str | Path, lake: str | Path) -> LakeSync:
    """After an ingest into the store at ``db``: write what it changed into ``lake`` (the
    partitions ingests since the last sync touched, and every partition of small tables)."""
    con = store.connect(db, read_only=False)
    try:
        return sync_lake(con, Path(lake), store_path=str(db), full=False)
    finally:
        con.close()


def sync_lake(
    con: duckdb.DuckDBPyConnection, lake: Path, *, store_path: str, full: bool = False
) -> LakeSync:
    """Bring ``lake`` up to date with the open store ``con`` (see the module's docstring)."""
    _make_lake_dir(lake)
    with _locked(lake):
        writer = _writer_id(con)
        manifests = _existing(lake)
        previous = next((m for m in manifests if m.writer == writer), None)
        others = [m for m in manifests if m.writer != writer]
        watermark = 0 if full or previous is None else previous.watermark_ingest_id
        current = {f.partition: f for f in (previous.files if previous else ())}
        prints = _fingerprints(con, watermark, current)
        _check_owners(prints, others, lake)
        changed = {p: fp for p, fp in prints.present.items() if _differs(current, p, fp)}
        gone = {p for p in current if p[0] in prints.whole and p not in prints.present}
        if previous is not None and not changed and not gone:
            return _unchanged(lake, previous)
        written = _write_partitions(con, lake, writer, changed)
        kept = [f for p, f in current.items() if p not in changed and p not in gone]
        files = tuple(sorted([*kept, *written], key=lambda f: f.path))
        manifest = _manifest(con, writer, previous, others, files, store_path)
        layout.write_manifest(lake, manifest)
        if previous is not None:
            _delete_retired(lake, previous.retired, {f.path for f in files})
        return LakeSync(
            lake=str(lake),
            writer=writer,
            generation=manifest.generation,
            files_written=len(written),
            rows_written=sum(f.rows for f in written),
            files_unchanged=len(kept),
            files_retired=len(manifest.retired),
        )


def _make_lake_dir(lake: Path) -> None:
    if lake.exists() and not lake.is_dir():
        raise InputError(f"{lake} is not a directory", hint="give lake.path a directory")
    try:
        (lake / layout.META_DIR / "writers").mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise InputError(
            f"cannot create the lake {lake}: {error.strerror or error}",
            hint="check the lake directory (lake.path) and its permissions",
        ) from None


@contextmanager
def _locked(lake: Path) -> Iterator[None]:
    """One writer at a time changes a lake (stores of several clusters may share it)."""
    with (lake / layout.META_DIR / "lock").open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _writer_id(con: duckdb.DuckDBPyConnection) -> str:
    """The store's identity in lakes, created at its first sync and kept in its ``meta``."""
    rows = con.execute("SELECT value FROM meta WHERE key = ?", [_WRITER_KEY]).fetchall()
    if rows:
        return str(rows[0][0])
    writer = layout.new_writer_id()
    con.execute("INSERT INTO meta VALUES (?, ?)", [_WRITER_KEY, writer])
    return writer


def _existing(lake: Path) -> tuple[WriterManifest, ...]:
    if not any(layout.writers_dir(lake).glob("*.json")):
        return ()
    return layout.read_manifests(lake)


@dataclass(frozen=True, kw_only=True, slots=True)
class _Prints:
    present: dict[Partition, str]
    """Fingerprints of the partitions compared."""
    whole: frozenset[str]
    """Tables compared whole (a partition of theirs not in ``present`` has no rows any more)."""


def _fingerprints(
    con: duckdb.DuckDBPyConnection, watermark: int, current: dict[Partition, LakeFile]
) -> _Prints:
    """Each compared partition's fingerprint: every partition of small tables (and of all tables
    on a full export), the partitions new ingests touched in large ones."""
    present: dict[Partition, str] = {}
    whole = set()
    for table in layout.store_tables():
        columns = _columns(con, table)
        rows = int(con.execute(f"SELECT count(*) FROM {identifier(table)}").fetchall()[0][0])
        # Only a table whose rows name the ingest that wrote them can be compared by ingest; one
        # kept up to date in place (the utilization attribution's) is compared whole.
        knows_ingest = "ingest_id" in columns or table == "job_nodes"
        incremental = watermark > 0 and rows > layout.INCREMENTAL_FROM_ROWS and knows_ingest
        if not incremental:
            whole.add(table)
        query = _fingerprint_sql(table, columns, watermark if incremental else None)
        for cluster, day, count, hashed in con.execute(query).fetchall():
            present[Partition(table, cluster, day)] = f"{count}:{hashed}"
    return _Prints(present=present, whole=frozenset(whole))


def _columns(con: duckdb.DuckDBPyConnection, table: str) -> tuple[str, ...]:
    rows = con.execute(
        "SELECT column_name FROM duckdb_columns() WHERE table_name = ? AND schema_name = 'main' "
        "ORDER BY column_index",
        [table],
    ).fetchall()
    return tuple(name for (name,) in rows)


def partition_sql(table: str, columns: tuple[str, ...]) -> str:
    """The table's rows with ``__cluster``, ``__day`` and ``__ingest`` (the ingest that wrote
    the row, or its job's for a job's nodes: what tells a sync which partitions are new)."""
    ingest = (
        "j.ingest_id"
        if table == "job_nodes"
        else ("t.ingest_id" if "ingest_id" in columns else "NULL::BIGINT")
    )
    selected = ", ".join(f"t.{identifier(c)}" for c in columns)
    return (
        f"SELECT {selected}, {layout.cluster_sql(table, columns)} AS __cluster, "
        f"{layout.day_sql(table, columns)} AS __day, {ingest} AS __ingest "
        f"FROM {layout.from_sql(table)}"
    )


def _fingerprint_sql(table: str, columns: tuple[str, ...], watermark: int | None) -> str:
    rows = partition_sql(table, columns)
    hashed = ", ".join(f"p.{identifier(c)}" for c in columns)
    where = ""
    if watermark is not None:
        touched = (
            f"SELECT DISTINCT __cluster, __day FROM ({rows}) "
            f"WHERE __ingest > {literal(int(watermark))}"
        )
        where = (
            f"SEMI JOIN ({touched}) n ON p.__cluster IS NOT DISTINCT FROM n.__cluster "
            "AND p.__day IS NOT DISTINCT FROM n.__day"
        )
    return (
        f"SELECT p.__cluster, p.__day, count(*), sum(hash({hashed})::HUGEINT)::VARCHAR "
        f"FROM ({rows}) p {where} GROUP BY ALL"
    )


def _differs(current: dict[Partition, LakeFile], partition: Partition, fingerprint: str) -> bool:
    held = current.get(partition)
    return held is None or held.fingerprint != fingerprint


def _check_owners(prints: _Prints, others: list[WriterManifest], lake: Path) -> None:
    """A cluster's rows come from one store: two stores writing one cluster would double it."""
    mine = {p[1] for p in prints.present if p[1] is not None}
    for other in others:
        shared = mine & set(other.clusters)
        if shared:
            raise InputError(
                f"cluster {sorted(shared)[0]!r} is already in the lake {lake}, written by "
                f"another store ({other.store})",
                hint="collect each cluster into one store; give this store's rows another "
                "lake (lake.path), or export from the store that holds them",
            )


def _write_partitions(
    con: duckdb.DuckDBPyConnection, lake: Path, writer: str, changed: dict[Partition, str]
) -> list[LakeFile]:
    """Write every changed partition, one COPY per table, each file renamed into place."""
    written: list[LakeFile] = []
    staging = lake / layout.META_DIR / f"tmp-{uuid.uuid4().hex[:12]}"
    try:
        for table in layout.store_tables():
            parts = [p for p in changed if p[0] == table]
            if parts:
                written += _write_table(con, lake, staging / table, writer, table, parts, changed)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return written


def _write_table(
    con: duckdb.DuckDBPyConnection,
    lake: Path,
    staging: Path,
    writer: str,
    table: str,
    parts: list[Partition],
    fingerprints: dict[Partition, str],
) -> list[LakeFile]:
    columns = _columns(con, table)
    keys = pa.table(
        {
            "__cluster": pa.array([p[1] for p in parts], pa.string()),
            "__day": pa.array([p[2] for p in parts], pa.int64()),
            "__part": pa.array(range(len(parts)), pa.int64()),
        }
    )
    selected = ", ".join(f"p.{identifier(c)}" for c in columns)
    staging.mkdir(parents=True)
    con.register("gy_lake_parts", keys)
    try:
        con.execute(
            f"""COPY (SELECT {selected}, k.__part FROM ({partition_sql(table, columns)}) p
                      JOIN gy_lake_parts k ON p.__cluster IS NOT DISTINCT FROM k.__cluster
                       AND p.__day IS NOT DISTINCT FROM k.__day)
                TO {literal(str(staging))}
                (FORMAT parquet, COMPRESSION zstd, PARTITION_BY (__part))"""
        )
    finally:
        con.unregister("gy_lake_parts")
    files = []
    for index, partition in enumerate(parts):
        for path in sorted((staging / f"__part={index}").glob("*.parquet")):
            files.append(_place(lake, writer, path, partition, fingerprints[partition]))
    return files


def _place(lake: Path, writer: str, path: Path, partition: Partition, fingerprint: str) -> LakeFile:
    """Move one written file to its partition under its content's name (one rename)."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    sha256 = digest.hexdigest()
    table, cluster, day = partition
    relative = f"{layout.partition_dir(table, cluster, day)}/{layout.file_name(writer, sha256)}"
    target = lake / relative
    target.parent.mkdir(parents=True, exist_ok=True)
    rows = pq.read_metadata(path).num_rows
    size = path.stat().st_size
    path.replace(target)
    return LakeFile(
        table=table,
        cluster=cluster,
        day=day,
        path=relative,
        rows=rows,
        size_bytes=size,
        sha256=sha256,
        fingerprint=fingerprint,
    )


def _manifest(
    con: duckdb.DuckDBPyConnection,
    writer: str,
    previous: WriterManifest | None,
    others: list[WriterManifest],
    files: tuple[LakeFile, ...],
    store_path: str,
) -> WriterManifest:
    watermark = con.execute("SELECT coalesce(max(ingest_id), 0) FROM ingests").fetchall()[0][0]
    if int(watermark) >= layout.INGEST_ID_STRIDE:
        raise InputError(
            f"the store {store_path} has {watermark} ingests; a lake takes at most "
            f"{layout.INGEST_ID_STRIDE - 1} from one store",
            hint="start a new store and a new lake for later collections",
        )
    kept_paths = {f.path for f in files}
    retired = (
        () if previous is None else tuple(sorted({f.path for f in previous.files} - kept_paths))
    )
    return WriterManifest(
        writer=writer,
        index=previous.index if previous is not None else _free_index(others),
        schema_version=store.SCHEMA_VERSION,
        store=str(Path(store_path).resolve()) if store_path != ":memory:" else store_path,
        generation=1 if previous is None else previous.generation + 1,
        written_at=datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        watermark_ingest_id=int(watermark),
        clusters=tuple(sorted({f.cluster for f in files if f.cluster is not None})),
        files=files,
        ingests=ingest_entries(con),
        coverage=covered_windows(con),
        retired=retired,
    )


def _free_index(others: list[WriterManifest]) -> int:
    used = {m.index for m in others}
    free = next((i for i in range(layout.MAX_WRITERS) if i not in used), None)
    if free is None:
        raise InputError(
            f"the lake already has {layout.MAX_WRITERS} writing stores",
            hint="collect several clusters into one store, or give this store another lake (lake.path)",
        )
    return free


def _unchanged(lake: Path, previous: WriterManifest) -> LakeSync:
    return LakeSync(
        lake=str(lake),
        writer=previous.writer,
        generation=previous.generation,
        files_written=0,
        rows_written=0,
        files_unchanged=len(previous.files),
        files_retired=0,
    )


def _delete_retired(lake: Path, retired: tuple[str, ...], current: set[str]) -> None:
    """The files the previous generation retired: no reader of a current manifest needs them."""
    for relative in retired:
        if relative not in current:
            (lake / relative).unlink(missing_ok=True)
