"""Where a lake keeps what: Parquet partitions of the store's tables, and one manifest per writer.

::

    LAKE/
      jobs/cluster=lab/day=2026-11-30/part-<writer>-<sha256 prefix>.parquet
      node_events/cluster=lab/day=2026-11-29/...
      ingests/cluster=__HIVE_DEFAULT_PARTITION__/day=2026-11-30/...
      _gpuyield/writers/<writer id>.json      which files, ingests, coverage, schema version
      _gpuyield/lock                          one writer at a time changes the lake

Every table of the store is a directory, partitioned Hive-style by the row's cluster and UTC day
(``__HIVE_DEFAULT_PARTITION__`` where a row has none, as Hive and Spark write a null). A file's
name carries the writer and the SHA-256 of its bytes, so two stores writing one lake never write
the same name, and a file's name says what it holds. Readers take the file lists from the writers'
manifests, never from a directory listing: a manifest is replaced by one rename, so a reader sees
one writer's state before a sync or after it, never half of one.
"""

from __future__ import annotations

import functools
import json
import os
import uuid
from dataclasses import dataclass, field
from datetime import date, timedelta
from pathlib import Path
from typing import Any, NamedTuple
from urllib.parse import quote

from gpuyield import store
from gpuyield.errors import InputError
from gpuyield.sqltext import identifier
from gpuyield.store import SCHEMA_VERSION

#: The lake format this gpuyield writes and reads (the tables' own schema is ``SCHEMA_VERSION``).
FORMAT = "gpuyield-lake"
FORMAT_VERSION = 1
#: Hive's (and Spark's) name for a partition whose value is null.
NULL_PARTITION = "__HIVE_DEFAULT_PARTITION__"
META_DIR = "_gpuyield"
#: Stores writing one lake: each one's ingest ids and job keys are moved to a range of their own
#: when read (``read.py``), and a job key keeps ingest id and line in 63 bits (40 for the line).
MAX_WRITERS = 8
INGEST_ID_STRIDE = 1 << 20
JOB_KEY_STRIDE = INGEST_ID_STRIDE << 40
#: Tables too large to fingerprint whole at every sync (``write.py``): above this many rows only
#: the partitions new ingests touched are compared.
INCREMENTAL_FROM_ROWS = 2_000_000


@functools.cache
def store_tables() -> tuple[str, ...]:
    """The store's tables, in schema order (the lake mirrors every one but ``meta``).

    Read from a new store's schema, so a table added to ``store.py`` reaches the lake unasked
    (and tables a store derives later, such as the ladder's summaries, do not).
    """
    con = store.connect(None)
    try:
        rows = con.execute(
            "SELECT table_name FROM duckdb_tables() WHERE schema_name = 'main' ORDER BY table_oid"
        ).fetchall()
    finally:
        con.close()
    return tuple(name for (name,) in rows if name != "meta")


def cluster_sql(table: str, columns: tuple[str, ...]) -> str:
    """SQL for a row's cluster (its ``cluster`` column; NULL for tables without one)."""
    if table == "job_nodes":
        return "j.cluster"
    return "t.cluster" if "cluster" in columns else "NULL::VARCHAR"


def day_sql(table: str, columns: tuple[str, ...]) -> str:
    """SQL for a row's UTC day, as days since 1970 (NULL: no time).

    A job's day is its submit day, part of its natural key, so a job captured pending, then
    running, then ended stays in one partition (a sync rewrites only the partitions new rows
    touch, and a replaced row shares its partition with the row that replaces it). A job's nodes
    follow their job. Other tables: their first time column of ``start_s, t_s, as_of_s``.
    """
    if table == "jobs":
        return "floor(nullif(t.submit_s, -1) / 86400)::BIGINT"
    if table == "job_nodes":
        return "floor(nullif(j.submit_s, -1) / 86400)::BIGINT"
    for name in ("start_s", "t_s", "as_of_s"):
        if name in columns:
            return f"floor(t.{identifier(name)} / 86400)::BIGINT"
    return "NULL::BIGINT"


def from_sql(table: str) -> str:
    """The FROM of a table's partition query (a job's nodes join their job for its partition)."""
    if table == "job_nodes":
        return "job_nodes t LEFT JOIN jobs j ON j.job_key = t.job_key"
    return f"{identifier(table)} t"


def partition_dir(table: str, cluster: str | None, day: int | None) -> str:
    """``table/cluster=X/day=YYYY-MM-DD``, relative to the lake."""
    return f"{table}/cluster={_cluster_value(cluster)}/day={_day_value(day)}"


def _cluster_value(cluster: str | None) -> str:
    # Percent-encoded as Hive does, so a name with '/' or '=' stays one directory level.
    return NULL_PARTITION if cluster is None else quote(cluster, safe="")


def _day_value(day: int | None) -> str:
    if day is None:
        return NULL_PARTITION
    try:
        return (date(1970, 1, 1) + timedelta(days=day)).isoformat()
    except OverflowError:  # a time beyond year 9999 (refused at ingest; kept apart, not lost)
        return f"{day}d"


def file_name(writer: str, sha256: str) -> str:
    """A data file's name: its writer and the start of its content's hash."""
    return f"part-{writer[:8]}-{sha256[:16]}.parquet"


def new_writer_id() -> str:
    """A store's identity in lakes (kept in its ``meta`` table)."""
    return uuid.uuid4().hex


class Partition(NamedTuple):
    """One partition of the lake: a table's rows of one cluster and day. A named tuple, not a
    dataclass, because it keys the dicts a sync compares and its fields unpack in order."""

    table: str
    cluster: str | None
    day: int | None


@dataclass(frozen=True, kw_only=True, slots=True)
class LakeFile:
    """One Parquet file of one partition."""

    table: str
    """The store table it holds rows of."""
    cluster: str | None
    """The partition's cluster (None: rows without one)."""
    day: int | None
    """The partition's UTC day, in days since 1970 (None: rows without a time)."""
    path: str
    """Relative to the lake."""
    rows: int
    """Rows in the file."""
    size_bytes: int
    """Bytes on disk."""
    sha256: str
    """Of the file's bytes (``lake check`` reads them again)."""
    fingerprint: str
    """Of the partition's rows as the store held them (rows and an order-free hash of their
    values): a sync compares it to skip partitions whose rows did not change."""

    def to_dict(self) -> dict[str, Any]:
        """The manifest's JSON shape."""
        return {
            "table": self.table,
            "cluster": self.cluster,
            "day": self.day,
            "path": self.path,
            "rows": self.rows,
            "size_bytes": self.size_bytes,
            "sha256": self.sha256,
            "fingerprint": self.fingerprint,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> LakeFile:
        """Read back ``to_dict``'s shape."""
        return cls(**{k: data[k] for k in cls.__slots__})

    @property
    def partition(self) -> Partition:
        """The partition the file holds rows of."""
        return Partition(self.table, self.cluster, self.day)


@dataclass(frozen=True, kw_only=True, slots=True)
class IngestEntry:
    """One ingest the lake holds rows of: which file, when, captured up to when."""

    ingest_id: int
    source: str
    path: str
    sha256: str
    as_of_s: int | None
    ingested_at: str

    def to_dict(self) -> dict[str, Any]:
        """The manifest's JSON shape."""
        return {
            "ingest_id": self.ingest_id,
            "source": self.source,
            "path": self.path,
            "sha256": self.sha256,
            "as_of_s": self.as_of_s,
            "ingested_at": self.ingested_at,
        }


@dataclass(frozen=True, kw_only=True, slots=True)
class CoveredWindow:
    """A cluster's accounting known complete over ``[start_s, end_s)`` (the store's coverage)."""

    cluster: str
    start_s: int
    end_s: int

    def to_dict(self) -> dict[str, Any]:
        """The manifest's JSON shape."""
        return {"cluster": self.cluster, "start_s": self.start_s, "end_s": self.end_s}


@dataclass(frozen=True, kw_only=True, slots=True)
class WriterManifest:
    """What one store wrote into a lake: ``_gpuyield/writers/<writer>.json``."""

    writer: str
    """The store's lake identity."""
    index: int
    """Its place among the lake's writers (0 first): where its ids are moved when read."""
    schema_version: int
    """The store schema its files follow."""
    store: str
    """The store it was written from (for people; readers do not open it)."""
    generation: int
    """Syncs that changed something, 1 for the first."""
    written_at: str
    """When (ISO, UTC)."""
    watermark_ingest_id: int
    """The store's last ingest id at the sync: later ingests are new to the next one."""
    clusters: tuple[str, ...]
    """Clusters whose rows this writer holds (one writer per cluster per lake)."""
    files: tuple[LakeFile, ...]
    """The current files, every partition's."""
    ingests: tuple[IngestEntry, ...] = ()
    """Which ingests the files hold."""
    coverage: tuple[CoveredWindow, ...] = ()
    """Which windows the accounting covers."""
    retired: tuple[str, ...] = field(default=())
    """Files replaced by this generation, deleted at the next sync (a reader that took the
    previous manifest can still read them meanwhile)."""

    def to_dict(self) -> dict[str, Any]:
        """The JSON written to the lake."""
        return {
            "format": FORMAT,
            "format_version": FORMAT_VERSION,
            "schema_version": self.schema_version,
            "writer": self.writer,
            "index": self.index,
            "store": self.store,
            "generation": self.generation,
            "written_at": self.written_at,
            "watermark_ingest_id": self.watermark_ingest_id,
            "clusters": list(self.clusters),
            "coverage": [c.to_dict() for c in self.coverage],
            "ingests": [i.to_dict() for i in self.ingests],
            "files": [f.to_dict() for f in self.files],
            "retired": list(self.retired),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any], where: Path) -> WriterManifest:
        """Read a writer manifest, refusing a format or schema this gpuyield cannot read."""
        if data.get("format") != FORMAT or data.get("format_version") != FORMAT_VERSION:
            raise InputError(
                f"{where} is not a gpuyield lake manifest of format version {FORMAT_VERSION}",
                hint="write the lake again with this gpuyield: gpuyield lake export --db DB --lake DIR",
            )
        if data["schema_version"] != SCHEMA_VERSION:
            raise InputError(
                f"{where}: the lake holds store schema version {data['schema_version']}; this "
                f"gpuyield reads version {SCHEMA_VERSION}",
                hint="export the store again into a new lake (lake.path) with this gpuyield",
            )
        return cls(
            writer=data["writer"],
            index=int(data["index"]),
            schema_version=int(data["schema_version"]),
            store=data["store"],
            generation=int(data["generation"]),
            written_at=data["written_at"],
            watermark_ingest_id=int(data["watermark_ingest_id"]),
            clusters=tuple(data["clusters"]),
            files=tuple(LakeFile.from_dict(f) for f in data["files"]),
            ingests=tuple(IngestEntry(**i) for i in data["ingests"]),
            coverage=tuple(CoveredWindow(**c) for c in data["coverage"]),
            retired=tuple(data["retired"]),
        )


def writers_dir(lake: Path) -> Path:
    """Where the writers' manifests are."""
    return lake / META_DIR / "writers"


def manifest_path(lake: Path, writer: str) -> Path:
    """One writer's manifest."""
    return writers_dir(lake) / f"{writer}.json"


def read_manifests(lake: Path) -> tuple[WriterManifest, ...]:
    """Every writer's manifest, by index; an error if ``lake`` is no lake."""
    if not lake.is_dir():
        raise InputError(
            f"no lake at {lake}",
            hint="write one first: gpuyield lake export --db DB --lake DIR "
            "(or any gpuyield ingest with --lake DIR)",
        )
    paths = sorted(writers_dir(lake).glob("*.json")) if writers_dir(lake).is_dir() else []
    if not paths:
        raise InputError(
            f"{lake} holds no gpuyield lake (no {META_DIR}/writers/*.json)",
            hint="write one first: gpuyield lake export --db DB --lake DIR",
        )
    manifests = []
    for path in paths:
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as error:
            raise InputError(
                f"cannot read the lake manifest {path}: {error}",
                hint="gpuyield lake check names what is wrong; export the store again to repair",
            ) from None
        manifests.append(WriterManifest.from_dict(data, path))
    return tuple(sorted(manifests, key=lambda m: m.index))


def write_manifest(lake: Path, manifest: WriterManifest) -> None:
    """Replace a writer's manifest in one rename (readers see the old one or the new one)."""
    target = manifest_path(lake, manifest.writer)
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(f".{target.name}.partial")
    with partial.open("w", encoding="utf-8") as handle:
        json.dump(manifest.to_dict(), handle, indent=1)
        handle.flush()
        os.fsync(handle.fileno())
    partial.replace(target)
