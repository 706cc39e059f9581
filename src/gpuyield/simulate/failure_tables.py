"""Cited failure tables per accelerator generation and cluster, and the published cases that check
them (``gpuyield/data/failures/*.toml``).

A table gives one rate, interruptions per 1,000 node-days of wall time, with its source and
derivation; the cause mix stays Table 5 of the Llama 3 paper (the only published per-cause table),
scaled to the table's total (``calibration.LLAMA3_*``). A table may also say how the rate of one
job's interruptions per GPU-hour grows with the job's size (``size_exponent``): Meta's two Hopper
figures, Llama 3 at 16,384 GPUs and FT-HSDP at about 100,000, are 1.7x apart per GPU-hour, which a
constant rate cannot reproduce (see ``tables.toml``).
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from functools import cache
from typing import Any, TypeVar

from gpuyield import tomlfile
from gpuyield.errors import ParseError, UnknownIdError


@dataclass(frozen=True, kw_only=True, slots=True)
class FailureTable:
    """Job interruptions per 1,000 node-days on one cluster or accelerator generation."""

    id: str
    name: str
    #: Accelerator generation (``hopper``, ``ampere``, ``kepler``).
    generation: str
    rate_per_1000_node_days: float
    url: str
    #: What the source states.
    states: str
    #: How the rate follows from the statement.
    derivation: str
    #: primary / secondary / unconfirmed, as in the estimator's catalog.
    status: str
    #: The table a scenario of this generation gets unless it names one.
    generation_default: bool = False
    #: Nodes and days of the observation, where it was one run.
    nodes: int | None = None
    days: float | None = None
    #: A job of G GPUs sees ``rate x (G / reference_gpus) ** size_exponent`` per node (0: constant).
    size_exponent: float = 0.0
    #: Job size at which ``rate_per_1000_node_days`` was observed (with ``size_exponent``).
    reference_gpus: int = 0
    #: GPUs per node of the clusters behind the rate (per GPU-hour = per node-day / this / 24).
    gpus_per_node: int = 8

    def __post_init__(self) -> None:
        if not self.rate_per_1000_node_days > 0:
            raise ValueError(f"table {self.id}: rate_per_1000_node_days must be > 0")
        if self.size_exponent and self.reference_gpus <= 0:
            raise ValueError(f"table {self.id}: size_exponent needs reference_gpus > 0")

    def size_factor(self, gpus: float) -> float:
        """How much a job of ``gpus`` GPUs multiplies the table's rate (1 without a size law)."""
        if not self.size_exponent:
            return 1.0
        return float((gpus / self.reference_gpus) ** self.size_exponent)

    def rate_at(self, gpus: float) -> float:
        """Interruptions per 1,000 node-days of a job of ``gpus`` GPUs."""
        return self.rate_per_1000_node_days * self.size_factor(gpus)

    def per_gpu_hour(self, gpus: float) -> float:
        """Interruptions per GPU-hour of a job of ``gpus`` GPUs."""
        return self.rate_at(gpus) / 1000.0 / self.gpus_per_node / 24.0


@dataclass(frozen=True, kw_only=True, slots=True)
class PublishedCase:
    """One published reliability figure and the job shape that produced it."""

    id: str
    name: str
    #: Failure table the prediction uses.
    table: str
    nodes: int
    days: float
    url: str
    states: str
    #: Published interruption count (checked within its Poisson band), or a lower bound on it.
    published_interruptions: int | None = None
    published_min_interruptions: int | None = None
    #: Published ETTR (checked within ``ettr_tolerance``) or a published lower bound on it.
    published_ettr: float | None = None
    published_min_ettr: float | None = None
    #: Checkpoint interval, its write stall and the restart cost of the job, for ETTR cases.
    interval_s: float = 1800.0
    write_s: float = 0.0
    restart_s: float = 300.0
    #: What the job does on a failure (restart, drop, in-memory) and that policy's costs.
    policy: str = "restart"
    detection_s: float = 120.0
    rejoin_s: float = 3600.0
    replica_nodes: int = 16
    memory_interval_s: float = 60.0
    memory_restart_s: float = 60.0
    gpus_per_node: int = 8
    #: Random stream; cases sharing one see the same failures (common random numbers).
    stream: str = ""
    #: The table came from the same statement: a check of the machinery, not a prediction.
    in_sample: bool = False
    #: Why this case falls outside its band (documented, not hidden).
    expect_outside: str = ""
    #: What the case assumes that the source does not state (restart costs, interval).
    assumes: str = ""

    @property
    def gpus(self) -> int:
        """GPUs of the job."""
        return self.nodes * self.gpus_per_node


#: A failure table or a published case, as ``_build`` makes it.
_T = TypeVar("_T", FailureTable, PublishedCase)


def _load(name: str) -> tomlfile.TomlDocument:
    return tomlfile.read_bundled("failures", name.removesuffix(".toml"))


def _build(cls: type[_T], raw: dict[str, Any], path: str, where: str) -> _T:
    allowed = {f.name for f in fields(cls)}
    unknown = sorted(set(raw) - allowed)
    if unknown:
        raise ParseError(f"unknown keys {unknown}", path=path, field=where)
    try:
        return cls(**raw)
    except (TypeError, ValueError) as error:
        raise ParseError(str(error), path=path, field=where) from error


@cache
def failure_tables() -> dict[str, FailureTable]:
    """Every failure table by id, in file order."""
    doc = _load("tables.toml")
    path, rows = doc.origin, list(doc.data.get("table", []))
    tables = [_build(FailureTable, raw, path, f"table[{i}]") for i, raw in enumerate(rows)]
    return {table.id: table for table in tables}


def get_failure_table(table_id: str) -> FailureTable:
    """The table with this id; an ``UnknownIdError`` lists the closest."""
    tables = failure_tables()
    if table_id not in tables:
        raise UnknownIdError("failure table", table_id, tables)
    return tables[table_id]


def default_table(generation: str) -> FailureTable | None:
    """The generation's default table, if it has one."""
    for table in failure_tables().values():
        if table.generation == generation and table.generation_default:
            return table
    return None


@cache
def published_cases() -> tuple[PublishedCase, ...]:
    """The cases ``simulate validate`` runs."""
    doc = _load("cases.toml")
    path, rows = doc.origin, list(doc.data.get("case", []))
    cases = tuple(_build(PublishedCase, raw, path, f"case[{i}]") for i, raw in enumerate(rows))
    for case in cases:
        get_failure_table(case.table)  # an unknown table id is a data bug
    return cases
