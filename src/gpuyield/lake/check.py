"""``gpuyield lake check``: does the lake hold what its manifests say, readable as the store's
tables?

Every listed file must exist with its size, SHA-256 and row count, in the partition its manifest
names, with the columns and types of its store table; no two stores may write one cluster; a
writer's ids must fit its range. Files no manifest lists (a sync that died before its manifest) are
reported but harm nothing: readers never list directories.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from gpuyield import store
from gpuyield.errors import InputError
from gpuyield.lake import layout
from gpuyield.lake.layout import LakeFile, WriterManifest
from gpuyield.sqltext import identifier


@dataclass(frozen=True, kw_only=True, slots=True)
class LakeProblem:
    """One thing wrong with the lake (or, as a warning, odd but harmless)."""

    severity: str
    """``error`` (the check fails) or ``warning``."""
    where: str
    """The file or manifest, relative to the lake."""
    message: str
    """What is wrong."""

    def to_dict(self) -> dict[str, Any]:
        """The ``--json`` shape."""
        return {"severity": self.severity, "where": self.where, "message": self.message}


@dataclass(frozen=True, kw_only=True, slots=True)
class LakeCheck:
    """What ``lake check`` found."""

    lake: str
    """The lake directory."""
    writers: int
    """Stores that wrote it."""
    files: int
    """Files listed by the manifests (each one checked)."""
    rows: int
    """Rows in them."""
    size_bytes: int
    """Their size."""
    clusters: tuple[str, ...]
    """Clusters the lake holds."""
    problems: tuple[LakeProblem, ...] = field(default=())
    """Errors first, then warnings."""

    @property
    def ok(self) -> bool:
        """True when no problem is an error."""
        return not any(p.severity == "error" for p in self.problems)

    def to_dict(self) -> dict[str, Any]:
        """The ``--json`` shape."""
        return {
            "lake": self.lake,
            "ok": self.ok,
            "writers": self.writers,
            "files": self.files,
            "rows": self.rows,
            "size_bytes": self.size_bytes,
            "clusters": list(self.clusters),
            "problems": [p.to_dict() for p in self.problems],
        }


def check_lake(lake: str | Path) -> LakeCheck:
    """Check every manifest and every file of the lake at ``lake``."""
    root = Path(lake)
    problems: list[LakeProblem] = []
    manifests = _manifests(root, problems)
    schemas = _store_schemas()
    listed: set[str] = set()
    for manifest in manifests:
        problems += _check_writer(manifest, manifests)
        for item in manifest.files:
            listed.add(item.path)
            problems += _check_file(root, item, schemas)
        listed.update(manifest.retired)
    problems += _unlisted(root, listed)
    files = [f for m in manifests for f in m.files]
    return LakeCheck(
        lake=str(root),
        writers=len(manifests),
        files=len(files),
        rows=sum(f.rows for f in files),
        size_bytes=sum(f.size_bytes for f in files),
        clusters=tuple(sorted({c for m in manifests for c in m.clusters})),
        problems=tuple(sorted(problems, key=lambda p: (p.severity != "error", p.where))),
    )


def _manifests(root: Path, problems: list[LakeProblem]) -> list[WriterManifest]:
    """The writers' manifests that can be read; each one that cannot is an error."""
    if not root.is_dir():
        raise InputError(f"no lake at {root}", hint="check the lake directory (lake.path)")
    found = (
        sorted(layout.writers_dir(root).glob("*.json")) if layout.writers_dir(root).is_dir() else []
    )
    if not found:
        problems.append(_error(layout.META_DIR, "no writer manifest: this is no gpuyield lake"))
    manifests = []
    for path in found:
        where = str(path.relative_to(root))
        try:
            manifests.append(
                WriterManifest.from_dict(json.loads(path.read_text(encoding="utf-8")), path)
            )
        except (OSError, ValueError, KeyError, TypeError) as error:
            problems.append(_error(where, f"unreadable manifest: {error}"))
        except InputError as error:
            problems.append(_error(where, error.message))
    return manifests


def _check_writer(manifest: WriterManifest, manifests: list[WriterManifest]) -> list[LakeProblem]:
    where = str(Path(layout.META_DIR) / "writers" / f"{manifest.writer}.json")
    problems = []
    if not 0 <= manifest.index < layout.MAX_WRITERS:
        problems.append(_error(where, f"writer index {manifest.index} is outside 0..7"))
    if manifest.watermark_ingest_id >= layout.INGEST_ID_STRIDE:
        problems.append(
            _error(
                where,
                f"ingest ids up to {manifest.watermark_ingest_id} overflow the writer's id range",
            )
        )
    for other in manifests:
        if other.writer <= manifest.writer:
            continue
        if other.index == manifest.index:
            problems.append(_error(where, f"shares writer index {other.index} with {other.writer}"))
        for cluster in sorted(set(other.clusters) & set(manifest.clusters)):
            problems.append(
                _error(where, f"cluster {cluster!r} is written by two stores ({other.writer} too)")
            )
    return problems


def _store_schemas() -> dict[str, pa.Schema]:
    con = store.connect(None)
    try:
        return {
            t: con.sql(f"SELECT * FROM {identifier(t)} LIMIT 0").to_arrow_table().schema
            for t in layout.store_tables()
        }
    finally:
        con.close()


def _check_file(root: Path, item: LakeFile, schemas: dict[str, pa.Schema]) -> list[LakeProblem]:
    """One listed file: where it is, its bytes, its rows, its columns."""
    path = root / item.path
    expected_dir = layout.partition_dir(item.table, item.cluster, item.day)
    if str(Path(item.path).parent) != expected_dir:
        return [_error(item.path, f"is not in its partition {expected_dir}")]
    if not path.is_file():
        return [_error(item.path, "is listed but missing")]
    if path.stat().st_size != item.size_bytes:
        return [
            _error(
                item.path, f"has {path.stat().st_size} bytes, the manifest says {item.size_bytes}"
            )
        ]
    if _sha256(path) != item.sha256:
        return [_error(item.path, "its bytes changed since it was written (SHA-256 differs)")]
    try:
        meta = pq.read_metadata(path)
        schema = pq.read_schema(path)
    except (OSError, pa.ArrowException) as error:
        return [_error(item.path, f"is not readable Parquet: {error}")]
    problems = []
    if meta.num_rows != item.rows:
        problems.append(
            _error(item.path, f"holds {meta.num_rows} rows, the manifest says {item.rows}")
        )
    want = schemas.get(item.table)
    if want is None:
        problems.append(_error(item.path, f"table {item.table!r} is not in the store's schema"))
    elif [(f.name, f.type) for f in schema] != [(f.name, f.type) for f in want]:
        problems.append(_error(item.path, f"its columns differ from the store's {item.table}"))
    return problems


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _unlisted(root: Path, listed: set[str]) -> list[LakeProblem]:
    """Parquet files no manifest lists: left by a sync that died (harmless, readers skip them)."""
    return [
        LakeProblem(
            severity="warning",
            where=str(path.relative_to(root)),
            message="is listed by no manifest (a sync stopped before its manifest?); readers "
            "ignore it, and it can be deleted",
        )
        for table in layout.store_tables()
        if (root / table).is_dir()
        for path in sorted((root / table).rglob("*.parquet"))
        if str(path.relative_to(root)) not in listed
    ]


def _error(where: str, message: str) -> LakeProblem:
    return LakeProblem(severity="error", where=where, message=message)
