"""What failures cost a replicated training run, measured from its fault-tolerance events.

Two recoveries are accounted, per ``replica_lost`` event at time ``t_f`` of replica group ``v``
(``G`` GPUs per group, ``N`` groups), from the rows ``gpuyield ingest telemetry`` stores in
``ft_events`` (docs/ledger.md, "Fault-tolerant runs"):

* **drop** (``v`` later logs ``heal_done``): the others keep training without ``v``.
  - lost work: ``G x (t_f - v's last committed step before t_f)``: the step ``v`` was computing;
  - heal: ``G x (heal_done - t_f)``: ``v``'s GPUs give nothing from the failure until they hold a
    live peer's state again (restart of the process, quorum, transfer);
  - stall: for every other group ``q``, each gap between two of its committed steps that contains a
    failure or a new quorum seen by ``q`` costs ``G x (gap - q's median gap)`` (never below 0): the
    discarded step and the reconfiguration, both at the drop and at the rejoin.
* **restart** (a ``checkpoint_loaded`` follows instead): the whole job stops.
  - lost work: ``N x G x (t_f - the last checkpoint saved or loaded before t_f)`` (the run's first
    ``job_start`` when there is neither): every group's work since the state it can restart from;
  - restart: ``N x G x (checkpoint_loaded - t_f)``: detection, process restart, load.

A failure followed by neither (the run ended) counts its lost work and is marked unrecovered.
"""

from __future__ import annotations

import bisect
import statistics
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from enum import StrEnum
from itertools import pairwise

import pyarrow as pa

from gpuyield.errors import InputError
from gpuyield.store import StoreRef, reading


class Recovery(StrEnum):
    """How the job got past one failure."""

    DROP = "drop"
    RESTART = "restart"
    UNRECOVERED = "unrecovered"


@dataclass(frozen=True, kw_only=True, slots=True)
class FailureCost:
    """One failure and what it cost outside the survivors' stall."""

    replica: int
    t_s: float
    step: int
    recovery: Recovery
    lost_work_gpu_s: float
    heal_gpu_s: float
    restart_gpu_s: float
    #: Seconds from the failure to the healed rejoin (drop) or the loaded checkpoint (restart).
    recovery_s: float


@dataclass(frozen=True, kw_only=True, slots=True)
class FtLoss:
    """Lost GPU-seconds of one run by kind; ``lost_gpu_s`` is their sum."""

    run: str
    failures: tuple[FailureCost, ...]
    restarts: int
    stall_s: float
    stall_gpu_s: float
    lost_work_gpu_s: float
    heal_s: float
    heal_gpu_s: float
    restart_s: float
    restart_gpu_s: float

    @property
    def lost_gpu_s(self) -> float:
        """Everything the failures cost, GPU-seconds."""
        return self.stall_gpu_s + self.lost_work_gpu_s + self.heal_gpu_s + self.restart_gpu_s

    def to_dict(self) -> dict[str, object]:
        """``gpuyield ft-loss --json``: every field, the failures one dict each, and the sum."""
        return {**asdict(self), "lost_gpu_s": self.lost_gpu_s}


@dataclass(frozen=True, kw_only=True, slots=True)
class _Loss:
    """One replica_lost row."""

    t_s: float
    replica: int
    step: int
    replicas: int
    gpus: int


@dataclass(frozen=True, kw_only=True, slots=True)
class _Rows:
    """The run's events by kind, each list sorted by time."""

    steps: dict[int, list[float]]
    quorums: dict[int, list[float]]
    heals: dict[int, list[float]]
    losses: list[_Loss]
    saved: list[float]
    loaded: list[float]
    starts: list[float]
    restarts: int


def _index(table: pa.Table) -> _Rows:
    steps: dict[int, list[float]] = defaultdict(list)
    quorums: dict[int, list[float]] = defaultdict(list)
    heals: dict[int, list[float]] = defaultdict(list)
    losses: list[_Loss] = []
    saved, loaded, starts = [], [], []
    restarts = 0
    for row in sorted(table.to_pylist(), key=lambda r: r["t_s"]):
        event, t, replica = row["event"], float(row["t_s"]), row["replica"]
        if event == "replica_lost":
            losses.append(
                _Loss(
                    t_s=t,
                    replica=int(replica),
                    step=int(row["step"]),
                    replicas=int(row["replicas"]),
                    gpus=int(row["gpus"]),
                )
            )
        elif event == "step" and replica is not None:
            steps[replica].append(t)
        elif event == "quorum" and replica is not None:
            quorums[replica].append(t)
        elif event == "heal_done" and replica is not None:
            heals[replica].append(t)
        elif event == "checkpoint_saved":
            saved.append(t)
        elif event == "checkpoint_loaded":
            loaded.append(t)
        elif event == "job_start":
            starts.append(t)
        elif event == "restart":
            restarts += 1
    return _Rows(
        steps=steps,
        quorums=quorums,
        heals=heals,
        losses=losses,
        saved=saved,
        loaded=loaded,
        starts=starts,
        restarts=restarts,
    )


def _last_before(times: Sequence[float], t: float) -> float | None:
    i = bisect.bisect_left(times, t)
    return times[i - 1] if i else None


def _first_after(times: Sequence[float], t: float) -> float | None:
    i = bisect.bisect_right(times, t)
    return times[i] if i < len(times) else None


def _failure(rows: _Rows, loss: _Loss) -> FailureCost:
    t_f, replica, groups, gpus = loss.t_s, loss.replica, loss.replicas, loss.gpus
    next_loss = _first_after([x.t_s for x in rows.losses if x.replica == replica], t_f)
    healed = _first_after(rows.heals.get(replica, []), t_f)
    if healed is not None and (next_loss is None or healed < next_loss):
        own = [*rows.steps.get(replica, []), *rows.heals.get(replica, []), *rows.starts]
        since = _last_before(sorted(own), t_f)
        lost = t_f - since if since is not None else 0.0
        return FailureCost(
            replica=replica,
            t_s=t_f,
            step=loss.step,
            recovery=Recovery.DROP,
            lost_work_gpu_s=gpus * lost,
            heal_gpu_s=gpus * (healed - t_f),
            restart_gpu_s=0.0,
            recovery_s=healed - t_f,
        )
    anchors = sorted([*rows.saved, *rows.loaded, *rows.starts[:1]])
    since = _last_before(anchors, t_f)
    resumed = _first_after(rows.loaded, t_f)
    whole = groups * gpus
    return FailureCost(
        replica=replica,
        t_s=t_f,
        step=loss.step,
        recovery=Recovery.RESTART if resumed is not None else Recovery.UNRECOVERED,
        lost_work_gpu_s=whole * (t_f - since) if since is not None else 0.0,
        heal_gpu_s=0.0,
        restart_gpu_s=whole * (resumed - t_f) if resumed is not None else 0.0,
        recovery_s=resumed - t_f if resumed is not None else 0.0,
    )


def _stall_s(rows: _Rows, dropped: Sequence[FailureCost]) -> float:
    """Survivors' excess step gaps around failures and quorum changes, seconds summed over groups."""
    total = 0.0
    for replica, times in rows.steps.items():
        gaps = [b - a for a, b in pairwise(times)]
        if not gaps:
            continue
        usual = statistics.median(gaps)
        marks = sorted(
            [f.t_s for f in dropped if f.replica != replica] + rows.quorums.get(replica, [])
        )
        own = [f.t_s for f in dropped if f.replica == replica]
        for a, b in pairwise(times):
            hit = _first_after(marks, a)
            if hit is None or hit > b:
                continue
            if any(a < t <= b for t in own):
                continue  # this group's own failure: counted as its lost work and heal
            total += max(0.0, (b - a) - usual)
    return total


def account(run: str, table: pa.Table) -> FtLoss:
    """Lost GPU-seconds of ``run`` from its ``ft_events`` rows (columns as in the store)."""
    rows = _index(table)
    failures = tuple(_failure(rows, loss) for loss in rows.losses)
    dropped = [f for f in failures if f.recovery is Recovery.DROP]
    gpus = max((x.gpus for x in rows.losses), default=1)
    stall_s = _stall_s(rows, dropped) if dropped else 0.0
    restarted = [f for f in failures if f.recovery is Recovery.RESTART]
    return FtLoss(
        run=run,
        failures=failures,
        restarts=rows.restarts,
        stall_s=stall_s,
        stall_gpu_s=gpus * stall_s,
        lost_work_gpu_s=sum(f.lost_work_gpu_s for f in failures),
        heal_s=sum(f.recovery_s for f in dropped),
        heal_gpu_s=sum(f.heal_gpu_s for f in failures),
        restart_s=sum(f.recovery_s for f in restarted),
        restart_gpu_s=sum(f.restart_gpu_s for f in failures),
    )


def ft_loss(db: StoreRef, run: str) -> FtLoss:
    """Lost GPU-seconds of ``run`` from the store (``gpuyield ingest telemetry`` filled it);
    ``db`` is the store's path or an open connection to it."""
    with reading(db) as con:
        table = con.sql(
            "SELECT * EXCLUDE (ingest_id) FROM ft_events WHERE run = $run ORDER BY t_s",
            params={"run": run},
        ).to_arrow_table()
    if table.num_rows == 0:
        raise InputError(
            f"run {run!r} has no fault-tolerance events in the store",
            hint="ingest its telemetry.jsonl: gpuyield ingest telemetry DIR/telemetry.jsonl --run RUN",
        )
    return account(run, table)
