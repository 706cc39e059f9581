"""Release-lineage runs: one big job on its own node group, through failures, restarts and stops.

A job's timeline (start-up, compute, checkpoints) is fixed by the ledger's contract and lives in
``job_timeline``; progress kept at checkpoint ``k`` is ``k*(tau-delta) - U``. A failure loses
what was computed since the last saved checkpoint; the job ends when Slurm notices (NODE_FAIL at
detection, FAILED after the software detection time), is requeued (NODE_FAIL, same job id) or
resubmitted (FAILED, planned stop: new job id), and starts again after the policy's wait.

Truth is booked here with the ledger's rules (docs/contracts.md), because only this module knows
where the checkpoints are. It is what happened, telemetry or not: without telemetry the ledger
estimates the same quantities from the manifest's run_settings.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gpuyield.simulate.failures import HARDWARE_CAUSES, SOFTWARE_CAUSES, Outages
from gpuyield.simulate.interruptions import draw_interruptions
from gpuyield.simulate.job_timeline import Stop, Timeline, telemetry_lines
from gpuyield.simulate.node_pool import NodePool
from gpuyield.simulate.records import (
    CANCELLED_BY_ADMIN,
    CANCELLED_BY_USER,
    COMPLETED,
    FAILED,
    NODE_FAIL,
    PENDING,
    RUNNING,
    JobRow,
    Tally,
)
from gpuyield.simulate.scenario import LineageConfig, Policy, Scenario, SparesFor


@dataclass(frozen=True, kw_only=True, slots=True)
class LineageResult:
    """What one lineage run did in the window."""

    run: str
    release: str
    rows: tuple[JobRow, ...]
    #: Telemetry JSON lines (``telemetry/<run>.jsonl``), empty when telemetry is off.
    telemetry: tuple[str, ...]
    #: Truth GPU-seconds of this run's jobs by the ledger's rules.
    tally: Tally
    #: Unexpected interruptions by cause id.
    interruptions: dict[str, int]
    planned_interruptions: int
    #: Progress kept (seconds of the whole job's compute).
    productive_s: int
    #: Submit of the first job to completion (or the window end).
    wall_s: int
    #: Node-seconds the job was running (exposure of the failure process).
    running_node_s: int
    completed_s: int | None
    #: The first Slurm job id after this run's jobs (the next run numbers on from it).
    next_job_id: int
    #: Divergence rollbacks (restarts from an earlier checkpoint).
    rollbacks: int = 0

    @property
    def effective_training_time(self) -> float:
        """Share of the run's wall time that became kept progress (Meta's ETTR)."""
        return self.productive_s / self.wall_s if self.wall_s else 0.0


def simulate_lineage(
    scenario: Scenario,
    run: LineageConfig,
    group: list[int],
    spares: list[int],
    outages: Outages,
    rng: np.random.Generator,
    next_job_id: int,
) -> LineageResult:
    """Simulate one lineage run on ``group`` (+ ``spares``), numbering its jobs from ``next_job_id``."""
    sim = _RunSim(scenario, run, group, spares, outages, rng, next_job_id)
    sim.simulate()
    return sim.result()


class _RunSim:
    """The event loop of one run: a handful of jobs, a few hundred interruptions."""

    def __init__(
        self,
        scenario: Scenario,
        run: LineageConfig,
        group: list[int],
        spares: list[int],
        outages: Outages,
        rng: np.random.Generator,
        next_job_id: int,
    ) -> None:
        self.sc, self.run = scenario, run
        self.gpn = scenario.fleet.gpus_per_node
        self.end = scenario.end_s
        self.submit = scenario.start_s + round(run.start_day * 86400)
        self.need = scenario.run_nodes(run)
        self.active = list(group)
        self.active_set = set(group)
        # Maintenance never covers lineage groups (Scenario checks it); keep failures only anyway.
        members = np.isin(outages.node, np.asarray(group + spares, dtype=np.int64))
        members &= ~outages.planned
        self.hw = Outages(**{k: getattr(outages, k)[members] for k in Outages.__slots__})
        self.pool = NodePool(self.hw, spares)
        self.draws = draw_interruptions(
            scenario, run, nodes=self.need, submit_s=self.submit, end_s=self.end, rng=rng
        )
        self.rollback_count = 0
        self.work_left = scenario.work_s(run)
        self.next_job_id = next_job_id
        self.rows: list[JobRow] = []
        self.lines: list[str] = []
        self.tally = Tally()
        self.interruptions: dict[str, int] = {}
        self.planned_count = 0
        self.productive = 0
        self.running_node_s = 0
        self.debt = 0
        self.completed: int | None = None

    # -- the loop -------------------------------------------------------------------------------
    def simulate(self) -> None:
        if self.submit >= self.end:
            return
        job_id, submit, wait, reason = self._new_id(), self.submit, 0, "None"
        while True:
            got = self.pool.fill(self.active, self.active_set, submit + wait, self.need)
            self.active, start = got.nodes, got.start_s
            self.active_set.difference_update(got.dropped)
            self.active_set.update(got.added)
            if start >= self.end:
                self._row(job_id, submit, None, None, PENDING, (), reason)
                return
            stop = self._run_job(start)
            self._book(job_id, submit, start, stop, reason)
            if stop.state in (COMPLETED, RUNNING):
                return
            if stop.state == NODE_FAIL:
                # Slurm requeues a NODE_FAIL job under the same id; the failed node leaves the job.
                submit, reason = stop.end_s, "BeginTime"
                assert stop.failed_node is not None
                self.active.remove(stop.failed_node)
                self.active_set.discard(stop.failed_node)
                # The failed node comes back as a spare once repaired (the pool checks outages).
                self.pool.spares.append(stop.failed_node)
            else:
                job_id, submit, reason = self._new_id(), stop.end_s, "None"
            if stop.state == CANCELLED_BY_ADMIN:
                wait = self.run.planned_pause_s
            elif self.run.policy is Policy.SPARES:
                wait = self.run.spare_swap_s
            else:
                wait = self.run.requeue_wait_s
            wait += self._manual_delay(stop)

    def _manual_delay(self, stop: Stop) -> int:
        """Extra wait when a person has to restart the run after this failure."""
        cfg = self.sc.failures
        if self.draws.manual is None or stop.state not in (NODE_FAIL, FAILED):
            return 0
        return cfg.manual_delay_s if self.draws.manual.random() < cfg.manual_share else 0

    def _run_job(self, start: int) -> Stop:
        """Run a job from ``start`` until it stops, completes or the window ends."""
        line = Timeline(self.run, start)
        horizon = self.end if self.work_left is None else line.finish_time(self.work_left)
        while True:
            stop = self._first_stop(line, start, min(horizon, self.end))
            if stop is None:
                break
            if (
                stop.state == NODE_FAIL
                and self.run.policy is Policy.DROP
                and stop.at_s >= start + self.run.startup_s
            ):
                self._drop_replica(stop)
                if self.work_left is not None:
                    horizon = line.finish_time(self.work_left + self.debt)
                start = stop.at_s + 1  # keep scanning after this failure
                continue
            return stop
        if self.work_left is not None and horizon <= self.end:
            return Stop(at_s=horizon, end_s=horizon, state=COMPLETED, cause=None)
        return Stop(at_s=self.end, end_s=self.end, state=RUNNING, cause=None)

    def _first_stop(self, line: Timeline, t0: int, t1: int) -> Stop | None:
        """The earliest event in ``[t0, t1)`` that stops the job (or drops a replica)."""
        best: Stop | None = None
        i = int(np.searchsorted(self.hw.fail_s, t0, side="left"))
        active, draws = self.active_set, self.draws
        while i < len(self.hw) and self.hw.fail_s[i] < t1:
            if int(self.hw.node[i]) in active:
                best = Stop(
                    at_s=int(self.hw.fail_s[i]),
                    end_s=int(self.hw.detect_s[i]),
                    state=NODE_FAIL,
                    cause=HARDWARE_CAUSES[int(self.hw.cause[i])],
                    failed_node=int(self.hw.node[i]),
                )
                break
            i += 1
        j = int(np.searchsorted(draws.software_at_s, t0, side="left"))
        if (
            j < draws.software_at_s.size
            and draws.software_at_s[j] < t1
            and (best is None or draws.software_at_s[j] < best.at_s)
        ):
            t = int(draws.software_at_s[j])
            best = Stop(
                at_s=t,
                end_s=t + self.sc.failures.software_detection_s,
                state=FAILED,
                cause=SOFTWARE_CAUSES[int(draws.software_cause[j])],
            )
        p = int(np.searchsorted(draws.planned_at_s, max(t0, line.s + 1), side="left"))
        if p < draws.planned_at_s.size and draws.planned_at_s[p] < t1:
            # A planned stop waits for the next checkpoint, so nothing is lost.
            k = -(-(int(draws.planned_at_s[p]) - line.s) // line.tau)
            ckpt = line.s + k * line.tau
            if ckpt < t1 and (best is None or ckpt < best.at_s):
                best = Stop(at_s=ckpt, end_s=ckpt, state=CANCELLED_BY_ADMIN, cause=None)
        r = int(np.searchsorted(draws.rollback_at_s, max(t0, line.s + line.startup), side="left"))
        if r < draws.rollback_at_s.size and draws.rollback_at_s[r] < t1:
            t = int(draws.rollback_at_s[r])
            if best is None or t < best.at_s:
                # The run diverged: its user stops it to restart from an earlier checkpoint.
                best = Stop(at_s=t, end_s=t, state=CANCELLED_BY_USER, cause=None)
        if best is not None and best.end_s > self.end:
            # Slurm has not noticed yet at the window end: the job is still RUNNING there.
            return Stop(at_s=best.at_s, end_s=self.end, state=RUNNING, cause=best.cause)
        return best

    def _drop_replica(self, stop: Stop) -> None:
        """Policy drop: stall for detection (or ``drop_stall_s``), then lose one replica's
        throughput until it is back: on a spare after swap and start-up (or ``drop_rejoin_s``
        after the failure) when the run lets drop use spares and one is free; else repaired."""
        assert stop.cause is not None and stop.failed_node is not None
        self.interruptions[stop.cause] = self.interruptions.get(stop.cause, 0) + 1
        back_s = self.pool.back_at(stop.failed_node, stop.at_s)
        assert back_s is not None
        replicas = max(self.need // self.run.replica_nodes, 1)
        stall = stop.end_s - stop.at_s if self.run.drop_stall_s < 0 else self.run.drop_stall_s
        repaired = min(back_s, self.end)
        back: float = repaired  # a measured rejoin may end between whole seconds
        if self.run.spares_for is SparesFor.ALL and self.pool.lend_spare(stop.end_s, repaired):
            # The replica restarts on a spare (as a restart would) instead of waiting for repair.
            if self.run.drop_rejoin_s < 0:
                rejoin: float = stop.end_s + self.run.spare_swap_s + self.run.startup_s
            else:
                rejoin = stop.at_s + self.run.drop_rejoin_s  # measured: heal and state copy
            back = min(repaired, rejoin)
        reduced = max(back - (stop.at_s + stall), 0)
        self.debt += int(stall) + int(reduced // replicas)

    # -- booking ----------------------------------------------------------------------------------
    def _book(self, job_id: int, submit: int, start: int, stop: Stop, reason: str) -> None:
        line = Timeline(self.run, start)
        end = stop.end_s
        elapsed = end - start
        self.running_node_s += (stop.at_s - start) * self.need
        gpus = self.need * self.gpn
        lost_state = stop.state not in (COMPLETED, RUNNING)
        k = line.checkpoints_by(stop.at_s)
        kept = line.kept_at(k) + (0 if lost_state else self._partial(line, stop.at_s, k))
        kept -= self.debt
        self.debt = 0
        self.productive += kept
        if self.work_left is not None:
            self.work_left -= kept
        if stop.state == COMPLETED:
            self.completed = end
        if stop.cause is not None and stop.state in (NODE_FAIL, FAILED):
            self.interruptions[stop.cause] = self.interruptions.get(stop.cause, 0) + 1
        if stop.state == CANCELLED_BY_ADMIN:
            self.planned_count += 1
        self._book_truth(line, stop, k, elapsed, gpus)
        if stop.state == CANCELLED_BY_USER:
            self._roll_back(gpus)
        self._row(
            job_id,
            submit,
            start,
            None if stop.state == RUNNING else end,
            stop.state,
            tuple(self.active),
            reason,
        )
        if self.run.telemetry:
            host = self.sc.fleet.node_prefix + str(self.active[0])
            self.lines += telemetry_lines(
                run=self.run.name, job_id=job_id, host=host, line=line, stop=stop, checkpoints=k
            )

    def _roll_back(self, gpus: int) -> None:
        """Restart from a checkpoint ``rollback_s`` of progress before the last one: the
        repeated steps were kept progress (released) and now count as lost (cancelled.user)."""
        self.rollback_count += 1
        repeat = min(self.sc.failures.rollback_s, self.productive)
        self.productive -= repeat
        if self.work_left is not None:
            self.work_left += repeat
        self.tally.move("released", "cancelled", repeat * gpus, "user")

    def _partial(self, line: Timeline, t: int, k: int) -> int:
        """Progress computed after checkpoint ``k`` up to ``t`` (kept when the job did not fail)."""
        since = line.s + k * line.tau
        compute_end = since + line.tau - line.delta
        begin = since if k > 0 else line.s + line.startup
        if t <= begin:
            return 0  # still in start-up: nothing computed yet
        return min(t, compute_end) - begin

    def _book_truth(self, line: Timeline, stop: Stop, k: int, elapsed: int, gpus: int) -> None:
        lost_cat = {
            NODE_FAIL: "failed",
            FAILED: "failed",
            CANCELLED_BY_ADMIN: "cancelled",
            CANCELLED_BY_USER: "cancelled",
        }
        category = lost_cat.get(stop.state)
        # What happened, whether or not the run writes telemetry (the ledger measures it from
        # telemetry, or estimates it from run_settings without): lost since the last save (else
        # since the first step, else since job start); start-up and every saved checkpoint's
        # write stall are overhead.
        has_step = line.s + line.startup <= stop.at_s
        overhead = (line.startup if has_step else 0) + k * line.delta
        first_step = line.s + line.startup if has_step else line.s
        resumed = line.s + k * line.tau if k > 0 else first_step
        lost = stop.end_s - resumed if category else 0
        if category == "failed":
            self.tally.add(category, lost * gpus, self._failed_cause(stop))
        elif category:
            self.tally.add(category, lost * gpus, "user")
        self.tally.add("overhead", overhead * gpus)
        self.tally.add("released", (elapsed - lost - overhead) * gpus)

    def _failed_cause(self, stop: Stop) -> str:
        """The ledger's cause: hardware for NODE_FAIL or a node event on its nodes near its end."""
        if stop.state == NODE_FAIL:
            return "hardware"
        active = self.active_set
        lo, hi = stop.end_s - 600, stop.end_s + 300
        for starts in (self.hw.detect_s, self.hw.drain_s):
            near = np.flatnonzero((starts >= lo) & (starts <= hi))
            if any(int(self.hw.node[i]) in active for i in near):
                return "hardware"
        return "software"

    def _row(
        self,
        job_id: int,
        submit: int,
        start: int | None,
        end: int | None,
        state: str,
        nodes: tuple[int, ...],
        reason: str,
    ) -> None:
        self.rows.append(
            JobRow(
                job_id=job_id,
                name=self.run.name,
                run=self.run.name,
                user="train",
                uid=1001,
                account="lineage",
                partition="train",
                submit_s=submit,
                eligible_s=start if start is not None else submit,
                start_s=start,
                end_s=end,
                state=state,
                nodes=nodes,
                num_gpus=self.need * self.gpn,
                reason=reason,
                exit_code="1:0" if state == FAILED else "0:0",
            )
        )

    def _new_id(self) -> int:
        self.next_job_id += 1
        return self.next_job_id - 1

    def result(self) -> LineageResult:
        stop = self.completed if self.completed is not None else self.end
        return LineageResult(
            next_job_id=self.next_job_id,
            run=self.run.name,
            release=self.run.release,
            rows=tuple(self.rows),
            telemetry=tuple(self.lines),
            tally=self.tally,
            interruptions=dict(self.interruptions),
            planned_interruptions=self.planned_count,
            productive_s=self.productive,
            wall_s=stop - self.submit if stop > self.submit else 0,
            running_node_s=self.running_node_s,
            completed_s=self.completed,
            rollbacks=self.rollback_count,
        )


__all__ = ["LineageResult", "simulate_lineage"]
