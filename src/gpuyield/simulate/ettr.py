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
* ``in-memory``: like restart, but from a peer's in-memory copy (every ``memory_interval_s``) after
  ``memory_restart_s``: in-memory checkpoints as in Gemini (Wang et al., SOSP'23); Google
  DeepMind's Gemini report (arXiv 2312.11805, a different Gemini) credits recovery "from an intact
  model replica" with raising goodput "from 85% to 97%".

Besides node failures, a share of failures needs a person (``manual_delay_s`` more), faults that
a reboot does not clear need a replacement node (``replacement_s`` more, unless a hot spare
stands by), divergence rollbacks go back ``rollback_s`` of progress, and lemon nodes raise the
rate. Every random draw happens before the policy is looked at (``draw``), so the policies of one
sweep point see the same failures (common random numbers).
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
    #: Until the dropped replica rejoins (on a spare, or its node repaired; caught up).
    rejoin_s: float = 3600.0
    replica_nodes: int = 16
    #: Spare nodes held (installed, idle until used): in every policy's installed GPU-time.
    spare_nodes: int = 0
    policy: Policy = Policy.RESTART
    #: Share of failures a person must restart by hand, and the extra delay they take.
    manual_share: float = 0.0
    manual_delay_s: float = 0.0
    #: Share of faults a reboot or reset clears; the rest need a replacement node, which costs
    #: ``replacement_s`` more before a restart (0 when a spare stands in, and always for policy
    #: spares).
    recoverable_share: float = 1.0
    replacement_s: float = 0.0
    #: Divergence rollbacks per day: restart from a checkpoint ``rollback_s`` of progress earlier
    #: (the repeated steps are lost) after ``restart_s``.
    rollbacks_per_day: float = 0.0
    rollback_s: float = 0.0
    #: Policy in-memory: a peer's in-memory copy every ``memory_interval_s``, restart in
    #: ``memory_restart_s`` (in-memory checkpoints, Gemini SOSP'23); disk checkpoints still stall
    #: ``write_s``.
    memory_interval_s: float = 60.0
    memory_restart_s: float = 60.0
    #: Lemon nodes: this share of nodes fails ``lemon_factor`` times as often as the rest.
    lemon_share: float = 0.0
    lemon_factor: float = 1.0
    #: Job size law of the failure table: the per-node rate is ``node_failures_per_day`` at
    #: ``reference_nodes`` and scales as ``(num_nodes / reference_nodes) ** size_exponent``
    #: (0: a constant rate per node), so a sweep over sizes applies it.
    size_exponent: float = 0.0
    reference_nodes: float = 0.0

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
            "manual_delay_s",
            "replacement_s",
            "rollbacks_per_day",
            "rollback_s",
            "memory_restart_s",
            "size_exponent",
            "reference_nodes",
        ):
            if not getattr(self, name) >= 0:
                raise InputError(f"model.{name} must be >= 0", hint="fix the sweep parameters")
        if self.write_s >= self.interval_s:
            raise InputError("model.write_s must be < interval_s", hint="checkpoint less often")
        for name in ("manual_share", "recoverable_share", "lemon_share"):
            if not 0 <= getattr(self, name) <= 1:
                raise InputError(f"model.{name} must be in [0, 1]", hint="a share, e.g. 0.1")
        if not self.lemon_factor >= 1:
            raise InputError("model.lemon_factor must be >= 1", hint="e.g. 5 (lemons fail 5x)")
        if not self.memory_interval_s > 0:
            raise InputError("model.memory_interval_s must be > 0", hint="e.g. 60")
        if self.size_exponent and not self.reference_nodes > 0:
            raise InputError(
                "model.reference_nodes must be > 0 with a size_exponent",
                hint="the job size at which node_failures_per_day was observed",
            )

    @property
    def size_factor(self) -> float:
        """How much the job's size multiplies the per-node rate (1 without a size law)."""
        if not self.size_exponent:
            return 1.0
        return float((self.num_nodes / self.reference_nodes) ** self.size_exponent)

    @property
    def failure_rate_per_s(self) -> float:
        """Job failure rate (N * r, lemons included), per second."""
        lemons = 1.0 + self.lemon_share * (self.lemon_factor - 1.0)
        per_node = self.node_failures_per_day * self.size_factor
        return self.num_nodes * per_node * lemons / SECONDS_PER_DAY


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


@dataclass(frozen=True, kw_only=True, slots=True)
class Draws:
    """Every random draw of one run, made before the policy is looked at, so that all policies
    of a sweep see the same failures (common random numbers)."""

    #: Failure times (s from the start), sorted.
    fails: np.ndarray
    #: Per failure: a person restarts it by hand.
    manual: np.ndarray
    #: Per failure: a reboot or reset clears it (else a node is replaced).
    recoverable: np.ndarray
    #: Divergence rollback times, sorted.
    rollbacks: np.ndarray


def draw(model: JobModel, rng: np.random.Generator) -> Draws:
    """The draws of one run; the same ``rng`` state gives the same draws for every policy."""
    count = int(rng.poisson(model.failure_rate_per_s * model.duration_s))
    fails = np.sort(rng.uniform(0.0, model.duration_s, size=count))
    manual = rng.random(count) < model.manual_share
    recoverable = rng.random(count) < model.recoverable_share
    rate = model.rollbacks_per_day / SECONDS_PER_DAY
    rollbacks = np.sort(
        rng.uniform(0.0, model.duration_s, size=int(rng.poisson(rate * model.duration_s)))
    )
    return Draws(fails=fails, manual=manual, recoverable=recoverable, rollbacks=rollbacks)


def run_model(model: JobModel, rng: np.random.Generator) -> ModelResult:
    """Simulate ``model`` once (vectorised over failures)."""
    return run_drawn(model, draw(model, rng))


def run_drawn(model: JobModel, draws: Draws) -> ModelResult:
    """Simulate ``model`` on given draws (a sweep passes every policy the same ones)."""
    if model.policy is Policy.DROP:
        return _drop(model, draws.fails)
    return _restart(model, draws)


def _restart_costs(model: JobModel, draws: Draws) -> np.ndarray:
    """Seconds from each failure to computing again, by policy and fault kind."""
    if model.policy is Policy.IN_MEMORY:
        base = model.memory_restart_s
    elif model.policy is Policy.SPARES:
        base = model.spare_restart_s
    else:
        base = model.restart_s
    cost = np.full(draws.fails.size, float(base))
    if model.policy is not Policy.SPARES:  # a hot spare replaces the node at once
        cost += np.where(draws.recoverable, 0.0, model.replacement_s)
    return cost + np.where(draws.manual, model.manual_delay_s, 0.0)


def _restart(model: JobModel, draws: Draws) -> ModelResult:
    # Events stop the job: failures, and rollbacks (which also throw away rollback_s of progress).
    times = np.concatenate((draws.fails, draws.rollbacks))
    costs = np.concatenate(
        (_restart_costs(model, draws), np.full(draws.rollbacks.size, float(model.restart_s)))
    )
    order = np.argsort(times, kind="stable")
    times, costs = times[order], costs[order]
    # Segment i runs from the previous event (or 0) to event i; the last one is cut by the end.
    starts = np.concatenate(([0.0], times))
    ends = np.concatenate((times, [model.duration_s]))
    offset = np.concatenate(([0.0], costs))  # the run starts computing at once
    compute = ends - starts - offset
    running = compute > 0
    if model.policy is Policy.IN_MEMORY:
        kept, saves = _in_memory_kept(model, compute, running)
    else:
        full = np.where(running, np.floor(compute / model.interval_s), 0.0)
        kept = full * (model.interval_s - model.write_s)
        # The last segment is not lost: it is cut by the end of the window, not by a failure.
        tail = compute[-1] - full[-1] * model.interval_s if running[-1] else 0.0
        kept[-1] += min(tail, model.interval_s - model.write_s)
        saves = int(full.sum())
    # Progress cannot fall below what the run started with, however far rollbacks go back.
    productive = max(float(kept.sum()) - draws.rollbacks.size * model.rollback_s, 0.0)
    return _result(model, int(draws.fails.size), saves, productive)


def _in_memory_kept(
    model: JobModel, compute: np.ndarray, running: np.ndarray
) -> tuple[np.ndarray, int]:
    """Kept progress per segment when a failure loses only what followed the last peer copy."""
    stall = 1.0 - model.write_s / model.interval_s  # disk checkpoints still stall the job
    snaps = np.where(running, np.floor(compute / model.memory_interval_s), 0.0)
    kept = snaps * model.memory_interval_s * stall
    if running[-1]:
        kept[-1] = compute[-1] * stall  # the end of the window loses nothing
    saves = int(np.floor(np.where(running, compute, 0.0) / model.interval_s).sum())
    return kept, saves


def _drop(model: JobModel, fails: np.ndarray) -> ModelResult:
    """Every replica stalls ``detection_s`` after a failure; then the failed node's replica is out
    until it rejoins. Productive time is the integral, over the window, of "not stalled" times the
    share of replicas training: overlapping stalls count once, and never more replicas are out than
    there are (at a failure every minute, summing each failure's loss counted time twice)."""
    replicas = max(model.num_nodes // model.replica_nodes, 1)
    end = model.duration_s
    stall_end = fails + model.detection_s
    out_end = stall_end + model.rejoin_s
    edges = np.unique(np.clip(np.concatenate(([0.0, end], fails, stall_end, out_end)), 0.0, end))
    starts, widths = edges[:-1], np.diff(edges)
    # Failures with f <= t < f + detection (stalled) and with f + detection <= t < f + detection
    # + rejoin (a replica out), for each piece [t, t + width) between consecutive edges.
    order = np.sort(fails)
    stalled = np.searchsorted(order, starts, side="right") - np.searchsorted(
        np.sort(stall_end), starts, side="right"
    )
    out = np.searchsorted(np.sort(stall_end), starts, side="right") - np.searchsorted(
        np.sort(out_end), starts, side="right"
    )
    training = np.where(stalled > 0, 0.0, 1.0 - np.minimum(out, replicas) / replicas)
    write_share = model.write_s / model.interval_s
    productive = float((training * widths).sum()) * (1.0 - write_share)
    checkpoints = int(model.duration_s // model.interval_s)
    return _result(model, int(fails.size), checkpoints, productive)


def _result(
    model: JobModel, interruptions: int, checkpoints: int, productive: float
) -> ModelResult:
    # The spare pool is installed whichever remedy uses it: every policy pays for it alike.
    installed = model.num_nodes + model.spare_nodes
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
