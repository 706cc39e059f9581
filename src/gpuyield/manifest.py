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
    checkpoint_save_s = 30                     # stall per checkpoint write (estimated overhead)
    restart_s = 300                            # job start to first step (estimated overhead)
    failure_detection_s = 120                  # fault to FAILED/NODE_FAIL end (lost progress)
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpuyield import parsing, tomlfile
from gpuyield.errors import FieldError, ManifestError, ParseError, UnknownIdError, closest
from gpuyield.families import (
    Family,
    LadderPolicy,
    parse_families,
    parse_ladder,
    re2_hint,
    re2_problem,
)
from gpuyield.fleet import (
    Fleet,
    GpuModelRule,
    Prices,
    parse_gpu_models,
    parse_prices,
)
from gpuyield.manifest_settings import RunSettings, positive_seconds
from gpuyield.sqltext import literal

if TYPE_CHECKING:
    import duckdb

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
    checkpoint_save_s: dict[str, float] = field(default_factory=dict)
    """Per run: seconds training stalls while a checkpoint is written (estimated overhead)."""
    restart_s: dict[str, float] = field(default_factory=dict)
    """Per run: seconds from job start to the first step (estimated start-up overhead)."""
    failure_detection_s: dict[str, float] = field(default_factory=dict)
    """Per run: seconds from a fault to the job's FAILED/NODE_FAIL end (no checkpoint between)."""
    families: tuple[Family, ...] = ()
    """Run families (``[[families]]``, docs/ladder.md)."""
    ladder: LadderPolicy | None = None
    """The scaling-ladder policy; None when the manifest declares neither families nor a ladder."""
    gpu_models: tuple[GpuModelRule, ...] = ()
    """``[[gpu_models]]``: catalog models of nodes the inventory does not name (fleet.py)."""
    prices: Prices | None = None
    """``[prices]``: dollars per GPU-hour; None when the manifest states none."""

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
            | frozenset(self.checkpoint_save_s)
            | frozenset(self.restart_s)
            | frozenset(self.failure_detection_s)
        )

    def interval_s(self, run: str) -> float | None:
        """Checkpoint interval of a run, or the default."""
        return self.checkpoint_interval_s.get(run, self.default_checkpoint_interval_s)

    def to_dict(self) -> dict[str, Any]:
        """The manifest as JSON data (the store keeps it as a document)."""
        data = asdict(self)
        data.update(Fleet(gpu_models=self.gpu_models, prices=self.prices).to_dict())
        return data

    @staticmethod
    def from_dict(data: dict[str, Any]) -> Manifest:
        """Inverse of ``to_dict`` (and of older stores' documents, without the newer keys)."""
        fleet = Fleet.from_dict(data)
        stored = data.get("ladder")
        ladder = (
            None
            if stored is None
            else LadderPolicy(
                rungs=tuple(stored["rungs"]), within_days=float(stored["within_days"])
            )
        )
        return Manifest(
            match=RunMatch(**data["match"]),
            releases=tuple(
                Release(model=r["model"], runs=tuple(r["runs"])) for r in data["releases"]
            ),
            diverged=tuple(DivergedRun(**d) for d in data["diverged"]),
            checkpoint_interval_s=data["checkpoint_interval_s"],
            default_checkpoint_interval_s=data["default_checkpoint_interval_s"],
            checkpoint_save_s=data.get("checkpoint_save_s", {}),
            restart_s=data.get("restart_s", {}),
            failure_detection_s=data.get("failure_detection_s", {}),
            # Stores written before families existed have neither key.
            families=tuple(Family.from_dict(f) for f in data.get("families", [])),
            ladder=ladder,
            # Stores written before the fleet sections have neither key.
            gpu_models=fleet.gpu_models,
            prices=fleet.prices,
        )


def empty_manifest() -> Manifest:
    """No releases: every allocated GPU-second is an experiment, failure or cancellation."""
    return parse_manifest({}, Path("<none>"))


def load_manifest(path: Path, *, tz: str = "UTC") -> Manifest:
    """Read and validate a manifest file."""
    if not path.exists() and not path.is_symlink():
        raise ManifestError(f"{path}: no such manifest file")
    text = tomlfile.read_small_text(path, max_bytes=tomlfile.MAX_TOML_BYTES, what="manifest")
    try:
        data = tomlfile.parse(text, str(path)).data
    except ParseError as error:
        if error.field is not None:  # a number out of range, named with its key
            raise
        raise ManifestError(  # the TOML syntax, or nesting too deep for the parser
            f"{path}: not valid TOML: {error.reason}", hint="see docs/manifest.md for the format"
        ) from None
    return parse_manifest(data, path, tz=tz)


def parse_manifest(data: dict[str, Any], path: Path, *, tz: str = "UTC") -> Manifest:
    """Validate a manifest given as parsed TOML."""
    tomlfile.check_numbers(data, str(path))  # nan, inf and 1e300 anywhere, named
    sections = {"runs", "releases", "diverged", "run_settings"}
    unknown = set(data) - sections - set(_LADDER_SECTIONS) - set(_FLEET_SECTIONS)
    if unknown:
        raise ManifestError(
            f"{path}: unknown section {sorted(unknown)[0]!r}",
            hint="sections are runs, releases, diverged, run_settings, families, ladder, "
            "gpu_models, prices",
        )
    runs = _table(data.get("runs", {}), path, "runs", _RUNS_KEYS)
    match_text = runs.get("match", _DEFAULT_MATCH)
    if not isinstance(match_text, str):
        raise ManifestError(f"{path}: runs.match must be a string, got {match_text!r}")
    match = _parse_match(match_text, path)
    releases = tuple(
        _parse_release(r, path, i)
        for i, r in enumerate(_tables(data.get("releases", []), "releases", path))
    )
    diverged = tuple(
        _parse_diverged(d, path, i, tz)
        for i, d in enumerate(_tables(data.get("diverged", []), "diverged", path))
    )
    settings = RunSettings.from_dict(
        _table(data.get("run_settings", {}), path, "run_settings", None), path=path
    )
    default = runs.get("checkpoint_interval_s")
    _check_released_not_diverged(releases, diverged, path)
    return Manifest(
        match=match,
        releases=releases,
        diverged=diverged,
        checkpoint_interval_s=settings.checkpoint_interval_s,
        default_checkpoint_interval_s=(
            None
            if default is None
            else positive_seconds(default, path, "runs.checkpoint_interval_s")
        ),
        checkpoint_save_s=settings.checkpoint_save_s,
        restart_s=settings.restart_s,
        failure_detection_s=settings.failure_detection_s,
        families=parse_families(data.get("families", []), path),
        ladder=_parse_ladder_section(data, path),
        gpu_models=parse_gpu_models(data.get("gpu_models", []), path),
        prices=parse_prices(data["prices"], path) if "prices" in data else None,
    )


_LADDER_SECTIONS = ("families", "ladder")
_FLEET_SECTIONS = ("gpu_models", "prices")


def _parse_ladder_section(data: dict[str, Any], path: Path) -> LadderPolicy | None:
    """Declaring families alone turns the ladder on with the default rungs."""
    if "ladder" in data:
        return parse_ladder(data["ladder"], path)
    return LadderPolicy() if data.get("families") else None


_RUNS_KEYS = frozenset({"match", "checkpoint_interval_s"})
_RELEASE_KEYS = frozenset({"model", "runs"})
_DIVERGED_KEYS = frozenset({"run", "after"})


def _tables(value: object, key: str, path: Path) -> list[Any]:
    """``value`` of ``key`` when it is an array of tables (``[[releases]]``): anything else
    (``releases = 3``, or a string, whose characters would be read one by one) is refused, not
    iterated."""
    if not isinstance(value, list):
        raise ManifestError(
            f"{path}: {key} must be an array of tables ([[{key}]]), got {value!r}"[:300]
        )
    return value


def _table(
    value: Any, path: Path, where: str, known: frozenset[str] | set[str] | None
) -> dict[str, Any]:
    """A TOML table whose keys are all ``known`` (any keys when None): a misspelt key would
    otherwise be ignored, and the setting it meant silently not applied."""
    if not isinstance(value, dict):
        raise ManifestError(f"{path}: {where} must be a table, got {value!r}")
    unknown = sorted(set(value) - known) if known is not None else []
    if unknown:
        raise ManifestError(
            f"{path}: {where}: unknown key {unknown[0]!r}",
            hint=f"known keys: {', '.join(sorted(known or ()))}; see docs/manifest.md",
        )
    return value


def _check_released_not_diverged(
    releases: tuple[Release, ...], diverged: tuple[DivergedRun, ...], path: Path
) -> None:
    """A run cannot be both in a released model and lost to divergence: which category its GPU
    time belongs to would depend on rule order, not on the user's intent."""
    released = {r for release in releases for r in release.runs}
    both = sorted(released & {d.run for d in diverged})
    if both:
        raise ManifestError(
            f"{path}: run {both[0]!r} is both in a release's runs and in diverged",
            hint="a diverged run's GPU time is lost; remove it from one of the two lists",
        )


def check_engine_regex(
    pattern: str, where: str, con: duckdb.DuckDBPyConnection | None = None
) -> None:
    """Raise ManifestError when DuckDB's regex engine (RE2) rejects ``pattern``, naming the
    construct: Python's re accepts lookarounds and backreferences, RE2 does not, and a rule only
    Python accepts would fail every later report."""
    said = re2_problem(pattern, con)
    if said is not None:
        raise ManifestError(
            f"{where} uses {said}, which the query engine (RE2) does not support",
            hint=re2_hint(said),
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
    check_engine_regex(pattern, f"{path}: runs.match")
    return RunMatch(field=_MATCH_FIELDS[source], pattern=pattern, group=compiled.groupindex["run"])


def _parse_release(item: Any, path: Path, index: int) -> Release:
    where = f"releases[{index}]"
    if not isinstance(item, dict) or not isinstance(item.get("model"), str):
        raise ManifestError(f'{path}: {where} needs model = "name"')
    _table(item, path, where, _RELEASE_KEYS)
    runs = item.get("runs")
    if not isinstance(runs, list) or not runs or not all(isinstance(r, str) for r in runs):
        raise ManifestError(f"{path}: {where}.runs must be a non-empty list of run names")
    return Release(model=item["model"], runs=tuple(runs))


def _parse_diverged(item: Any, path: Path, index: int, tz: str) -> DivergedRun:
    where = f"diverged[{index}]"
    if not isinstance(item, dict) or not isinstance(item.get("run"), str):
        raise ManifestError(f'{path}: {where} needs run = "name"')
    _table(item, path, where, _DIVERGED_KEYS)
    after = item.get("after")
    if after is None:
        return DivergedRun(run=item["run"])
    field_name = f"{where}.after"
    try:
        # TOML's own datetimes arrive parsed; a string is read by the CLI's grammar of times.
        value = parsing.read_instant(after, field=field_name) if isinstance(after, str) else after
        if not isinstance(value, datetime):
            raise FieldError(field_name, "must be a time like 2026-11-30T10:50:00")
        return DivergedRun(run=item["run"], after_s=parsing.epoch_s(value, tz=tz, field=field_name))
    except FieldError as error:
        raise ManifestError(f"{path}: {error.field} {error.problem}") from None


def runs_in_jobs(
    con: duckdb.DuckDBPyConnection, match: RunMatch, among: set[str] | None = None
) -> set[str]:
    """The run names the stored jobs carry under this manifest's match rule (only those in
    ``among`` when given: a large cluster has a million run names, a manifest a few)."""
    column = "comment" if match.field == "comment" else "name"
    names_sql = (
        f"SELECT DISTINCT regexp_extract({column}, ?, {literal(match.group)}) AS run FROM jobs"
    )
    if among is None:
        rows = con.execute(names_sql, [match.pattern]).fetchall()
    else:
        rows = con.execute(
            f"SELECT run FROM ({names_sql}) WHERE run IN (SELECT unnest(?))",
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
    con.execute("INSERT INTO manifests VALUES (?, ?)", [ingest_id, json.dumps(manifest.to_dict())])


def stored_manifest(con: duckdb.DuckDBPyConnection) -> Manifest:
    """The manifest of the latest ingest, or an empty one."""
    rows = con.execute("SELECT document FROM manifests ORDER BY ingest_id DESC LIMIT 1").fetchall()
    if not rows:
        return empty_manifest()
    manifest = Manifest.from_dict(json.loads(rows[0][0]))
    # A store written before rules were checked against the engine: one clear error, fixed by
    # ingesting a corrected manifest (the latest wins), instead of every report failing in SQL.
    try:
        check_engine_regex(manifest.match.pattern, "the stored manifest's runs.match", con)
    except ManifestError as error:
        error.hint = "ingest a corrected manifest (gpuyield ingest slurm --manifest FILE): the latest one is used"
        raise
    return manifest
