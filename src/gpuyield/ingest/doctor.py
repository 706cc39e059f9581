"""``gpuyield doctor``: check the things that silently ruin the numbers, with the fix for each.

A Slurm without ``AccountingStoreFlags=job_comment`` drops every ``--comment``, so no job names its
run and yield reads 0; without ``gres/gpu`` in ``AccountingStorageTRES`` no job has a GPU count. Both
look like valid, empty results: only a check before trusting the numbers catches them.
"""

from __future__ import annotations

import itertools
import os
import shutil
import tempfile
import time
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

import duckdb

from gpuyield import manifest as manifest_mod
from gpuyield import store
from gpuyield.ingest.slurm_client import Outcome, run_client
from gpuyield.ingest.sources import slurm_clients
from gpuyield.times import iso_utc

_TIMEOUT_S = 60
# `scontrol show config` is about 10 kB; anything near this is not Slurm talking.
_MAX_OUTPUT_BYTES = 16 << 20
# A store not collected for this long is probably a cron that stopped.
_STALE_S = 2 * 86400


class Status(StrEnum):
    """Outcome of one check."""

    OK = "ok"
    WARN = "warn"
    FAIL = "fail"
    SKIPPED = "skipped"


@dataclass(frozen=True, kw_only=True, slots=True)
class Check:
    """One check: what was looked at, what was found, and how to fix it."""

    name: str
    """What is checked."""
    status: Status
    """ok, warn, fail or skipped."""
    detail: str
    """What was found."""
    fix: str = ""
    """How to fix it (empty when ok)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class DoctorReport:
    """Every check, in the order run."""

    checks: tuple[Check, ...]
    """The checks."""

    @property
    def failed(self) -> bool:
        """True when any check failed."""
        return any(c.status is Status.FAIL for c in self.checks)

    def to_dict(self) -> dict[str, object]:
        """JSON-ready form."""
        return {
            "ok": not self.failed,
            "checks": [
                {"name": c.name, "status": c.status.value, "detail": c.detail, "fix": c.fix}
                for c in self.checks
            ],
        }


def run_doctor(
    *,
    db: Path | None = None,
    manifest: Path | None = None,
    slurm_bin: Path | None = None,
    now_s: int | None = None,
) -> DoctorReport:
    """Run every check that applies: Slurm's when its commands are found, the store's with ``db``."""
    checks: list[Check] = []
    with tempfile.TemporaryDirectory(prefix="gpuyield-doctor-") as tmp:
        checks += _slurm_checks(_Runner(slurm_bin, Path(tmp)))
    checks += _environment_checks()
    checks += _store_checks(db, manifest, int(time.time()) if now_s is None else now_s)
    return DoctorReport(checks=tuple(checks))


@dataclass(frozen=True, kw_only=True, slots=True)
class _Answer:
    """What one client command printed, or why it printed nothing usable."""

    ok: bool
    """Exited 0 and printed UTF-8 text."""
    text: str
    """Standard output when ok, else what went wrong (its standard error, or the reason)."""
    no_config: bool = False
    """The client found no Slurm configuration (not a daemon problem)."""


class _Runner:
    def __init__(self, slurm_bin: Path | None, tmp: Path) -> None:
        self.slurm_bin = slurm_bin
        self.tmp = tmp

    def find(self, name: str) -> str | None:
        if self.slurm_bin is not None:
            path = self.slurm_bin / name
            return str(path) if os.access(path, os.X_OK) else None
        return shutil.which(name)

    def run(self, *argv: str) -> _Answer:
        result = run_client(
            argv,
            self.tmp / "output",
            timeout_s=_TIMEOUT_S,
            max_bytes=_MAX_OUTPUT_BYTES,
            env=_doctor_env(),
        )
        if result.outcome is Outcome.NO_CONFIG:
            return _Answer(ok=False, text=result.no_config_line, no_config=True)
        if result.outcome is not Outcome.EXITED:
            return _Answer(ok=False, text=f"{result.outcome.value}: {result.stderr[-300:]}")
        if result.returncode != 0:
            return _Answer(ok=False, text=f"exited {result.returncode}: {result.stderr[-300:]}")
        try:
            return _Answer(ok=True, text=result.output.read_text(encoding="utf-8"))
        except UnicodeDecodeError as error:
            return _Answer(
                ok=False,
                text=f"printed text that is not UTF-8 ({error.reason} at byte {error.start})",
            )


def _doctor_env() -> dict[str, str]:
    """The caller's environment as is (the time zone check reads it), less SLURM_TIME_FORMAT."""
    return {k: v for k, v in os.environ.items() if k != "SLURM_TIME_FORMAT"}


def _slurm_checks(runner: _Runner) -> list[Check]:
    # The clients that print what a collection ingests (gpuyield.ingest.sources).
    paths = {n: runner.find(n) for n in slurm_clients()}
    missing = [n for n, p in paths.items() if p is None]
    if missing:
        return [
            Check(
                name="Slurm commands",
                status=Status.SKIPPED if len(missing) == len(paths) else Status.FAIL,
                detail=f"not found: {', '.join(missing)}",
                fix="run on a Slurm login node, or give --slurm-bin DIR",
            )
        ]
    found = [p for p in paths.values() if p is not None]
    checks = [Check(name="Slurm commands", status=Status.OK, detail=", ".join(found))]
    config = runner.run(str(paths["scontrol"]), "show", "config")
    if config.no_config:
        # Every other client would wait a minute and fail the same way: not a daemon problem.
        return [*checks, _no_config_check(config.text)]
    answer = runner.run(str(paths["sacctmgr"]), "-P", "-n", "show", "cluster", "format=Cluster")
    checks.append(
        Check(name="slurmdbd answers", status=Status.OK, detail=f"clusters: {answer.text.split()}")
        if answer.ok
        else Check(
            name="slurmdbd answers",
            status=Status.FAIL,
            detail=f"sacctmgr show cluster {answer.text}",
            fix="start slurmdbd (systemctl start slurmdbd) and check AccountingStorageHost in "
            "slurm.conf; sacct and collect need it",
        )
    )
    if not config.ok:
        checks.append(
            Check(
                name="slurmctld answers",
                status=Status.FAIL,
                detail=f"scontrol show config {config.text}",
                fix="start slurmctld (systemctl start slurmctld); the next checks need it",
            )
        )
        return checks
    parsed = _parse_config(config.text)
    return [*checks, _config_source_check(parsed), *_config_checks(parsed)]


def _no_config_check(line: str) -> Check:
    where = os.environ.get("SLURM_CONF")
    return Check(
        name="Slurm client configuration",
        status=Status.FAIL,
        detail=f"the clients found none (SLURM_CONF = {where or '(unset)'}): {line}",
        fix="set SLURM_CONF=/path/to/slurm.conf (or, configless, a _slurmctld._tcp DNS SRV "
        "record or SLURM_CONF_SERVER) in the environment collect runs in: cron and systemd do "
        "not read your shell's profile (docs/collect.md, examples/cluster/)",
    )


def _config_source_check(config: dict[str, str]) -> Check:
    return Check(
        name="Slurm client configuration",
        status=Status.OK,
        detail=f"SLURM_CONF = {config.get('SLURM_CONF') or '(configless)'}",
    )


def _parse_config(text: str) -> dict[str, str]:
    config: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep:
            config[key.strip()] = value.strip()
    return config


def _config_checks(config: dict[str, str]) -> list[Check]:
    flags = config.get("AccountingStoreFlags", "")
    tres = config.get("AccountingStorageTRES", "")
    return [
        _expect(
            "job comments stored",
            "job_comment" in flags.lower(),
            f"AccountingStoreFlags = {flags or '(none)'}",
            "add AccountingStoreFlags=job_comment to slurm.conf and run scontrol reconfigure: "
            "without it sacct shows no --comment, every run is untagged and yield reads 0",
        ),
        _expect(
            "GPUs accounted",
            "gres/gpu" in tres.lower(),
            f"AccountingStorageTRES = {tres or '(none)'}",
            "add gres/gpu to AccountingStorageTRES in slurm.conf (with GresTypes=gpu) and "
            "restart slurmctld: without it jobs carry no GPU count (jobs_without_gpu_count)",
        ),
        Check(
            name="cluster name",
            status=Status.OK if config.get("ClusterName") else Status.WARN,
            detail=f"ClusterName = {config.get('ClusterName') or '(none)'}",
            fix="" if config.get("ClusterName") else "give gpuyield collect --cluster NAME",
        ),
    ]


def _expect(name: str, ok: bool, detail: str, fix: str) -> Check:
    return Check(
        name=name, status=Status.OK if ok else Status.FAIL, detail=detail, fix="" if ok else fix
    )


def _environment_checks() -> list[Check]:
    zone = os.environ.get("TZ") or time.tzname[0]
    utc = zone in ("UTC", "UTC0", "Etc/UTC", "GMT", ":UTC")
    time_format = os.environ.get("SLURM_TIME_FORMAT")
    readable = time_format in (None, "", "standard", "%s")
    return [
        Check(
            name="local time zone",
            status=Status.OK if utc else Status.WARN,
            detail=f"TZ = {zone}",
            fix=""
            if utc
            else f"Slurm prints local time: ingest files captured here with --tz {zone} "
            "(gpuyield collect runs Slurm in UTC itself)",
        ),
        Check(
            name="SLURM_TIME_FORMAT",
            status=Status.OK if readable else Status.FAIL,
            detail=f"SLURM_TIME_FORMAT = {time_format or '(unset)'}",
            fix=""
            if readable
            else "unset SLURM_TIME_FORMAT (or set it to standard or %s) before capturing: "
            "other formats cannot be placed in time",
        ),
    ]


def _store_checks(db: Path | None, manifest: Path | None, now_s: int) -> list[Check]:
    if db is None:
        return []
    if not db.exists():
        return [
            Check(
                name="store",
                status=Status.FAIL,
                detail=f"no database at {db}",
                fix=f"collect first: gpuyield collect --db {db} --since YYYY-MM-DD",
            )
        ]
    con = store.connect(db, read_only=True)
    try:
        return [_coverage_check(con, now_s), _manifest_check(con, manifest)]
    finally:
        con.close()


def _coverage_check(con: duckdb.DuckDBPyConnection, now_s: int) -> Check:
    rows = _query(con, "SELECT cluster, start_s, end_s FROM coverage ORDER BY 1, 2, 3")
    if not rows:
        return Check(
            name="coverage",
            status=Status.WARN,
            detail="the store records no captured time",
            fix="ingest with --since/--until (sacct's -S/-E), or use gpuyield collect",
        )
    spans: list[tuple[str, int, int]] = []
    for cluster, start_s, end_s in ((str(r[0]), int(r[1]), int(r[2])) for r in rows):  # type: ignore[call-overload]
        if spans and spans[-1][0] == cluster and start_s <= spans[-1][2]:
            spans[-1] = (cluster, spans[-1][1], max(spans[-1][2], end_s))
        else:
            spans.append((cluster, start_s, end_s))
    gaps = [
        f"{a[0]} {iso_utc(a[2])} .. {iso_utc(b[1])}"
        for a, b in itertools.pairwise(spans)
        if a[0] == b[0]
    ]
    last = max(s[2] for s in spans)
    covered = "; ".join(f"{s[0]} {iso_utc(s[1])} .. {iso_utc(s[2])}" for s in spans)
    if gaps:
        return Check(
            name="coverage",
            status=Status.WARN,
            detail=f"gaps: {'; '.join(gaps)} (covered: {covered})",
            fix="collect the missing time (gpuyield collect --since START), or report around "
            "it; report --allow-gaps shows gaps as not captured",
        )
    stale = now_s - last > _STALE_S
    return Check(
        name="coverage",
        status=Status.WARN if stale else Status.OK,
        detail=f"covered: {covered}",
        fix=f"the last capture ends {iso_utc(last)}: is the collect timer running? "
        "(systemctl list-timers gpuyield-collect)"
        if stale
        else "",
    )


def _manifest_check(con: duckdb.DuckDBPyConnection, path: Path | None) -> Check:
    if path is not None:
        manifest = manifest_mod.load_manifest(path)
    else:
        manifest = manifest_mod.stored_manifest(con)
    if not manifest.named_runs:
        return Check(
            name="manifest runs in the data",
            status=Status.WARN,
            detail="no manifest (or it names no runs): nothing counts as released",
            fix="write one (docs/manifest.md) and pass it with --manifest",
        )
    missing = manifest_mod.missing_runs(manifest, con)
    return Check(
        name="manifest runs in the data",
        status=Status.WARN if missing else Status.OK,
        detail=f"not in any job: {', '.join(missing)}"
        if missing
        else f"all {len(manifest.named_runs)} runs seen",
        fix="check the names (and the manifest's [runs] match rule), or wait for the runs' jobs"
        if missing
        else "",
    )


def _query(con: duckdb.DuckDBPyConnection, sql: str) -> list[tuple[object, ...]]:
    try:
        return con.execute(sql).fetchall()
    except duckdb.CatalogException:
        return []
