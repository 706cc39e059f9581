"""The scaling ladder on the lab's own data: which runs skipped a rung, and what they wasted.

Every run of a family is judged at its *launch*: the start of its first job on its largest GPU
count (a run that grew from 8 to 512 GPUs is judged when it first held 512). It skipped a rung when
no COMPLETED job of its family on at least the lower rung's GPUs ended within ``within_days``
before that launch (``gpuyield.families`` has the rules). The GPU-seconds each run spent come
from the ledger's segments, per category, so they add up with the report's.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import duckdb
import ibis
import ibis.expr.types as ir

from gpuyield.categories import Category
from gpuyield.families import LadderPolicy
from gpuyield.ledger.ledger import Ledger
from gpuyield.ledger.sums import exact_sum, gpu_seconds, json_number
from gpuyield.rungs import family_jobs_sql
from gpuyield.sqltext import identifier
from gpuyield.store import connection_of, duckdb_connect
from gpuyield.times import iso_utc as iso

# What a run's failure to be tested small costs: time that ended in nothing.
WASTE_CATEGORIES = (Category.FAILED.value, Category.CANCELLED.value, Category.DIVERGED.value)


@dataclass(frozen=True, kw_only=True, slots=True)
class LadderRun:
    """One run of a family, judged at its launch."""

    family: str
    """Family name."""
    run: str
    """Run name (``job:<id>`` for a job without one)."""
    gpus: int
    """Its largest GPU count."""
    launch_s: int
    """Start of its first job on ``gpus`` GPUs (epoch seconds)."""
    reached_gpus: int | None
    """GPUs of the largest completed job of the family within the policy's days before launch."""
    required_gpus: int | None
    """GPUs of the completed run the ladder needed first (None on the first rung)."""
    missing_rungs: tuple[int, ...]
    """Rungs below the run that nothing recent reached."""
    outcome: str
    """Slurm state of its last job (COMPLETED, FAILED, CANCELLED, ...)."""
    categories: dict[str, float]
    """GPU-seconds of the run in the ledger's window, per category (zeros left out)."""

    @property
    def skipped(self) -> bool:
        """True when the run launched without its lower rung."""
        return self.required_gpus is not None and (
            self.reached_gpus is None or self.reached_gpus < self.required_gpus
        )

    @property
    def gpu_seconds(self) -> float:
        """GPU-seconds of the run in the window."""
        return sum(self.categories.values())

    @property
    def wasted_gpu_seconds(self) -> float:
        """Failed, cancelled and diverged GPU-seconds of the run in the window."""
        return sum(self.categories.get(c, 0.0) for c in WASTE_CATEGORIES)

    @property
    def skip_text(self) -> str:
        """``8 -> 512``: the highest recent completed GPUs, then the run's rung."""
        reached = "none" if self.reached_gpus is None else str(self.reached_gpus)
        return f"{reached} -> {self.gpus}"

    def to_dict(self) -> dict[str, Any]:
        """The ``--json`` shape of one of a family's ``runs`` (docs/ladder.md)."""
        return {
            "run": self.run,
            "gpus": self.gpus,
            "launched": iso(self.launch_s),
            "skipped": self.skipped,
            "skip": self.skip_text if self.skipped else None,
            "required_gpus": self.required_gpus,
            "reached_gpus": self.reached_gpus,
            "missing_rungs": list(self.missing_rungs),
            "outcome": self.outcome,
            "gpu_seconds": self.gpu_seconds,
            "wasted_gpu_seconds": self.wasted_gpu_seconds,
            "categories": dict(sorted(self.categories.items())),
        }


@dataclass(frozen=True, kw_only=True, slots=True)
class RungClimbed:
    """The first COMPLETED job of a family on one rung."""

    rung: str
    """The rung (GPUs, or ``past N``)."""
    run: str
    """The run it belonged to."""
    gpus: int
    """Its GPUs."""
    end_s: int
    """When it completed."""


@dataclass(frozen=True, kw_only=True, slots=True)
class FamilyLadder:
    """A family's climb and its runs."""

    name: str
    """Family name."""
    climbed: tuple[RungClimbed, ...]
    """Rungs with a completed job, lowest first."""
    runs: tuple[LadderRun, ...]
    """Every run, by launch."""

    @property
    def skipped(self) -> tuple[LadderRun, ...]:
        """Runs launched without their lower rung."""
        return tuple(r for r in self.runs if r.skipped)

    def to_dict(self) -> dict[str, Any]:
        """The ``--json`` shape of one of ``families`` (docs/ladder.md)."""
        return {
            "name": self.name,
            "climbed": [
                {"rung": c.rung, "run": c.run, "gpus": c.gpus, "completed": iso(c.end_s)}
                for c in self.climbed
            ],
            "runs": [r.to_dict() for r in self.runs],
            "skipped_runs": len(self.skipped),
        }


@dataclass(frozen=True, kw_only=True, slots=True)
class WasteSide:
    """Runs on one side of the comparison and what they spent."""

    runs: int
    """Number of runs."""
    gpu_seconds: float
    """Their GPU-seconds in the window."""
    wasted: dict[str, float]
    """Their failed, cancelled and diverged GPU-seconds."""

    @property
    def wasted_gpu_seconds(self) -> float:
        """Failed + cancelled + diverged."""
        return sum(self.wasted.values())

    @property
    def waste_share(self) -> float | None:
        """Wasted / spent (None when they spent nothing)."""
        return self.wasted_gpu_seconds / self.gpu_seconds if self.gpu_seconds > 0 else None

    def to_dict(self) -> dict[str, Any]:
        """The ``--json`` shape of one side, GPU-seconds as ``json_number`` prints them."""
        return {
            "runs": self.runs,
            "gpu_seconds": json_number(self.gpu_seconds),
            "wasted_gpu_seconds": json_number(self.wasted_gpu_seconds),
            "wasted": {k: json_number(v) for k, v in self.wasted.items()},
            "waste_share": self.waste_share,
        }


@dataclass(frozen=True, kw_only=True, slots=True)
class SkippedRungWaste:
    """Waste of runs that skipped a rung against runs that did not: the essay's claim, measured."""

    policy: LadderPolicy
    """The ladder judged against."""
    skipped: WasteSide
    """Runs launched without their lower rung."""
    climbed: WasteSide
    """Runs of families that climbed (first-rung runs included)."""

    def to_dict(self) -> dict[str, Any]:
        """The ``--json`` shape of ``waste_in_skipped_rungs``, shared by the yield and the ladder
        reports (docs/contracts.md)."""
        return {
            "rungs": list(self.policy.rungs),
            "within_days": self.policy.within_days,
            "skipped": self.skipped.to_dict(),
            "climbed": self.climbed.to_dict(),
        }


@dataclass(frozen=True, kw_only=True, slots=True)
class LadderAnalysis:
    """Every family's ladder and the waste comparison."""

    policy: LadderPolicy
    """The manifest's ladder."""
    families: tuple[FamilyLadder, ...] = field(default=())
    """Per family, by name."""

    @property
    def waste(self) -> SkippedRungWaste:
        """The comparison the report shows."""
        runs = [r for f in self.families for r in f.runs]
        return SkippedRungWaste(
            policy=self.policy,
            skipped=_side([r for r in runs if r.skipped]),
            climbed=_side([r for r in runs if not r.skipped]),
        )


def _side(runs: list[LadderRun]) -> WasteSide:
    return WasteSide(
        runs=len(runs),
        gpu_seconds=sum(r.gpu_seconds for r in runs),
        wasted={c: sum(r.categories.get(c, 0.0) for r in runs) for c in WASTE_CATEGORIES},
    )


def analyse_ladder(ledger: Ledger) -> LadderAnalysis | None:
    """The ladder of every family in the store (None when the manifest has no ladder)."""
    policy = ledger.manifest.ladder
    if policy is None:
        return None
    # The backend the ledger was computed on: its segments join only tables of the same one.
    backend = ledger.segments._find_backend()
    with _family_jobs(backend, ledger) as (con, table, family_jobs):
        runs = _runs(con, table, policy)
        spent = _run_categories(ledger.segments, family_jobs)
        climbs = _climbs(con, table, policy)
    families: dict[str, list[LadderRun]] = {}
    for row in runs:
        family, run, gpus, launch_s, reached, outcome = row
        required = policy.required_gpus(gpus)
        families.setdefault(family, []).append(
            LadderRun(
                family=family,
                run=run,
                gpus=gpus,
                launch_s=launch_s,
                reached_gpus=reached,
                required_gpus=required,
                missing_rungs=policy.missing_rungs(gpus, reached) if required else (),
                outcome=outcome,
                categories=spent.get((family, run), {}),
            )
        )
    return LadderAnalysis(
        policy=policy,
        families=tuple(
            FamilyLadder(name=name, climbed=tuple(climbs.get(name, [])), runs=tuple(members))
            for name, members in sorted(families.items())
        ),
    )


@contextmanager
def _family_jobs(
    backend: ibis.BaseBackend, ledger: Ledger
) -> Iterator[tuple[duckdb.DuckDBPyConnection, str, ir.Table]]:
    """Every job of a family, as a DuckDB table (the ladder's queries are DuckDB's SQL) and as a
    table of ``backend`` (to join the ledger's segments).

    On a DuckDB store both are one temporary table. On another engine (Spark) the columns the
    families are found from come to this process, and DuckDB finds them with the same SQL, so
    the families are the same whatever engine the ledger ran on; the family jobs go back as a
    small in-memory table.
    """
    table = f"gy_family_jobs_{uuid.uuid4().hex[:12]}"
    sql = family_jobs_sql(ledger.manifest)
    if backend.name == "duckdb":
        con = connection_of(backend, needed_for="the ladder")
        con.execute(f"CREATE TEMP TABLE {identifier(table)} AS {sql}")
        try:
            yield con, table, backend.table(table)
        finally:
            con.execute(f"DROP TABLE IF EXISTS {identifier(table)}")
        return
    jobs = backend.table("jobs")
    jobs = jobs.filter(jobs.start_s.notnull() & (jobs.num_gpus > 0)).select(*_FAMILY_COLUMNS)
    local = duckdb_connect()
    try:
        local.register("jobs", jobs.to_pyarrow())
        local.execute(f"CREATE TEMP TABLE {identifier(table)} AS {sql}")
        yield local, table, ibis.memtable(local.table(table).to_arrow_table())
    finally:
        local.close()


# What the families are found from (rungs.family_jobs_sql reads these of ``jobs``).
_FAMILY_COLUMNS = (
    "job_key",
    "job_id",
    "job_id_raw",
    "name",
    "comment",
    "state",
    "num_gpus",
    "start_s",
    "end_s",
)


def _runs(con: duckdb.DuckDBPyConnection, table: str, policy: LadderPolicy) -> list[tuple]:
    """Per run: family, run, GPUs, launch, largest recent completed GPUs before it, last state."""
    table_sql = identifier(table)
    query = f"""
        WITH runs AS (
            SELECT family, run, max(num_gpus) AS gpus, arg_max(state, coalesce(end_s, start_s))
                AS outcome
            FROM {table_sql} GROUP BY family, run
        ), launches AS (
            SELECT r.family, r.run, r.gpus, r.outcome, min(j.start_s) AS launch_s
            FROM runs r JOIN {table_sql} j
              ON j.family = r.family AND j.run = r.run AND j.num_gpus = r.gpus
            GROUP BY ALL
        ), completed AS (
            SELECT family, num_gpus AS gpus, end_s FROM {table_sql}
            WHERE state = 'COMPLETED' AND end_s IS NOT NULL
        )
        SELECT l.family, l.run, l.gpus, l.launch_s, max(c.gpus) AS reached, l.outcome
        FROM launches l LEFT JOIN completed c
          ON c.family = l.family AND c.end_s <= l.launch_s AND c.end_s >= l.launch_s - ?
        GROUP BY l.family, l.run, l.gpus, l.launch_s, l.outcome
        ORDER BY l.family, l.launch_s, l.run
    """
    return con.execute(query, [policy.within_s]).fetchall()


def _climbs(
    con: duckdb.DuckDBPyConnection, table: str, policy: LadderPolicy
) -> dict[str, list[RungClimbed]]:
    """Per family, the first completed job on each rung."""
    rows = con.execute(
        f"""SELECT family, run, num_gpus, end_s FROM {identifier(table)}
            WHERE state = 'COMPLETED' AND end_s IS NOT NULL ORDER BY family, end_s, job_key"""
    ).fetchall()
    climbs: dict[str, dict[int, RungClimbed]] = {}
    for family, run, gpus, end_s in rows:
        first = climbs.setdefault(family, {})
        index = policy.rung_index(gpus)
        if index not in first:
            first[index] = RungClimbed(
                rung=policy.rung_label(gpus), run=run, gpus=gpus, end_s=end_s
            )
    return {f: [by_index[k] for k in sorted(by_index)] for f, by_index in climbs.items()}


def _run_categories(
    segments: ir.Table, family_jobs: ir.Table
) -> dict[tuple[str, str], dict[str, float]]:
    """GPU-seconds per (family, run) and category, from the ledger's segments of their jobs."""
    keys = family_jobs.select("job_key", "family", family_run="run")
    joined = segments.join(keys, "job_key")
    gpu_s = (joined.end_s - joined.start_s) * joined.gpus
    totals = joined.group_by(["family", "family_run", "category"]).aggregate(gpu_s=exact_sum(gpu_s))
    spent: dict[tuple[str, str], dict[str, float]] = {}
    rows = totals.to_pyarrow().to_pylist()
    for row in sorted(rows, key=lambda r: (r["family"], r["family_run"], r["category"])):
        value = gpu_seconds(row["gpu_s"])
        if abs(value) > 1e-9:
            spent.setdefault((row["family"], row["family_run"]), {})[row["category"]] = value
    return spent
