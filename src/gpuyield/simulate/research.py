"""The research workload: millions of jobs, drawn with numpy, scheduled by a lean event loop.

Research nodes are split into one partition per job size class, in proportion to the class's share
of GPU-time (a size class's servers are identical, so FIFO within a class never needs backfill: any
free server takes the head of the queue). A server is a ``num_gpus`` slice of a node for small jobs,
or ``num_gpus / gpus_per_node`` consecutive nodes for large ones. Node outages take every server on
the
node offline at detection (its job ends NODE_FAIL and is requeued at the front of the queue, same
job id) until the node is back. Job outcomes (complete, fail, cancel, preempt, requeue, timeout,
OOM,
diverge) are drawn up front; only NODE_FAIL comes from the failure process.
"""

from __future__ import annotations

import heapq
from collections import deque
from dataclasses import dataclass

import numpy as np

from gpuyield.simulate.failures import Outages
from gpuyield.simulate.scenario import JobClass, Scenario

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
# How a running job ends when its server is taken: by a node failure, by a lineage run, by maintenance.
_TAKEN_STATE = (-1, S_NODE_FAIL, S_PREEMPTED, S_REQUEUED)


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
    first_node: np.ndarray
    num_nodes: np.ndarray
    num_gpus: np.ndarray
    requeued: np.ndarray  # True for reruns (Reason BeginTime)

    def __len__(self) -> int:
        return int(self.job.size)


@dataclass(frozen=True, kw_only=True, slots=True)
class _Layout:
    """Servers of one class: node range and how servers map to nodes."""

    cls: JobClass
    first_node: int
    num_nodes: int
    #: Servers per node (small jobs) or 0 when a server spans several nodes.
    per_node: int
    #: Nodes per server (1 for small jobs).
    span: int

    @property
    def num_servers(self) -> int:
        return self.num_nodes * self.per_node if self.per_node else self.num_nodes // self.span

    def server_nodes(self, server: np.ndarray) -> np.ndarray:
        """First node of each server."""
        if self.per_node:
            return self.first_node + server // self.per_node
        return self.first_node + server * self.span


def plan_layout(scenario: Scenario, first_node: int, num_nodes: int) -> list[_Layout]:
    """Split ``num_nodes`` research nodes into class partitions by GPU-time share."""
    gpn = scenario.fleet.gpus_per_node
    classes = scenario.research.classes
    total = sum(c.gpu_time_share for c in classes)
    layouts, cursor = [], first_node
    for index, cls in enumerate(classes):
        span = max(cls.num_gpus // gpn, 1)
        if index == len(classes) - 1:
            nodes = first_node + num_nodes - cursor
        else:
            nodes = round(num_nodes * cls.gpu_time_share / total)
        nodes -= nodes % span
        per_node = gpn // cls.num_gpus if cls.num_gpus <= gpn else 0
        layouts.append(
            _Layout(cls=cls, first_node=cursor, num_nodes=nodes, per_node=per_node, span=span)
        )
        cursor += nodes
    return layouts


def draw_jobs(
    scenario: Scenario, layouts: list[_Layout], rng: np.random.Generator, first_job_id: int
) -> ResearchJobs:
    """Draw every research job of the window (arrival, duration, outcome); ids in submit order."""
    cfg = scenario.research
    gpn = scenario.fleet.gpus_per_node
    start, end = scenario.start_s, scenario.end_s
    outcomes = list(cfg.end_states)
    probs = np.array([cfg.end_states[o] for o in outcomes], dtype=float)
    probs /= probs.sum()
    codes = np.array([_OUTCOME_CODES[o] for o in outcomes])
    parts = []
    for index, lay in enumerate(layouts):
        cls = lay.cls
        if lay.num_servers == 0:
            continue
        mean_full = min(cls.median_duration_s * np.exp(cls.duration_sigma**2 / 2), cls.time_limit_s)
        # Jobs that stop early run half their duration on average (uniform fraction below).
        mean_run = mean_full * (
            probs[outcomes.index("completed")] if "completed" in outcomes else 0
        )
        mean_run += (
            mean_full
            * 0.5
            * (1 - (probs[outcomes.index("completed")] if "completed" in outcomes else 0))
        )
        capacity = lay.num_nodes * gpn * float(end - start)
        count = int(rng.poisson(cfg.load * capacity / (mean_run * cls.num_gpus)))
        submit = rng.integers(start, end, size=count, dtype=np.int64)
        full = np.exp(rng.normal(np.log(cls.median_duration_s), cls.duration_sigma, size=count))
        full = np.clip(np.rint(full), 60, cls.time_limit_s).astype(np.int64)
        outcome = codes[rng.choice(len(codes), size=count, p=probs)]
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

    ``lends`` add servers to the largest single-node class: research jobs there are preempted
    (PREEMPTED, requeued) when the lineage run takes its nodes, and run again after it ends.
    """
    pieces = []
    borrower = max(
        (i for i, lay in enumerate(layouts) if lay.per_node and lay.num_servers),
        key=lambda i: layouts[i].cls.num_gpus,
        default=None,
    )
    for index, lay in enumerate(layouts):
        mine = np.flatnonzero(jobs.cls == index)
        if mine.size == 0 or lay.num_servers == 0:
            continue
        # Lent servers get the lowest ids, so they are used first (as Slurm fills nodes in order).
        extra_events: list[tuple[int, int, int]] = []
        extra = _lent_servers(lay, outages, lends, extra_events) if index == borrower else []
        shift = len(extra)
        events = sorted(
            extra_events + [(t, k, srv + shift) for t, k, srv in _server_events(lay, outages)]
        )
        rows = _run_class(lay.num_servers + shift, mine, jobs, events, scenario.end_s)
        job, submit, start, end, state, server, requeued = rows
        base = lay.server_nodes(np.maximum(server - shift, 0))
        if extra:
            lent = np.asarray(extra, dtype=np.int64)
            base = np.where(server < shift, lent[np.minimum(server, shift - 1)], base)
        pieces.append(
            (
                job,
                submit,
                start,
                end,
                state,
                base,
                np.full(job.size, lay.span),
                np.full(job.size, lay.cls.num_gpus),
                requeued,
            )
        )
    if not pieces:
        empty = np.empty(0, dtype=np.int64)
        return ResearchRows(
            job=empty,
            submit_s=empty,
            start_s=empty,
            end_s=empty,
            state=empty,
            first_node=empty,
            num_nodes=empty,
            num_gpus=empty,
            requeued=empty.astype(bool),
        )
    cols = [np.concatenate([p[i] for p in pieces]) for i in range(9)]
    return ResearchRows(
        job=cols[0],
        submit_s=cols[1],
        start_s=cols[2],
        end_s=cols[3],
        state=cols[4],
        first_node=cols[5],
        num_nodes=cols[6],
        num_gpus=cols[7],
        requeued=cols[8].astype(bool),
    )


def _lent_servers(
    lay: _Layout, outages: Outages, lends: tuple[Lend, ...], events: list[tuple[int, int, int]]
) -> list[int]:
    """Servers on lent nodes (ids from 0); appends their events; returns each server's node."""
    nodes: list[int] = []
    for lend in lends:
        first = len(nodes)
        nodes.extend([lend.node] * lay.per_node)
        mine = np.flatnonzero(outages.node == lend.node).tolist()
        for s in range(first, first + lay.per_node):
            events.append((lend.held_from_s, 2, s))
            events.append((lend.held_to_s, 0, s))
            for i in mine:
                events.append((int(outages.detect_s[i]), 3 if outages.planned[i] else 1, s))
                events.append((int(outages.back_s[i]), 0, s))
    return nodes


def _server_events(lay: _Layout, outages: Outages) -> list[tuple[int, int, int]]:
    """(time, kind, server) sorted: 0 online, 1 failed (NODE_FAIL), 2 lent away (PREEMPTED), 3 drained
    for maintenance (REQUEUED); the running job of a server taken offline is requeued."""
    inside = (outages.node >= lay.first_node) & (outages.node < lay.first_node + lay.num_nodes)
    idx = np.flatnonzero(inside)
    events: list[tuple[int, int, int]] = []
    for i in idx.tolist():
        offset = int(outages.node[i]) - lay.first_node
        if lay.per_node:
            servers = range(offset * lay.per_node, (offset + 1) * lay.per_node)
        else:
            servers = range(offset // lay.span, offset // lay.span + 1)
        # Maintenance drains the node: the admin requeues its jobs (REQUEUED, not NODE_FAIL).
        kind = 3 if outages.planned[i] else 1
        for s in servers:
            events.append((int(outages.detect_s[i]), kind, s))
            events.append((int(outages.back_s[i]), 0, s))
    events.sort()
    return events


def _run_class(
    num_servers: int,
    mine: np.ndarray,
    jobs: ResearchJobs,
    events: list[tuple[int, int, int]],
    end_s: int,
) -> tuple[np.ndarray, ...]:
    """FIFO queue of one class over identical servers; a plain-Python loop kept tight on purpose."""
    arrivals = jobs.submit_s[mine].tolist()
    run_s = jobs.run_s[mine].tolist()
    requeue_after = jobs.requeue_after_s[mine].tolist()
    outcome = jobs.outcome[mine].tolist()
    n = len(arrivals)
    free = list(range(num_servers))
    heapq.heapify(free)
    offline = [0] * num_servers
    running = [-1] * num_servers  # row index of the job on each server
    gen = [0] * num_servers
    done: list[tuple[int, int, int, int]] = []  # heap of (end, server, gen, row)
    queue: deque[tuple[int, int, int]] = deque()  # (local job, submit, phase)
    r_job: list[int] = []
    r_submit: list[int] = []
    r_start: list[int] = []
    r_end: list[int] = []
    r_state: list[int] = []
    r_server: list[int] = []
    r_phase: list[int] = []
    r_requeued: list[int] = []
    ai = ei = 0
    n_ev = len(events)
    inf = end_s + 1
    heappush, heappop = heapq.heappush, heapq.heappop
    while True:
        t_arr = arrivals[ai] if ai < n else inf
        t_ev = events[ei][0] if ei < n_ev else inf
        t_done = done[0][0] if done else inf
        t = min(t_arr, t_ev, t_done)
        if t >= end_s:
            break
        if t_done == t:
            _, s, g, row = heappop(done)
            if g != gen[s]:
                continue
            r_end[row] = t
            running[s] = -1
            j, phase = r_job[row], r_phase[row]
            if outcome[j] == S_REQUEUED and phase == 0:
                r_state[row] = S_REQUEUED
                queue.appendleft((j, t, 1))
            else:
                r_state[row] = S_COMPLETED if outcome[j] == S_REQUEUED else outcome[j]
            if not offline[s]:
                heappush(free, s)
        elif t_ev == t:
            _, kind, s = events[ei]
            ei += 1
            if kind:
                offline[s] += 1
                row = running[s]
                if row >= 0:
                    r_end[row] = t
                    r_state[row] = _TAKEN_STATE[kind]
                    running[s] = -1
                    gen[s] += 1
                    queue.appendleft((r_job[row], t, r_phase[row]))
            else:
                offline[s] -= 1
                if offline[s] == 0 and running[s] < 0:
                    heappush(free, s)
        else:
            queue.append((ai, t_arr, 0))
            ai += 1
        if (ei < n_ev and events[ei][0] == t) or (done and done[0][0] == t):
            continue  # finish every change at this instant first (a node's servers fail together)
        while queue and free:
            s = heappop(free)
            if offline[s] or running[s] >= 0:
                continue  # stale entry: the server went offline or was re-added twice
            j, submit, phase = queue.popleft()
            row = len(r_job)
            r_job.append(j)
            r_submit.append(submit)
            r_start.append(t)
            r_end.append(-1)
            r_state.append(S_RUNNING)
            r_server.append(s)
            r_phase.append(phase)
            r_requeued.append(1 if submit != arrivals[j] or phase else 0)
            running[s] = row
            length = requeue_after[j] if (outcome[j] == S_REQUEUED and phase == 0) else run_s[j]
            heappush(done, (t + length, s, gen[s], row))
    for j, submit, phase in queue:
        r_job.append(j)
        r_submit.append(submit)
        r_start.append(-1)
        r_end.append(-1)
        r_state.append(S_PENDING)
        r_server.append(0)
        r_phase.append(phase)
        r_requeued.append(1 if submit != arrivals[j] or phase else 0)
    while ai < n:
        # Submitted before the window end but never seen by the loop (the loop stops at end_s).
        if arrivals[ai] < end_s:
            r_job.append(ai)
            r_submit.append(arrivals[ai])
            r_start.append(-1)
            r_end.append(-1)
            r_state.append(S_PENDING)
            r_server.append(0)
            r_phase.append(0)
            r_requeued.append(0)
        ai += 1
    local = np.asarray(r_job, dtype=np.int64)
    return (
        mine[local] if local.size else local,
        np.asarray(r_submit, dtype=np.int64),
        np.asarray(r_start, dtype=np.int64),
        np.asarray(r_end, dtype=np.int64),
        np.asarray(r_state, dtype=np.int64),
        np.asarray(r_server, dtype=np.int64),
        np.asarray(r_requeued, dtype=np.int64),
    )
