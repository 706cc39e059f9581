"""The research workload: millions of jobs, drawn with numpy, scheduled by a lean event loop.

Research nodes are split into one partition per job size class, in proportion to the class's share
of GPU-time. A job takes free units of its partition: one ``num_gpus`` slice of a node for jobs up
to a node, ``num_gpus / gpus_per_node`` free healthy nodes (any) for larger ones. All jobs of a
partition have the same size, so FIFO never needs a backfill search (``research_queue`` runs
each partition's queue). Node outages take the node's
units offline at detection (its job ends NODE_FAIL and is requeued at the front of the queue, same
job id) until the node is back. Job outcomes (complete, fail, cancel, preempt, requeue, timeout,
OOM, diverge) are drawn up front; only NODE_FAIL (and the PREEMPTED/REQUEUED of lent nodes and
maintenance) comes from the cluster.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gpuyield.simulate.failures import Outages
from gpuyield.simulate.research_layout import (
    _Layout,
    borrower_class,
    expected_jobs,
)
from gpuyield.simulate.research_queue import QueuedJobs, run_class
from gpuyield.simulate.research_states import (
    S_CANCELLED,
    S_COMPLETED,
    S_FAILED,
    S_OOM,
    S_PREEMPTED,
    S_REQUEUED,
    S_TIMEOUT,
)
from gpuyield.simulate.scenario import Scenario

_OUTCOME_CODES = {
    "completed": S_COMPLETED,
    "failed": S_FAILED,
    "preempted": S_PREEMPTED,
    "requeued": S_REQUEUED,
    "timeout": S_TIMEOUT,
    "oom": S_OOM,
    "cancelled": S_CANCELLED,
}
NUM_USERS = 64


@dataclass(frozen=True, kw_only=True, slots=True)
class ResearchJobs:
    """Drawn research jobs (one entry per job id), parallel arrays."""

    job_id: np.ndarray
    cls: np.ndarray
    submit_s: np.ndarray
    #: Run time of the job's final run (its outcome decides how much of the full duration it runs).
    run_s: np.ndarray
    #: Run time of the first run of a REQUEUED job (0 otherwise).
    requeue_after_s: np.ndarray
    outcome: np.ndarray
    diverged: np.ndarray
    user: np.ndarray
    time_limit_s: np.ndarray


@dataclass(frozen=True, kw_only=True, slots=True)
class ResearchRows:
    """``sacct -X -D`` rows of research jobs (end -1: running; start -1: pending)."""

    job: np.ndarray  # index into ResearchJobs
    submit_s: np.ndarray
    start_s: np.ndarray
    end_s: np.ndarray
    state: np.ndarray
    #: Nodes of row i are ``nodes[node_ptr[i]:node_ptr[i + 1]]`` (sorted; empty if never started).
    node_ptr: np.ndarray
    nodes: np.ndarray
    num_gpus: np.ndarray
    requeued: np.ndarray  # True for reruns (Reason BeginTime)

    def __len__(self) -> int:
        return int(self.job.size)

    @property
    def num_nodes(self) -> np.ndarray:
        """Nodes per row."""
        return np.diff(self.node_ptr)

    def nodes_of(self, row: int) -> np.ndarray:
        """Node indices of one row."""
        return self.nodes[self.node_ptr[row] : self.node_ptr[row + 1]]


def lent_node_s(lends: tuple[Lend, ...], start_s: int, end_s: int) -> int:
    """Node-seconds lineage nodes are lent to research in the window."""
    return sum((end_s - start_s) - (lend.held_to_s - lend.held_from_s) for lend in lends)


# The end states of a bad idea found at scale: it fails, runs out of memory, or its user cancels it.
LADDER_BAD_OUTCOMES = ("failed", "oom", "cancelled")
_LADDER_STREAM = 0x1ADD


def skip_end_states(outcomes: list[str], probs: np.ndarray, multiplier: float) -> np.ndarray:
    """End-state probabilities of a job that skipped its rung: the bad outcomes ``multiplier``
    times likelier (at most 99% together), the others scaled down to fill the rest."""
    bad = np.array([o in LADDER_BAD_OUTCOMES for o in outcomes])
    scaled = np.where(bad, probs * multiplier, 0.0)
    total_bad = min(float(scaled.sum()), 0.99)
    if scaled.sum() > 0:
        scaled *= total_bad / scaled.sum()
    good = np.where(bad, 0.0, probs)
    if good.sum() > 0:
        scaled += good * (1 - total_bad) / good.sum()
    return scaled / scaled.sum()


def draw_jobs(
    scenario: Scenario,
    layouts: list[_Layout],
    rng: np.random.Generator,
    first_job_id: int,
    lent_node_s: int = 0,
) -> ResearchJobs:
    """Draw every research job of the window (arrival, duration, outcome); ids in submit order."""
    cfg = scenario.research
    start, end = scenario.start_s, scenario.end_s
    outcomes = list(cfg.end_states)
    probs = np.array([cfg.end_states[o] for o in outcomes], dtype=float)
    probs /= probs.sum()
    codes = np.array([_OUTCOME_CODES[o] for o in outcomes])
    parts: list[tuple[np.ndarray, ...]] = []
    means = expected_jobs(scenario, layouts, lent_node_s)
    for index, lay in enumerate(layouts):
        cls = lay.cls
        if lay.num_units == 0:
            continue
        count = int(rng.poisson(means[index]))
        submit = rng.integers(start, end, size=count, dtype=np.int64)
        full = np.exp(rng.normal(np.log(cls.median_duration_s), cls.duration_sigma, size=count))
        full = np.clip(np.rint(full), 60, cls.time_limit_s).astype(np.int64)
        outcome = codes[rng.choice(len(codes), size=count, p=probs)]
        if cfg.ladder_skip_share > 0 and cls.num_gpus > min(c.num_gpus for c in cfg.classes):
            outcome = _skipped_rungs(scenario, index, outcome, outcomes, probs)
        frac = rng.uniform(0.02, 1.0, size=count)
        partial = np.maximum(np.rint(full * frac).astype(np.int64), 1)
        diverged = rng.random(count) < cfg.diverged_share
        outcome = np.where(diverged, S_CANCELLED, outcome)
        run = np.where(outcome == S_COMPLETED, full, partial)
        run = np.where(outcome == S_TIMEOUT, cls.time_limit_s, run)
        run = np.where(outcome == S_REQUEUED, full, run)
        requeue_after = np.where(outcome == S_REQUEUED, partial, 0)
        parts.append(
            (
                np.full(count, index),
                submit,
                run,
                requeue_after,
                outcome,
                diverged,
                rng.integers(0, NUM_USERS, size=count),
                np.full(count, cls.time_limit_s),
            )
        )
    return _in_submit_order(parts, first_job_id)


def _skipped_rungs(
    scenario: Scenario, index: int, outcome: np.ndarray, outcomes: list[str], probs: np.ndarray
) -> np.ndarray:
    """Class ``index``'s outcomes once the jobs that skipped their rung are drawn again with
    ``skip_end_states``. A stream of its own: every other draw stays as without the knob, so two
    shares differ only in the outcomes of the jobs that skip."""
    cfg = scenario.research
    codes = np.array([_OUTCOME_CODES[o] for o in outcomes])
    count = outcome.size
    own = np.random.default_rng((scenario.seed, index, _LADDER_STREAM))
    skips = own.random(count) < cfg.ladder_skip_share
    skip_probs = skip_end_states(outcomes, probs, cfg.ladder_skip_failure_multiplier)
    redrawn = codes[own.choice(len(codes), size=count, p=skip_probs)]
    return np.where(skips, redrawn, outcome)


def _in_submit_order(parts: list[tuple[np.ndarray, ...]], first_job_id: int) -> ResearchJobs:
    """Each class's columns (class, submit, run, requeue after, outcome, diverged, user, time
    limit) joined and sorted by submit time (then class), numbered from ``first_job_id``."""
    cols = [
        np.concatenate([p[i] for p in parts]) if parts else np.empty(0, dtype=np.int64)
        for i in range(8)
    ]
    order = np.lexsort((cols[0], cols[1]))
    cols = [c[order] for c in cols]
    return ResearchJobs(
        job_id=np.arange(first_job_id, first_job_id + cols[1].size, dtype=np.int64),
        cls=cols[0].astype(np.int64),
        submit_s=cols[1].astype(np.int64),
        run_s=cols[2].astype(np.int64),
        requeue_after_s=cols[3].astype(np.int64),
        outcome=cols[4].astype(np.int64),
        diverged=cols[5].astype(bool),
        user=cols[6].astype(np.int64),
        time_limit_s=cols[7].astype(np.int64),
    )


@dataclass(frozen=True, kw_only=True, slots=True)
class Lend:
    """A lineage node research may use outside ``[held_from_s, held_to_s)`` (its run's time)."""

    node: int
    held_from_s: int
    held_to_s: int


def schedule(
    scenario: Scenario,
    layouts: list[_Layout],
    jobs: ResearchJobs,
    outages: Outages,
    lends: tuple[Lend, ...] = (),
) -> ResearchRows:
    """Run every class's queue through the window; returns all rows.

    ``lends`` add units to the largest single-node class: research jobs there are preempted
    (PREEMPTED, requeued) when the lineage run takes its nodes, and run again after it ends.
    """
    pieces = []
    borrower = borrower_class(layouts)
    for index, lay in enumerate(layouts):
        mine = np.flatnonzero(jobs.cls == index)
        if mine.size == 0 or lay.num_units == 0:
            continue
        # Lent units get the lowest ids, so they are used first (as Slurm fills nodes in order).
        extra_events: list[tuple[int, int, int]] = []
        extra = _lent_units(lay, outages, lends, extra_events) if index == borrower else []
        shift = len(extra)
        events = sorted(
            extra_events + [(t, k, u + shift) for t, k, u in _unit_events(lay, outages)]
        )
        unit_node = np.concatenate((np.asarray(extra, dtype=np.int64), lay.unit_node()))
        queued = _queued_jobs(jobs, mine)
        out = run_class(
            lay.num_units + shift, lay.units_per_job, mine, queued, events, scenario.end_s
        )
        pieces.append(
            (
                out.job,
                out.submit_s,
                out.start_s,
                out.end_s,
                out.state,
                out.num_units,
                unit_node[out.flat_units],
                np.full(out.job.size, lay.cls.num_gpus),
                out.requeued,
            )
        )
    empty = np.empty(0, dtype=np.int64)
    cols = [np.concatenate([p[i] for p in pieces]) if pieces else empty for i in range(9)]
    return ResearchRows(
        job=cols[0],
        submit_s=cols[1],
        start_s=cols[2],
        end_s=cols[3],
        state=cols[4],
        node_ptr=np.concatenate(([0], np.cumsum(cols[5]))).astype(np.int64),
        nodes=cols[6],
        num_gpus=cols[7],
        requeued=cols[8].astype(bool),
    )


def _queued_jobs(jobs: ResearchJobs, mine: np.ndarray) -> QueuedJobs:
    """The jobs ``mine`` of one class, as the queue loop reads them."""
    return QueuedJobs(
        arrivals=jobs.submit_s[mine].tolist(),
        run_s=jobs.run_s[mine].tolist(),
        requeue_after_s=jobs.requeue_after_s[mine].tolist(),
        outcome=jobs.outcome[mine].tolist(),
    )


def _lent_units(
    lay: _Layout, outages: Outages, lends: tuple[Lend, ...], events: list[tuple[int, int, int]]
) -> list[int]:
    """Units on lent nodes (ids from 0); appends their events; returns each unit's node."""
    nodes: list[int] = []
    for lend in lends:
        first = len(nodes)
        nodes.extend([lend.node] * lay.per_node)
        mine = np.flatnonzero(outages.node == lend.node).tolist()
        for u in range(first, first + lay.per_node):
            events.append((lend.held_from_s, 2, u))
            events.append((lend.held_to_s, 0, u))
            for i in mine:
                events.append((int(outages.detect_s[i]), 3 if outages.planned[i] else 1, u))
                events.append((int(outages.back_s[i]), 0, u))
    return nodes


def _unit_events(lay: _Layout, outages: Outages) -> list[tuple[int, int, int]]:
    """(time, kind, unit): 0 online, 1 failed (NODE_FAIL), 2 lent away (PREEMPTED), 3 drained for
    maintenance (REQUEUED); the job holding a unit taken offline is requeued."""
    inside = (outages.node >= lay.first_node) & (outages.node < lay.first_node + lay.num_nodes)
    events: list[tuple[int, int, int]] = []
    width = lay.per_node or 1
    for i in np.flatnonzero(inside).tolist():
        offset = int(outages.node[i]) - lay.first_node
        kind = 3 if outages.planned[i] else 1
        for u in range(offset * width, (offset + 1) * width):
            events.append((int(outages.detect_s[i]), kind, u))
            events.append((int(outages.back_s[i]), 0, u))
    return events
