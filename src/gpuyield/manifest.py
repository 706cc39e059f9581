"""The release manifest: which runs became released models, which diverged, how runs checkpoint.

Format (TOML; documented in ``docs/manifest.md``)::

    [runs]
    match = "comment:run=(?P<run>[^,\\s]+)"     # or "name:<regex>"; the group `run` names the run
    checkpoint_interval_s = 3600               # optional default for every run

    [[releases]]
    model = "chat-v1"
    runs = ["pt-main", "ft-chat"]              # the lineage, pretraining first

    [[diverged]]
    run = "div-wide"
    after = "2026-11-30T10:50:00"              # optional: only GPU time after this is lost

    [run_settings.pt-main]
    checkpoint_interval_s = 1800
"""

from __future__ import annotations

import json
import re
import tomllib
from dataclasses import asdict, dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import duckdb

from gpuyield.errors import ManifestError, UnknownIdError, closest

SOURCE = "manifest"
_DEFAULT_MATCH = "comment:run=(?P<run>[^,\\s]+)"
_MATCH_FIELDS = {"comment": "comment", "name": "name"}


@dataclass(frozen=True, kw_only=True, slots=True)
class RunMatch:
    """How a job names its run: a regex with a group ``run`` applied to a job field."""

    field: str
    """Job field the regex reads: ``comment`` or ``name``."""
    pattern: str
    """The regular expression (Python/RE2 syntax)."""
    group: int
    """Index of the ``run`` group (SQL engines take groups by number)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Release:
    """A released model and the runs it came from."""

    model: str
    """Model name."""
    runs: tuple[str, ...]
    """Its lineage, pretraining first."""


@dataclass(frozen=True, kw_only=True, slots=True)
class DivergedRun:
    """A run whose GPU time was lost to divergence."""

    run: str
    """Run name."""
    after_s: int | None = None
    """Only GPU time from this instant (epoch seconds) is lost; None: all of it."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Manifest:
    """A parsed, validated release manifest."""

    match: RunMatch
    """How jobs name their runs."""
    releases: tuple[Release, ...] = ()
    """Released models."""
    diverged: tuple[DivergedRun, ...] = ()
    """Runs lost to divergence."""
    checkpoint_interval_s: dict[str, float] = field(default_factory=dict)
    """Per run: seconds between checkpoints (estimates lost progress without telemetry)."""
    default_checkpoint_interval_s: float | None = None
    """For runs without their own setting."""

    @property
    def lineage_runs(self) -> frozenset[str]:
        """Every run in some release's lineage."""
        return frozenset(r for release in self.releases for r in release.runs)

    @property
    def named_runs(self) -> frozenset[str]:
        """Every run the manifest mentions."""
        return (
            self.lineage_runs
            | {d.run for d in self.diverged}
            | frozenset(self.checkpoint_interval_s)
        )

    def interval_s(self, run: str) -> float | None:
        """Checkpoint interval of a run, or the default."""
        return self.checkpoint_interval_s.get(run, self.default_checkpoint_interval_s)

    def to_json(self) -> str:
        """Serialise for the store."""
        return json.dumps(asdict(self))

    @staticmethod
    def from_json(text: str) -> Manifest:
        """Inverse of ``to_json``."""
        data = json.loads(text)
        return Manifest(
            match=RunMatch(**data["match"]),
            releases=tuple(
                Release(model=r["model"], runs=tuple(r["runs"])) for r in data["releases"]
            ),
            diverged=tuple(DivergedRun(**d) for d in data["diverged"]),
            checkpoint_interval_s=data["checkpoint_interval_s"],
            default_checkpoint_interval_s=data["default_checkpoint_interval_s"],
        )


def empty_manifest() -> Manifest:
    """No releases: every allocated GPU-second is an experiment, failure or cancellation."""
    return parse_manifest({}, Path("<none>"))


def load_manifest(path: Path, *, tz: str = "UTC") -> Manifest:
    """Read and validate a manifest file."""
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8-sig"))
    except FileNotFoundError:
        raise ManifestError(f"{path}: no such manifest file") from None
    except tomllib.TOMLDecodeError as error:
        raise ManifestError(
            f"{path}: not valid TOML: {error}", hint="see docs/manifest.md for the format"
        ) from None
    return parse_manifest(data, path, tz=tz)


def parse_manifest(data: dict[str, Any], path: Path, *, tz: str = "UTC") -> Manifest:
    """Validate a manifest given as parsed TOML."""
    unknown = set(data) - {"runs", "releases", "diverged", "run_settings"}
    if unknown:
        raise ManifestError(
            f"{path}: unknown section {sorted(unknown)[0]!r}",
            hint="sections are runs, releases, diverged, run_settings",
        )
    runs = data.get("runs", {})
    match = _parse_match(str(runs.get("match", _DEFAULT_MATCH)), path)
    releases = tuple(_parse_release(r, path, i) for i, r in enumerate(data.get("releases", [])))
    diverged = tuple(
        _parse_diverged(d, path, i, tz) for i, d in enumerate(data.get("diverged", []))
    )
    intervals: dict[str, float] = {}
    for run, settings in data.get("run_settings", {}).items():
        unknown_keys = set(settings) - {"checkpoint_interval_s"}
        if unknown_keys:
            raise ManifestError(
                f"{path}: run_settings.{run}: unknown key {sorted(unknown_keys)[0]!r}",
                hint="known: checkpoint_interval_s",
            )
        if "checkpoint_interval_s" in settings:
            intervals[run] = _positive(
                settings["checkpoint_interval_s"], path, f"run_settings.{run}.checkpoint_interval_s"
            )
    default = runs.get("checkpoint_interval_s")
    return Manifest(
        match=match,
        releases=releases,
        diverged=diverged,
        checkpoint_interval_s=intervals,
        default_checkpoint_interval_s=(
            None if default is None else _positive(default, path, "runs.checkpoint_interval_s")
        ),
    )


def _parse_match(text: str, path: Path) -> RunMatch:
    source, sep, pattern = text.partition(":")
    if not sep or source not in _MATCH_FIELDS:
        raise ManifestError(
            f"{path}: runs.match must start with 'comment:' or 'name:', got {text!r}",
            hint='e.g. match = "comment:run=(?P<run>[^,\\\\s]+)"',
        )
    try:
        compiled = re.compile(pattern)
    except re.error as error:
        raise ManifestError(f"{path}: runs.match is not a valid regex: {error}") from None
    if "run" not in compiled.groupindex:
        raise ManifestError(
            f"{path}: runs.match has no group named 'run'",
            hint="write the run's part as (?P<run>...)",
        )
    return RunMatch(field=_MATCH_FIELDS[source], pattern=pattern, group=compiled.groupindex["run"])


def _parse_release(item: Any, path: Path, index: int) -> Release:
    where = f"releases[{index}]"
    if not isinstance(item, dict) or not isinstance(item.get("model"), str):
        raise ManifestError(f'{path}: {where} needs model = "name"')
    runs = item.get("runs")
    if not isinstance(runs, list) or not runs or not all(isinstance(r, str) for r in runs):
        raise ManifestError(f"{path}: {where}.runs must be a non-empty list of run names")
    return Release(model=item["model"], runs=tuple(runs))


def _parse_diverged(item: Any, path: Path, index: int, tz: str) -> DivergedRun:
    where = f"diverged[{index}]"
    if not isinstance(item, dict) or not isinstance(item.get("run"), str):
        raise ManifestError(f'{path}: {where} needs run = "name"')
    after = item.get("after")
    if after is None:
        return DivergedRun(run=item["run"])
    if isinstance(after, str):
        try:
            after = datetime.fromisoformat(after)
        except ValueError:
            raise ManifestError(f"{path}: {where}.after is not an ISO time: {after!r}") from None
    if not isinstance(after, datetime):
        raise ManifestError(f"{path}: {where}.after must be a time like 2026-11-30T10:50:00")
    if after.tzinfo is None:
        after = after.replace(tzinfo=ZoneInfo(tz))
    return DivergedRun(run=item["run"], after_s=int(after.timestamp()))


def _positive(value: Any, path: Path, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        raise ManifestError(f"{path}: {name} must be a positive number of seconds, got {value!r}")
    return float(value)


def runs_in_jobs(
    con: duckdb.DuckDBPyConnection, match: RunMatch, among: set[str] | None = None
) -> set[str]:
    """The run names the stored jobs carry under this manifest's match rule (only those in
    ``among`` when given: a large cluster has a million run names, a manifest a few)."""
    column = "comment" if match.field == "comment" else "name"
    names = f"SELECT DISTINCT regexp_extract({column}, ?, {match.group}) AS run FROM jobs"
    if among is None:
        rows = con.execute(names, [match.pattern]).fetchall()
    else:
        rows = con.execute(
            f"SELECT run FROM ({names}) WHERE run IN (SELECT unnest(?))",
            [match.pattern, sorted(among)],
        ).fetchall()
    return {r[0] for r in rows if r[0]}


def check_runs_exist(manifest: Manifest, con: duckdb.DuckDBPyConnection, path: Path) -> None:
    """Every run the manifest names must appear in the jobs; a typo gets the closest real name."""
    named = set(manifest.named_runs)
    if not named:
        return
    missing = sorted(named - runs_in_jobs(con, manifest.match, among=named))
    if missing:
        # Only now every name: the closest one is the hint.
        error = UnknownIdError("run", missing[0], runs_in_jobs(con, manifest.match))
        error.message = f"{path}: run {missing[0]!r} does not appear in any ingested job"
        raise error


def missing_runs(manifest: Manifest, con: duckdb.DuckDBPyConnection) -> tuple[str, ...]:
    """Runs the manifest names that no stored job carries (yet: a lineage still being trained,
    or a typo), each with the closest real run name when there is one."""
    named = set(manifest.named_runs)
    if not named:
        return ()
    missing = sorted(named - runs_in_jobs(con, manifest.match, among=named))
    if not missing:
        return ()
    known = runs_in_jobs(con, manifest.match)
    described = []
    for run in missing:
        near = closest(run, known, n=1)
        described.append(f"{run!r} (closest: {near[0]!r})" if near else repr(run))
    return tuple(described)


def store_manifest(con: duckdb.DuckDBPyConnection, manifest: Manifest, ingest_id: int) -> None:
    """The latest manifest is the one the ledger uses."""
    con.execute("INSERT INTO manifests VALUES (?, ?)", [ingest_id, manifest.to_json()])


def stored_manifest(con: duckdb.DuckDBPyConnection) -> Manifest:
    """The manifest of the latest ingest, or an empty one."""
    rows = con.execute("SELECT document FROM manifests ORDER BY ingest_id DESC LIMIT 1").fetchall()
    return Manifest.from_json(rows[0][0]) if rows else empty_manifest()
