"""The research workload: millions of jobs, drawn with numpy, scheduled by a lean event loop.

Research nodes are split into one partition per job size class, in proportion to the class's share
of GPU-time. A job takes free units of its partition: one ``num_gpus`` slice of a node for jobs up
to a node, ``num_gpus / gpus_per_node`` free healthy nodes (any) for larger ones. All jobs of a
partition have the same size, so FIFO never needs a backfill search. Node outages take the node's
units offline at detection (its job ends NODE_FAIL and is requeued at the front of the queue, same
job id) until the node is back. Job outcomes (complete, fail, cancel, preempt, requeue, timeout,
OOM, diverge) are drawn up front; only NODE_FAIL (and the PREEMPTED/REQUEUED of lent nodes and
maintenance) comes from the cluster.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from heapq import heappop, heappush

import numpy as np

from gpuyield.simulate.failures import Outages
from gpuyield.simulate.research_layout import (
    _Layout,
    borrower_class,
    expected_jobs,
)
from gpuyield.simulate.scenario import Scenario

# Row state codes (arrays cannot hold strings cheaply); ``STATE_NAMES`` maps them to sacct text.
S_COMPLETED, S_FAILED, S_PREEMPTED, S_REQUEUED, S_TIMEOUT, S_OOM, S_CANCELLED = range(7)
S_NODE_FAIL, S_RUNNING, S_PENDING = 7, 8, 9
STATE_NAMES = (
    "COMPLETED",
    "FAILED",
    "PREEMPTED",
    "REQUEUED",
    "TIMEOUT",
    "OUT_OF_MEMORY",
    "CANCELLED",
    "NODE_FAIL",
    "RUNNING",
    "PENDING",
)
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
            # A stream of its own: every other draw stays as without the knob, so two shares
            # differ only in the outcomes of the jobs that skip.
            own = np.random.default_rng((scenario.seed, index, _LADDER_STREAM))
            skips = own.random(count) < cfg.ladder_skip_share
            skip_probs = skip_end_states(outcomes, probs, cfg.ladder_skip_failure_multiplier)
            redrawn = codes[own.choice(len(codes), size=count, p=skip_probs)]
            outcome = np.where(skips, redrawn, outcome)
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
        out = _run_class(
            lay.num_units + shift, lay.units_per_job, mine, jobs, events, scenario.end_s
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


# How a running job ends when one of its units is taken: node failure, lineage run, maintenance.
_TAKEN = (-1, S_NODE_FAIL, S_PREEMPTED, S_REQUEUED)


def _run_class(
    num_units: int,
    per_job: int,
    mine: np.ndarray,
    jobs: ResearchJobs,
    events: list[tuple[int, int, int]],
    end_s: int,
) -> _ClassRuns:
    """FIFO queue of one class: a job takes ``per_job`` free units (node slices or whole nodes).

    A plain-Python loop kept tight on purpose (it runs millions of jobs): lists bound to locals, a
    heap of free units with lazy deletion, a heap of completions, a deque for the queue. What
    runs once per job stays inline; unit events (failures, repairs) are rarer and have a function
    of their own, as does freeing a run's units (``_release``).
    """
    arrivals, run_s, requeue_after, outcome = (
        a[mine].tolist() for a in (jobs.submit_s, jobs.run_s, jobs.requeue_after_s, jobs.outcome)
    )
    units = _Units.fresh(num_units)
    free, is_free, holder, n_free = units.free, units.is_free, units.holder, num_units
    done: list[tuple[int, int]] = []  # heap of (end, row)
    queue: deque[tuple[int, int, int]] = deque()  # (local job, submit, phase)
    r_job, r_submit, r_start, r_end, r_state, r_units, r_phase = (rows := _Rows()).columns()
    pop, push = heappop, heappush  # locals: the loop calls them per job
    ai, ei, inf, n, n_ev = 0, 0, end_s + 1, len(arrivals), len(events)
    while True:
        t_arr = arrivals[ai] if ai < n else inf
        t_ev = events[ei][0] if ei < n_ev else inf
        t_done = done[0][0] if done else inf
        t = min(t_arr, t_ev, t_done)
        if t >= end_s:
            break
        if t_done == t:
            _, row = pop(done)
            if r_end[row] != -1:
                continue  # ended early (its unit was taken)
            r_end[row] = t
            j, phase = r_job[row], r_phase[row]
            if outcome[j] == S_REQUEUED and phase == 0:
                r_state[row] = S_REQUEUED
                queue.appendleft((j, t, 1))
            else:
                r_state[row] = S_COMPLETED if outcome[j] == S_REQUEUED else outcome[j]
            n_free += _release(r_units[row], units)
        elif t_ev == t:
            n_free += _unit_event(events[ei], units, rows, queue)
            ei += 1
        else:
            queue.append((ai, t_arr, 0))
            ai += 1
        if (ei < n_ev and events[ei][0] == t) or (done and done[0][0] == t):
            continue  # finish every change at this instant first (a node's units fail together)
        while queue and n_free >= per_job:
            taken: list[int] = []
            while len(taken) < per_job:
                u = pop(free)
                if is_free[u]:
                    is_free[u] = False
                    taken.append(u)
            n_free -= per_job
            j, submit, phase = queue.popleft()
            row = len(r_job)
            r_job.append(j)
            r_submit.append(submit)
            r_start.append(t)
            r_end.append(-1)
            r_state.append(S_RUNNING)
            r_units.append(tuple(taken))
            r_phase.append(phase)
            for u in taken:
                holder[u] = row
            length = requeue_after[j] if (outcome[j] == S_REQUEUED and phase == 0) else run_s[j]
            push(done, (t + length, row))
    pending = list(queue) + [(a, arrivals[a], 0) for a in range(ai, n) if arrivals[a] < end_s]
    return rows.finished(pending, arrivals, mine)


@dataclass(slots=True)
class _Units:
    """The units of one class as the queue loop mutates them."""

    free: list[int]
    """Heap of free units; entries may be stale, ``is_free`` is the truth."""
    is_free: list[bool]
    offline: list[int]
    """Open outages per unit (a unit can be in two at once)."""
    holder: list[int]
    """Row holding each unit, -1 for none."""

    @classmethod
    def fresh(cls, num_units: int) -> _Units:
        return cls(
            free=list(range(num_units)),
            is_free=[True] * num_units,
            offline=[0] * num_units,
            holder=[-1] * num_units,
        )


def _release(taken: tuple[int, ...], units: _Units) -> int:
    """A run's units back to the pool (those not offline); how many became free."""
    holder, offline, is_free, free = units.holder, units.offline, units.is_free, units.free
    freed = 0
    for u in taken:
        holder[u] = -1
        if not offline[u]:
            is_free[u] = True
            freed += 1
            heappush(free, u)
    return freed


def _unit_event(
    event: tuple[int, int, int], units: _Units, rows: _Rows, queue: deque[tuple[int, int, int]]
) -> int:
    """A unit going offline (``kind`` > 0: its run ends, taken, and requeues at the front) or
    coming back; the change in free units."""
    t, kind, u = event
    offline, is_free = units.offline, units.is_free
    change = 0
    if kind:
        offline[u] += 1
        if is_free[u]:
            is_free[u] = False
            change -= 1
        row = units.holder[u]
        if row >= 0:
            rows.end[row] = t
            rows.state[row] = _TAKEN[kind]
            queue.appendleft((rows.job[row], t, rows.phase[row]))
            change += _release(rows.units[row], units)
    else:
        offline[u] -= 1
        if offline[u] == 0 and units.holder[u] < 0 and not is_free[u]:
            is_free[u] = True
            change += 1
            heappush(units.free, u)
    return change


@dataclass(frozen=True, kw_only=True, slots=True)
class _ClassRuns:
    """The runs of one class, as arrays (one entry per run; pending jobs have no start)."""

    job: np.ndarray
    """Index into the research jobs."""
    submit_s: np.ndarray
    start_s: np.ndarray
    end_s: np.ndarray
    state: np.ndarray
    num_units: np.ndarray
    """Units each run held."""
    flat_units: np.ndarray
    """Their units, run after run (``num_units`` says where each run's end)."""
    requeued: np.ndarray


@dataclass(slots=True)
class _Rows:
    """Runs as the loop appends them: one list per column."""

    job: list[int] = field(default_factory=list)
    submit: list[int] = field(default_factory=list)
    start: list[int] = field(default_factory=list)
    end: list[int] = field(default_factory=list)
    state: list[int] = field(default_factory=list)
    units: list[tuple[int, ...]] = field(default_factory=list)
    phase: list[int] = field(default_factory=list)

    def columns(
        self,
    ) -> tuple[
        list[int], list[int], list[int], list[int], list[int], list[tuple[int, ...]], list[int]
    ]:
        """The lists, for the loop to bind to locals."""
        return self.job, self.submit, self.start, self.end, self.state, self.units, self.phase

    def finished(
        self, pending: list[tuple[int, int, int]], arrivals: list[int], mine: np.ndarray
    ) -> _ClassRuns:
        """The runs, then the jobs still waiting, as arrays."""
        for j, submit, phase in pending:
            self.job.append(j)
            self.submit.append(submit)
            self.start.append(-1)
            self.end.append(-1)
            self.state.append(S_PENDING)
            self.units.append(())
            self.phase.append(phase)
        local = np.asarray(self.job, dtype=np.int64)
        submit_arr = np.asarray(self.submit, dtype=np.int64)
        requeued = (
            (submit_arr != np.asarray(arrivals, dtype=np.int64)[local])
            | (np.asarray(self.phase, dtype=np.int64) > 0)
            if local.size
            else np.zeros(0, dtype=bool)
        )
        counts = np.fromiter((len(x) for x in self.units), dtype=np.int64, count=len(self.units))
        flat = np.fromiter(
            (u for x in self.units for u in sorted(x)), dtype=np.int64, count=int(counts.sum())
        )
        return _ClassRuns(
            job=mine[local] if local.size else local,
            submit_s=submit_arr,
            start_s=np.asarray(self.start, dtype=np.int64),
            end_s=np.asarray(self.end, dtype=np.int64),
            state=np.asarray(self.state, dtype=np.int64),
            num_units=counts,
            flat_units=flat,
            requeued=requeued,
        )
