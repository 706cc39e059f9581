"""One size class's FIFO queue of research jobs on its units: the event loop and its runs.

All jobs of a class have the same size, so FIFO never needs a backfill search. A unit taken
offline (node failure, a lineage run taking a lent node, maintenance) ends the run holding it,
which is requeued at the front of the queue under the same job id.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from heapq import heappop, heappush

import numpy as np

from gpuyield.simulate.research_states import (
    S_COMPLETED,
    S_NODE_FAIL,
    S_PENDING,
    S_PREEMPTED,
    S_REQUEUED,
    S_RUNNING,
)

# How a running job ends when one of its units is taken: node failure, lineage run, maintenance.
_TAKEN = (-1, S_NODE_FAIL, S_PREEMPTED, S_REQUEUED)


def run_class(
    num_units: int,
    per_job: int,
    mine: np.ndarray,
    queued: QueuedJobs,
    events: list[tuple[int, int, int]],
    end_s: int,
) -> ClassRuns:
    """FIFO queue of one class: a job takes ``per_job`` free units (node slices or whole nodes).

    A plain-Python loop kept tight on purpose (it runs millions of jobs): lists bound to locals, a
    heap of free units with lazy deletion, a heap of completions, a deque for the queue. The loop
    picks the next instant; what happens then has a function of its own: a run ending
    (``_finish``), a unit event (failures, repairs: ``_unit_event``), queued jobs starting
    (``_start_queued``, called only when one can start).
    """
    arrivals = queued.arrivals
    units = _Units.fresh(num_units)
    n_free = num_units
    done: list[tuple[int, int]] = []  # heap of (end, row)
    queue: deque[tuple[int, int, int]] = deque()  # (local job, submit, phase)
    rows = _Rows()
    r_end, pop = rows.end, heappop  # locals: the loop reads them per job
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
            n_free += _finish(row, t, queued, rows, units, queue)
        elif t_ev == t:
            n_free += _unit_event(events[ei], units, rows, queue)
            ei += 1
        else:
            queue.append((ai, t_arr, 0))
            ai += 1
        if (ei < n_ev and events[ei][0] == t) or (done and done[0][0] == t):
            continue  # finish every change at this instant first (a node's units fail together)
        if queue and n_free >= per_job:
            n_free = _start_queued(t, n_free, per_job, queued, queue, units, rows, done)
    pending = list(queue) + [(a, arrivals[a], 0) for a in range(ai, n) if arrivals[a] < end_s]
    return rows.finished(pending, arrivals, mine)


@dataclass(frozen=True, kw_only=True, slots=True)
class QueuedJobs:
    """One class's jobs as plain lists (the loop indexes them per job), by local index; ``mine``
    in ``run_class`` maps a local index to the research job."""

    arrivals: list[int]
    run_s: list[int]
    requeue_after_s: list[int]
    outcome: list[int]


def _finish(
    row: int,
    t: int,
    queued: QueuedJobs,
    rows: _Rows,
    units: _Units,
    queue: deque[tuple[int, int, int]],
) -> int:
    """Run ``row`` ends at ``t`` as drawn (a REQUEUED job's first run requeues it at the front);
    its units go back; how many became free."""
    rows.end[row] = t
    j, phase = rows.job[row], rows.phase[row]
    outcome = queued.outcome[j]
    if outcome == S_REQUEUED and phase == 0:
        rows.state[row] = S_REQUEUED
        queue.appendleft((j, t, 1))
    else:
        rows.state[row] = S_COMPLETED if outcome == S_REQUEUED else outcome
    return _release(rows.units[row], units)


def _start_queued(
    t: int,
    n_free: int,
    per_job: int,
    queued: QueuedJobs,
    queue: deque[tuple[int, int, int]],
    units: _Units,
    rows: _Rows,
    done: list[tuple[int, int]],
) -> int:
    """Start queued jobs in FIFO order at ``t`` while ``per_job`` units are free; the units left."""
    free, is_free, holder, pop, push = units.free, units.is_free, units.holder, heappop, heappush
    r_job, r_submit, r_start, r_end = rows.job, rows.submit, rows.start, rows.end
    r_state, r_units, r_phase = rows.state, rows.units, rows.phase
    run_s, requeue_after, outcome = queued.run_s, queued.requeue_after_s, queued.outcome
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
    return n_free


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
class ClassRuns:
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

    def finished(
        self, pending: list[tuple[int, int, int]], arrivals: list[int], mine: np.ndarray
    ) -> ClassRuns:
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
        return ClassRuns(
            job=mine[local] if local.size else local,
            submit_s=submit_arr,
            start_s=np.asarray(self.start, dtype=np.int64),
            end_s=np.asarray(self.end, dtype=np.int64),
            state=np.asarray(self.state, dtype=np.int64),
            num_units=counts,
            flat_units=flat,
            requeued=requeued,
        )


__all__ = ["ClassRuns", "QueuedJobs", "run_class"]
