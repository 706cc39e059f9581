"""`simulate validate`: the failure model against published reliability figures, with sources.

Each case (``gpuyield/data/failures/cases.toml``) runs the failure-only model with a failure table
(its rate at the case's job size) and the published job shape and recovery policy. A published
interruption count is *within* when it lies in the Poisson band of the predicted mean,
``mean +- 4 sqrt(mean)`` (or the band reaches a published lower bound); a published ETTR when the
simulated ETTR is within ``ETTR_TOLERANCE`` (5 points) of it, or above a published lower bound. A
case outside carries the documented reason.

Every case draws from its own random stream (the seed and a key from the case's ``stream``,
default its id), so cases are independent of each other and seeds are independent of each other;
two cases that name the same stream (both policies of FT-HSDP) see the same failures, so their
difference is the policies' (common random numbers).
"""

from __future__ import annotations

import math
import zlib
from dataclasses import dataclass
from typing import Any

import numpy as np

from gpuyield.simulate.ettr import SECONDS_PER_DAY, JobModel, run_model
from gpuyield.simulate.failure_tables import PublishedCase, get_failure_table, published_cases
from gpuyield.simulate.scenario import Policy

#: Width of the Poisson band, in standard deviations (false alarm ~6e-5 per case).
BAND_SIGMAS = 4.0
#: Tolerance on a published ETTR, absolute (5 points).
ETTR_TOLERANCE = 0.05
#: Draws of a case whose ETTRs are averaged: a published ETTR is a long-run figure, and one draw of
#: a few weeks moves by about a point (MegaScale's 28 days: 0.899 to 0.917 over seeds 0-4).
ETTR_DRAWS = 8


@dataclass(frozen=True, kw_only=True, slots=True)
class CaseResult:
    """Predicted against published for one case."""

    case: PublishedCase
    #: Failure table rate at the case's job size, per 1,000 node-days and per GPU-hour.
    rate_per_1000_node_days: float
    rate_per_gpu_hour: float
    #: Expected interruptions (nodes x days x rate).
    predicted_interruptions: float
    #: Interruptions in the first draw of the seed.
    simulated_interruptions: int
    #: Poisson band around the prediction (counts).
    band: tuple[float, float]
    #: Simulated ETTR (kept progress over wall time), mean of ``ETTR_DRAWS`` draws.
    simulated_ettr: float
    within: bool

    @property
    def mtbf_minutes(self) -> float:
        """Expected minutes between the job's interruptions."""
        return 60.0 / (self.rate_per_gpu_hour * self.case.gpus)

    def to_dict(self) -> dict[str, Any]:
        """Plain data for ``--json``."""
        c = self.case
        return {
            "id": c.id,
            "name": c.name,
            "table": c.table,
            "rate_per_1000_node_days": self.rate_per_1000_node_days,
            "rate_per_gpu_hour": self.rate_per_gpu_hour,
            "mtbf_minutes": self.mtbf_minutes,
            "nodes": c.nodes,
            "gpus": c.gpus,
            "days": c.days,
            "policy": c.policy,
            "predicted_interruptions": self.predicted_interruptions,
            "simulated_interruptions": self.simulated_interruptions,
            "published_interruptions": c.published_interruptions,
            "published_min_interruptions": c.published_min_interruptions,
            "band": list(self.band),
            "simulated_ettr": self.simulated_ettr,
            "published_ettr": c.published_ettr,
            "published_min_ettr": c.published_min_ettr,
            "within": self.within,
            "in_sample": c.in_sample,
            "reason_outside": c.expect_outside,
            "assumes": c.assumes,
            "url": c.url,
            "states": c.states,
        }


@dataclass(frozen=True, kw_only=True, slots=True)
class ValidationCases:
    """Every published case's result, as ``gpuyield simulate validate --json`` prints them."""

    cases: tuple[CaseResult, ...]

    def to_dict(self) -> dict[str, Any]:
        """``{"cases": [...]}``, one object per case."""
        return {"cases": [r.to_dict() for r in self.cases]}


def validate_cases(*, seed: int = 0) -> tuple[CaseResult, ...]:
    """Every published case, predicted and checked."""
    return tuple(_run(case, seed) for case in published_cases())


def case_rng(case: PublishedCase, seed: int) -> np.random.Generator:
    """The case's own stream of ``seed``: independent across cases and seeds, shared by a pair."""
    key = zlib.crc32((case.stream or case.id).encode("utf-8"))
    return np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(7, key)))


def case_model(case: PublishedCase) -> JobModel:
    """The failure-only model of a case: the table's rate at its size, its policy and costs."""
    table = get_failure_table(case.table)
    return JobModel(
        num_nodes=case.nodes,
        node_failures_per_day=table.rate_at(case.gpus) / 1000.0,
        duration_s=case.days * SECONDS_PER_DAY,
        interval_s=case.interval_s,
        write_s=case.write_s,
        restart_s=case.restart_s,
        policy=Policy(case.policy),
        detection_s=case.detection_s,
        rejoin_s=case.rejoin_s,
        replica_nodes=case.replica_nodes,
        memory_interval_s=case.memory_interval_s,
        memory_restart_s=case.memory_restart_s,
    )


def _run(case: PublishedCase, seed: int) -> CaseResult:
    table = get_failure_table(case.table)
    rate = table.rate_at(case.gpus)
    model, rng = case_model(case), case_rng(case, seed)
    draws = [run_model(model, rng) for _ in range(ETTR_DRAWS)]
    sim = draws[0]
    ettr = sum(d.ettr for d in draws) / len(draws)
    mean = case.nodes * case.days * rate / 1000.0
    half = BAND_SIGMAS * math.sqrt(mean)
    band = (mean - half, mean + half)
    return CaseResult(
        case=case,
        rate_per_1000_node_days=rate,
        rate_per_gpu_hour=table.per_gpu_hour(case.gpus),
        predicted_interruptions=mean,
        simulated_interruptions=sim.interruptions,
        band=band,
        simulated_ettr=ettr,
        within=all(_checks(case, band, ettr)),
    )


def _checks(case: PublishedCase, band: tuple[float, float], ettr: float) -> list[bool]:
    checks = []
    if case.published_interruptions is not None:
        checks.append(band[0] <= case.published_interruptions <= band[1])
    if case.published_min_interruptions is not None:
        checks.append(band[1] >= case.published_min_interruptions)
    if case.published_ettr is not None:
        checks.append(abs(ettr - case.published_ettr) <= ETTR_TOLERANCE)
    if case.published_min_ettr is not None:
        checks.append(ettr >= case.published_min_ettr)
    return checks


def cases_markdown(results: tuple[CaseResult, ...]) -> str:
    """The table of docs/simulate.md (regenerated, never typed)."""
    lines = [
        "| case | table: per 1,000 node-days (per GPU-hour) | GPUs x days | policy | predicted "
        "| simulated | published | band | ETTR sim | within |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        c = r.case
        lines.append(
            f"| {c.id} | {c.table}: {r.rate_per_1000_node_days:.3g} ({r.rate_per_gpu_hour:.2e}) "
            f"| {c.gpus:,} x {c.days:g} | {c.policy} | {r.predicted_interruptions:,.1f} "
            f"| {r.simulated_interruptions:,} | {_published(c)} "
            f"| {r.band[0]:,.0f}-{r.band[1]:,.0f} | {r.simulated_ettr:.3f} | {_verdict(r)} |"
        )
    return "\n".join(lines) + "\n"


def _published(case: PublishedCase) -> str:
    parts = []
    if case.published_interruptions is not None:
        parts.append(f"{case.published_interruptions:,}")
    if case.published_min_interruptions is not None:
        parts.append(f"> {case.published_min_interruptions:,} interruptions")
    if case.published_ettr is not None:
        parts.append(f"ETTR {case.published_ettr:g}")
    if case.published_min_ettr is not None:
        parts.append(f"ETTR > {case.published_min_ettr:g}")
    return "; ".join(parts)


def _verdict(result: CaseResult) -> str:
    if result.within:
        return "yes (in-sample)" if result.case.in_sample else "yes"
    return "no: documented below" if result.case.expect_outside else "NO"
