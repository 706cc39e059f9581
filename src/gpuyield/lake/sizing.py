"""``gpuyield lake size``: the cores a fleet-year's report needs, from the lake benchmark's costs.

``python -m bench lake`` measures each engine's report on two sizes of each input (jobs; a
cluster-day of per-GPU samples) on the same 2 cores, and writes a straight line per engine and
input into ``gpuyield/data/calibration/lake-costs.toml``: a fixed part (start-up, planning, the
small queries every report runs) and seconds per million rows on one core. Here those lines meet a
fleet: a year of its jobs and samples, the cores that report it within the time asked, and whether
one large machine running DuckDB does it instead.

Assumptions (each printed with the result): work per row divides evenly over cores (Spark's
executors, DuckDB's threads); the fixed part does not, and a report pays it once; the fleet's jobs per GPU-year and its
sample interval are what the flags say.
"""

from __future__ import annotations

import math
import tomllib
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

from gpuyield.errors import FieldError

#: Jobs a GPU runs in a year: the benchmark's 100k-GPU cluster runs 1M jobs a month (its job mix
#: follows Meta's RSC-1, Kokolis et al., arXiv 2410.21680), 122 a GPU-year.
JOBS_PER_GPU_YEAR = 122
SECONDS_PER_YEAR = 365 * 86_400
ENGINES = ("store", "duckdb_lake", "spark")


@dataclass(frozen=True, kw_only=True, slots=True)
class Line:
    """Report seconds of one engine and input: ``fixed_s`` + ``s_per_million_per_core`` x
    millions of rows / cores."""

    fixed_s: float
    s_per_million_per_core: float
    peak_mb_per_million: float
    """Peak resident memory per million rows, at the larger size measured."""

    def seconds(self, rows: float, cores: int) -> float:
        """Report time of ``rows`` rows on ``cores`` cores."""
        return self.fixed_s + self.s_per_million_per_core * rows / 1e6 / cores


@dataclass(frozen=True, kw_only=True, slots=True)
class LakeCosts:
    """What ``python -m bench lake`` measured."""

    measured_on: str
    machine: str
    jobs: dict[str, Line]
    """Per engine, for jobs."""
    samples: dict[str, Line]
    """Per engine, for utilization samples (their jobs' cost apart)."""


def load_costs() -> LakeCosts:
    """The bundled measurements (``data/calibration/lake-costs.toml``)."""
    path = resources.files("gpuyield").joinpath("data/calibration/lake-costs.toml")
    data = tomllib.loads(path.read_text(encoding="utf-8"))

    def lines(kind: str) -> dict[str, Line]:
        return {e: Line(**data[kind][e]) for e in ENGINES}

    return LakeCosts(
        measured_on=data["source"]["measured_on"],
        machine=data["source"]["machine"],
        jobs=lines("jobs"),
        samples=lines("samples"),
    )


@dataclass(frozen=True, kw_only=True, slots=True)
class FleetSizing:
    """One fleet-year: its rows, and the cores each engine needs to report it in time."""

    gpus: int
    jobs: int
    """Jobs in a year."""
    samples: int
    """Per-GPU samples in a year."""
    spark_cores: int | None
    """Executor cores Spark needs (None: its fixed part alone is over the time)."""
    duckdb_cores: int | None
    """Cores one machine running DuckDB (on the lake) needs (None: as above)."""
    duckdb_memory_gb: float
    """DuckDB's peak memory for it (the benchmark's per-row peak, scaled)."""
    one_machine: bool
    """DuckDB's cores and memory fit the one large machine asked about."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Sizing:
    """``gpuyield lake size``'s result."""

    minutes: float
    sample_every_s: int
    jobs_per_gpu_year: int
    machine_cores: int
    machine_memory_gb: float
    costs: LakeCosts
    fleets: tuple[FleetSizing, ...] = field(default=())

    def to_dict(self) -> dict[str, Any]:
        """The ``--json`` shape."""
        return {
            "minutes": self.minutes,
            "sample_every_s": self.sample_every_s,
            "jobs_per_gpu_year": self.jobs_per_gpu_year,
            "one_machine": {"cores": self.machine_cores, "memory_gb": self.machine_memory_gb},
            "measured_on": self.costs.measured_on,
            "measured_machine": self.costs.machine,
            "fleets": [
                {
                    "gpus": f.gpus,
                    "jobs": f.jobs,
                    "samples": f.samples,
                    "spark_executor_cores": f.spark_cores,
                    "duckdb_cores": f.duckdb_cores,
                    "duckdb_memory_gb": round(f.duckdb_memory_gb, 1),
                    "one_machine": f.one_machine,
                }
                for f in self.fleets
            ],
        }


def _cores(
    jobs: Line, samples: Line, n_jobs: float, n_samples: float, seconds: float
) -> int | None:
    """The fewest cores that report both within ``seconds`` (None: the fixed part alone is over).

    One report opens the engine and plans its queries once: the fixed part is the larger of the
    two lines' (each was measured on a whole report), not their sum."""
    left = seconds - max(jobs.fixed_s, samples.fixed_s)
    work = (
        jobs.s_per_million_per_core * n_jobs / 1e6
        + samples.s_per_million_per_core * n_samples / 1e6
    )
    if left <= 0:
        return None
    return max(1, math.ceil(work / left))


def size_fleets(
    gpus: list[int],
    *,
    minutes: float = 10.0,
    sample_every_s: int = 60,
    jobs_per_gpu_year: int = JOBS_PER_GPU_YEAR,
    machine_cores: int = 64,
    machine_memory_gb: float = 512.0,
    costs: LakeCosts | None = None,
) -> Sizing:
    """Cores for a year of each fleet's jobs and samples, reported within ``minutes``."""
    _check(gpus, minutes, sample_every_s, jobs_per_gpu_year, machine_cores)
    costs = costs or load_costs()
    fleets = []
    for count in gpus:
        n_jobs = count * jobs_per_gpu_year
        n_samples = count * SECONDS_PER_YEAR // sample_every_s
        duck = _cores(
            costs.jobs["duckdb_lake"], costs.samples["duckdb_lake"], n_jobs, n_samples, minutes * 60
        )
        memory_gb = (
            costs.jobs["duckdb_lake"].peak_mb_per_million * n_jobs / 1e6
            + costs.samples["duckdb_lake"].peak_mb_per_million * n_samples / 1e6
        ) / 1024
        fleets.append(
            FleetSizing(
                gpus=count,
                jobs=n_jobs,
                samples=n_samples,
                spark_cores=_cores(
                    costs.jobs["spark"], costs.samples["spark"], n_jobs, n_samples, minutes * 60
                ),
                duckdb_cores=duck,
                duckdb_memory_gb=memory_gb,
                one_machine=duck is not None
                and duck <= machine_cores
                and memory_gb <= machine_memory_gb,
            )
        )
    return Sizing(
        minutes=minutes,
        sample_every_s=sample_every_s,
        jobs_per_gpu_year=jobs_per_gpu_year,
        machine_cores=machine_cores,
        machine_memory_gb=machine_memory_gb,
        costs=costs,
        fleets=tuple(fleets),
    )


def _check(
    gpus: list[int], minutes: float, every_s: int, jobs_per_gpu_year: int, machine_cores: int
) -> None:
    if not gpus or any(g <= 0 for g in gpus):
        raise FieldError("lake_size.gpus", "must be one or more counts > 0", example="100000")
    if minutes <= 0:
        raise FieldError("lake_size.minutes", "must be > 0", example="10")
    if every_s <= 0:
        raise FieldError("lake_size.sample_every_s", "must be > 0", example="60")
    if jobs_per_gpu_year < 0:
        raise FieldError("lake_size.jobs_per_gpu_year", "must be >= 0", example="122")
    if machine_cores <= 0:
        raise FieldError("lake_size.machine_cores", "must be > 0", example="64")
