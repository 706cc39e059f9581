"""Release-lineage runs: their shape, checkpoints, restarts and interruptions, from their jobs.

Per run (the manifest's lineage): the GPUs of its jobs, the nodes it used beyond them (spares),
when it was first submitted, and whether it finished. Checkpoint interval, write stall and
start-up come from run telemetry when the store has it, else from the manifest's run_settings,
else they are assumed (and said so). Restart delays are the gaps between a failed job's end and
the run's next start; a gap that ends when a node of the run comes back from repair was a wait
for nodes, and a gap much longer than the usual delay was a person restarting it by hand.
"""

from __future__ import annotations

import itertools
import math
from collections import Counter
from dataclasses import dataclass

from gpuyield.ledger import Window
from gpuyield.manifest import Manifest
from gpuyield.whatif.jobs import JobRow
from gpuyield.whatif.outages import Outage
from gpuyield.whatif.params import Parameter, Status, fitted, stated
from gpuyield.whatif.stats import median_estimate, poisson_rate

# Ledger's rule (ledger/jobs.py): a node event from 10 min before to 5 min after a FAILED job's
# end blames the hardware.
_BLAME_BEFORE_S, _BLAME_AFTER_S = 600, 300
# A restart gap this much longer than the usual one (and at least the usual one again) was a
# person's: the run waited for someone to restart it.
_MANUAL_EXTRA_S = 600
_FAILED_STATES = ("NODE_FAIL", "FAILED")
# The simulator's defaults, used (and stated) when nothing in the store says otherwise.
DEFAULTS = {
    "checkpoint_interval_s": 1800.0,
    "checkpoint_write_s": 30.0,
    "startup_s": 300.0,
    "requeue_wait_s": 300.0,
    "planned_pause_s": 600.0,
}


@dataclass(frozen=True, kw_only=True, slots=True)
class LineageShape:
    """What the scenario needs of a run besides its fitted numbers."""

    name: str
    release: str
    num_gpus: int
    spare_nodes: int
    start_day: float
    #: Days of kept progress when the run finished in the window; 0: it runs to the window end.
    work_days: float
    drop: bool
    telemetry: bool


@dataclass(frozen=True, kw_only=True, slots=True)
class RunFacts:
    """What one run's jobs show, before it becomes parameters."""

    shape: LineageShape
    #: GPUs its jobs held (the shape's are whole nodes).
    held_gpus: int
    #: Every node its jobs ran on.
    nodes: tuple[str, ...]
    #: Seconds its jobs ran in the window, and the same times their nodes.
    running_s: float
    running_node_s: float
    software_failures: int
    hardware_failures: int
    restart_gaps: tuple[int, ...]
    repair_waits: int
    planned_stops: int
    planned_gaps: tuple[int, ...]
    rollbacks: int


def run_facts(
    name: str,
    rows: list[JobRow],
    *,
    manifest: Manifest,
    outages: list[Outage],
    gpus_per_node: int,
    window: Window,
    released_gpu_s: float,
    telemetry: bool,
) -> RunFacts:
    """The facts of one lineage run's rows in the window."""
    start_s, end_s = window.start_s, window.end_s
    held = Counter(r.num_gpus for r in rows if r.num_gpus).most_common(1)[0][0]
    # The simulator runs lineage jobs on whole nodes.
    need = max(-(-held // gpus_per_node), 1)
    gpus = need * gpus_per_node
    nodes = {n for r in rows for n in r.nodes}
    started = [r for r in rows if r.start_s is not None]
    running = sum(
        max(min(r.end_s or end_s, end_s) - max(r.start_s or 0, start_s), 0) for r in started
    )
    failed = [r for r in started if r.state in _FAILED_STATES]
    software = sum(1 for r in failed if r.state == "FAILED" and not _hardware_blamed(r, outages))
    gaps = _gaps(started, {o.start_s + o.down_s + o.repair_s for o in outages if o.node in nodes})
    done = rows[-1].state == "COMPLETED"
    shape = LineageShape(
        name=name,
        release=_release_of(manifest, name),
        num_gpus=gpus,
        spare_nodes=max(len(nodes) - need, 0),
        start_day=max(rows[0].submit_s - start_s, 0) / 86400.0,
        work_days=released_gpu_s / gpus / 86400.0 if done else 0.0,
        drop=_kept_running_through_failures(started, outages, end_s),
        telemetry=telemetry,
    )
    return RunFacts(
        shape=shape,
        held_gpus=held,
        nodes=tuple(sorted(nodes)),
        running_s=float(running),
        running_node_s=float(running * need),
        software_failures=software,
        hardware_failures=len(failed) - software,
        restart_gaps=gaps.restart,
        repair_waits=gaps.repair_waits,
        planned_stops=gaps.planned_stops,
        planned_gaps=gaps.planned,
        rollbacks=gaps.rollbacks,
    )


@dataclass(frozen=True, kw_only=True, slots=True)
class _Gaps:
    """How a run's jobs ended, and the gaps from one job's end to the run's next start."""

    restart: tuple[int, ...]
    planned: tuple[int, ...]
    repair_waits: int
    planned_stops: int
    rollbacks: int


def _gaps(started: list[JobRow], backs: set[int]) -> _Gaps:
    """Restart gaps after failures, pauses after planned stops, and the failures after which
    the run waited for a node back from repair (``backs``: when the run's nodes came back)."""
    restart, planned, waits = [], [], 0
    for row, nxt in itertools.pairwise(started):
        if row.end_s is None or nxt.start_s is None:
            continue
        gap = nxt.start_s - row.end_s
        if gap < 0:
            continue  # the next job started before this one ended: not a restart of it
        if row.state in _FAILED_STATES and nxt.start_s in backs and gap > 0:
            waits += 1  # the run waited for a node to come back from repair
        elif row.state in _FAILED_STATES:
            restart.append(gap)
        elif row.state == "CANCELLED" and _by_admin(row):
            planned.append(gap)
    cancelled = [r for r in started if r.state == "CANCELLED"]
    admin = sum(1 for r in cancelled if _by_admin(r))
    return _Gaps(
        restart=tuple(restart),
        planned=tuple(planned),
        repair_waits=waits,
        planned_stops=admin,
        rollbacks=len(cancelled) - admin,
    )


def _by_admin(row: JobRow) -> bool:
    """Cancelled by root (uid 0): the simulator's planned stops, an admin's on a real cluster."""
    return row.state_raw.strip().endswith(" by 0")


def _hardware_blamed(row: JobRow, outages: list[Outage]) -> bool:
    if row.end_s is None:
        return False
    nodes = set(row.nodes)
    lo, hi = row.end_s - _BLAME_BEFORE_S, row.end_s + _BLAME_AFTER_S
    return any(o.node in nodes and lo <= o.start_s <= hi for o in outages if not o.planned)


def _kept_running_through_failures(rows: list[JobRow], outages: list[Outage], end_s: int) -> bool:
    """A job that ran on past an unplanned outage of one of its nodes dropped the replica."""
    for row in rows:
        stop = row.end_s if row.end_s is not None else end_s
        start = row.start_s if row.start_s is not None else stop
        nodes = set(row.nodes)
        if any(
            not o.planned and o.node in nodes and start < o.start_s < stop - _BLAME_BEFORE_S
            for o in outages
        ):
            return True
    return False


def _release_of(manifest: Manifest, run: str) -> str:
    for release in manifest.releases:
        if run in release.runs:
            return release.model
    return run


def checkpoint_parameters(
    name: str, manifest: Manifest, telemetry: list[tuple[str, float, float | None]]
) -> list[Parameter]:
    """Interval, write stall and start-up: telemetry, else run_settings, else assumed."""
    intervals, writes, startups = _from_telemetry(telemetry)
    measured = {
        "checkpoint_interval_s": (intervals, "gaps between checkpoint_saved events of one job"),
        "checkpoint_write_s": (writes, "checkpoint_saved duration_s"),
        "startup_s": (startups, "job_start to the job's first step"),
    }
    settings = {
        "checkpoint_interval_s": manifest.interval_s(name),
        "checkpoint_write_s": manifest.checkpoint_save_s.get(name),
        "startup_s": manifest.restart_s.get(name),
    }
    params = []
    for field, (values, what) in measured.items():
        key, setting = f"lineage.{name}.{field}", settings[field]
        if values:
            evidence = f"median of {len(values)} {what} (telemetry)"
            params.append(
                fitted(
                    key, median_estimate(values), unit="s", events=len(values), evidence=evidence
                )
            )
        elif setting is not None:
            evidence = f"manifest run_settings.{name}"
            params.append(
                stated(key, float(setting), unit="s", status=Status.SETTING, evidence=evidence)
            )
        else:
            evidence = "no telemetry or run_settings: the simulator's default"
            params.append(
                stated(key, DEFAULTS[field], unit="s", status=Status.ASSUMED, evidence=evidence)
            )
    return _fitting_in_the_interval(params)


def _fitting_in_the_interval(params: list[Parameter]) -> list[Parameter]:
    """Assumed start-up and write stall shrunk to half the interval when the defaults would not
    fit in it (the simulator saves checkpoints at start + k * interval, after start-up)."""
    interval, write, startup = params
    if startup.value + write.value < interval.value:
        return params
    share = interval.value / 2 / (startup.value + write.value)
    fixed = [interval]
    for p in (write, startup):
        if p.status is Status.ASSUMED:
            value = math.floor(p.value * share)
            evidence = f"{p.evidence}, shrunk to fit the {interval.value:g} s interval"
            p = stated(p.key, float(value), unit=p.unit, status=Status.ASSUMED, evidence=evidence)
        fixed.append(p)
    return fixed


def _from_telemetry(
    records: list[tuple[str, float, float | None]],
) -> tuple[list[float], list[float], list[float]]:
    """Checkpoint intervals, write stalls and start-ups in a run's telemetry (time order)."""
    intervals: list[float] = []
    writes: list[float] = []
    startups: list[float] = []
    job_start: float | None = None
    last_save: float | None = None
    for event, t, duration in records:
        if event == "job_start":
            job_start, last_save = t, None
        elif event == "step" and job_start is not None:
            startups.append(t - job_start)
            job_start = None  # only the job's first step ends its start-up
        elif event == "checkpoint_saved":
            if last_save is not None:
                intervals.append(t - last_save)
            last_save = t
            if duration is not None:
                writes.append(duration)
    return intervals, writes, startups


def usual_gap(gaps: list[int]) -> float:
    """The run's usual restart delay: the median gap (the simulator's default without gaps)."""
    return median_estimate([float(g) for g in gaps]).value if gaps else DEFAULTS["requeue_wait_s"]


def is_manual(gap: int, usual: float) -> bool:
    """A gap this much longer than the usual one waited for a person."""
    return gap > usual + max(usual, _MANUAL_EXTRA_S)


def restart_parameters(name: str, facts: RunFacts) -> list[Parameter]:
    """Requeue delay, planned-stop rate and planned pause of one run."""
    key = f"lineage.{name}"
    usual = usual_gap(list(facts.restart_gaps))
    plain = [float(g) for g in facts.restart_gaps if not is_manual(g, usual)]
    if plain:
        evidence = (
            f"median gap from a failed job's end to the run's next start ({len(plain)} gaps; "
            f"{facts.repair_waits} more waited for a repaired node)"
        )
        wait = fitted(
            f"{key}.requeue_wait_s",
            median_estimate(plain),
            unit="s",
            events=len(plain),
            evidence=evidence,
        )
    else:
        evidence = "no restart after a failure in the window: the simulator's default"
        wait = stated(
            f"{key}.requeue_wait_s", usual, unit="s", status=Status.ASSUMED, evidence=evidence
        )
    days = facts.running_s / 86400
    stops = fitted(
        f"{key}.planned_stops_per_day",
        poisson_rate(facts.planned_stops, days),
        unit="per day",
        events=facts.planned_stops,
        evidence=f"{facts.planned_stops} jobs cancelled by root over {days:,.1f} running days",
    )
    return [wait, stops, _pause(key, list(facts.planned_gaps))]


def _pause(key: str, pauses: list[int]) -> Parameter:
    if not pauses:
        evidence = "no planned stop in the window: the simulator's default"
        return stated(
            f"{key}.planned_pause_s",
            DEFAULTS["planned_pause_s"],
            unit="s",
            status=Status.ASSUMED,
            evidence=evidence,
        )
    return fitted(
        f"{key}.planned_pause_s",
        median_estimate([float(p) for p in pauses]),
        unit="s",
        events=len(pauses),
        evidence=f"median gap after {len(pauses)} planned stops",
    )


#: A run that never waited for a repaired node gets spares enough that the simulator's run does
#: not wait either, but for this rare a chance: the quantile of the nodes its group has out at
#: once (Poisson: failures per node-day x nodes x mean repair days, Little's law). Not rarer:
#: every spare the scenario adds sits idle all window in the simulator, idle time the real
#: ledger never showed, so the fit adds the fewest that keep the run from waiting.
SPARE_QUANTILE = 0.99


def enough_spares(facts: RunFacts, failures_per_node_day: float, repair_days: float) -> int:
    """Spare nodes for the scenario: those the run used, or, when it never waited for a repaired
    node, enough that it seldom would (its pool was never exhausted, but the window shows only
    the spares it happened to need)."""
    if facts.repair_waits:
        return facts.shape.spare_nodes
    need = facts.running_node_s / facts.running_s if facts.running_s else 0.0
    mean_out = failures_per_node_day * need * repair_days
    return max(facts.shape.spare_nodes, poisson_quantile(SPARE_QUANTILE, mean_out))


def poisson_quantile(p: float, mean: float) -> int:
    """The smallest k with P(X <= k) >= p for X ~ Poisson(mean)."""
    if mean <= 0:
        return 0
    k, term = 0, math.exp(-mean)
    total = term
    while total < p and k < 10_000:
        k += 1
        term *= mean / k
        total += term
    return k
