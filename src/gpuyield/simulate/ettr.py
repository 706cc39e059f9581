"""The failure-only model: one big job under a Poisson failure process, vectorised, plus formulas.

This is the model behind sweeps and the closed-form checks. Failures of a job on ``N`` nodes with a
per-node rate ``r`` form a Poisson process of rate ``N * r`` (independent node failures), so the gaps
between failures are exponential and the whole run-year is a handful of numpy operations:

* ``restart``: every failure stops the job; after ``restart_s`` (detection + requeue + start-up) it
  computes again and saves a checkpoint every ``interval_s`` (``write_s`` of which is the write
  stall). Progress since the last checkpoint is lost (Meta's model, facts.md section 4).
* ``spares``: the same, but a hot spare swaps in: ``spare_restart_s`` instead of ``restart_s``.
* ``drop``: the job stalls ``detection_s``, then runs without the failed node's data-parallel replica
  until it rejoins after ``rejoin_s``; nothing since the last checkpoint is lost.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from gpuyield.errors import InputError
from gpuyield.simulate.scenario import Policy

SECONDS_PER_DAY = 86400.0


@dataclass(frozen=True, kw_only=True, slots=True)
class JobModel:
    """One job under failures (all times in seconds)."""

    num_nodes: int
    #: Failures per node-day (Llama 3 Table 5: 3.79e-3; Meta RSC-1: 6.5e-3).
    node_failures_per_day: float
    duration_s: float
    interval_s: float = 1800.0
    write_s: float = 0.0
    #: Detection + requeue + start-up after a failure (policy restart).
    restart_s: float = 300.0
    #: Detection + swap + start-up with a hot spare (policy spares).
    spare_restart_s: float = 120.0
    #: Stall while the failed replica is dropped (policy drop).
    detection_s: float = 120.0
    #: Until the dropped replica rejoins (replacement found and caught up).
    rejoin_s: float = 3600.0
    replica_nodes: int = 16
    #: Hot spare nodes held (installed, idle) for policy spares.
    spare_nodes: int = 0
    policy: Policy = Policy.RESTART

    def __post_init__(self) -> None:
        for name in ("num_nodes", "duration_s", "interval_s", "replica_nodes"):
            if not getattr(self, name) > 0:
                raise InputError(f"model.{name} must be > 0", hint="fix the sweep parameters")
        for name in (
            "node_failures_per_day",
            "write_s",
            "restart_s",
            "spare_restart_s",
            "detection_s",
            "rejoin_s",
            "spare_nodes",
        ):
            if not getattr(self, name) >= 0:
                raise InputError(f"model.{name} must be >= 0", hint="fix the sweep parameters")
        if self.write_s >= self.interval_s:
            raise InputError("model.write_s must be < interval_s", hint="checkpoint less often")

    @property
    def failure_rate_per_s(self) -> float:
        """Job failure rate (N * r), per second."""
        return self.num_nodes * self.node_failures_per_day / SECONDS_PER_DAY


@dataclass(frozen=True, kw_only=True, slots=True)
class ModelResult:
    """Outcome of one simulated job."""

    interruptions: int
    #: Checkpoints saved (events of the model besides failures).
    checkpoints: int
    productive_s: float
    duration_s: float
    #: Kept progress in GPU-seconds over installed GPU-seconds (job nodes plus spares).
    yield_: float

    @property
    def ettr(self) -> float:
        """Effective training time ratio: kept progress over wall time."""
        return self.productive_s / self.duration_s

    @property
    def mttf_s(self) -> float:
        """Observed mean time to failure of the job (inf without failures)."""
        return self.duration_s / self.interruptions if self.interruptions else math.inf

    @property
    def num_events(self) -> int:
        """Failures plus checkpoints: what an event-per-checkpoint simulator would process."""
        return self.interruptions + self.checkpoints


def run_model(model: JobModel, rng: np.random.Generator) -> ModelResult:
    """Simulate ``model`` once (vectorised over failures)."""
    fails = _failure_times(model, rng)
    if model.policy is Policy.DROP:
        return _drop(model, fails)
    restart = model.spare_restart_s if model.policy is Policy.SPARES else model.restart_s
    return _restart(model, fails, restart)


def _failure_times(model: JobModel, rng: np.random.Generator) -> np.ndarray:
    rate = model.failure_rate_per_s
    count = int(rng.poisson(rate * model.duration_s))
    return np.sort(rng.uniform(0.0, model.duration_s, size=count))


def _restart(model: JobModel, fails: np.ndarray, restart_s: float) -> ModelResult:
    # Segment i runs from the previous failure (or 0) to failure i; the last one is cut by the end.
    starts = np.concatenate(([0.0], fails))
    ends = np.concatenate((fails, [model.duration_s]))
    offset = np.full(starts.size, restart_s)
    offset[0] = 0.0  # the run starts computing at once; start-up is charged to failures only
    compute = ends - starts - offset
    running = compute > 0
    full = np.where(running, np.floor(compute / model.interval_s), 0.0)
    kept = full * (model.interval_s - model.write_s)
    # The last segment is not lost: it is cut by the end of the window, not by a failure.
    tail = compute[-1] - full[-1] * model.interval_s if running[-1] else 0.0
    kept[-1] += min(tail, model.interval_s - model.write_s)
    productive = float(kept.sum())
    return _result(model, int(fails.size), int(full.sum()), productive)


def _drop(model: JobModel, fails: np.ndarray) -> ModelResult:
    replicas = max(model.num_nodes // model.replica_nodes, 1)
    stall = np.minimum(model.detection_s, model.duration_s - fails)
    reduced = np.clip(model.duration_s - fails - model.detection_s, 0.0, model.rejoin_s)
    lost = float(stall.sum() + reduced.sum() / replicas)
    write_share = model.write_s / model.interval_s
    productive = (model.duration_s - lost) * (1.0 - write_share)
    checkpoints = int(model.duration_s // model.interval_s)
    return _result(model, int(fails.size), checkpoints, productive)


def _result(
    model: JobModel, interruptions: int, checkpoints: int, productive: float
) -> ModelResult:
    installed = model.num_nodes + (model.spare_nodes if model.policy is Policy.SPARES else 0)
    return ModelResult(
        interruptions=interruptions,
        checkpoints=checkpoints,
        productive_s=productive,
        duration_s=model.duration_s,
        yield_=productive * model.num_nodes / (model.duration_s * installed),
    )


def young_interval_s(write_s: float, mtbf_s: float) -> float:
    """Young's optimal checkpoint interval sqrt(2 * delta * M)."""
    return math.sqrt(2.0 * write_s * mtbf_s)


def daly_interval_s(write_s: float, mtbf_s: float) -> float:
    """Daly's higher-order optimum (facts.md section 4); M itself when delta >= 2M."""
    if write_s >= 2.0 * mtbf_s:
        return mtbf_s
    ratio = write_s / (2.0 * mtbf_s)
    return math.sqrt(2.0 * write_s * mtbf_s) * (1 + math.sqrt(ratio) / 3 + ratio / 9) - write_s


def meta_expected_ettr(
    num_nodes: int,
    node_failures_per_day: float,
    restart_s: float,
    interval_s: float,
    write_s: float = 0.0,
) -> float:
    """Meta's first-order E[ETTR] = (1 - N r (u0 + dt/2)) / (1 + w/dt) (facts.md section 4)."""
    rate = num_nodes * node_failures_per_day / SECONDS_PER_DAY
    return (1.0 - rate * (restart_s + interval_s / 2.0)) / (1.0 + write_s / interval_s)
