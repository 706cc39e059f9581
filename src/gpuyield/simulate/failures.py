"""The fleet's hardware failure process, drawn all at once with numpy.

Each hardware cause is an independent Poisson process per node (rates from
``Scenario.failure_rates``),
so the whole fleet's failures of one cause are a Poisson count with uniform times and uniform nodes.
A node that is already out for repair cannot fail again, so draws falling inside an outage of the
same node are dropped (a small thinning, visible only at very high rates).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gpuyield.simulate.calibration import CAUSES_BY_ID, CauseKind
from gpuyield.simulate.scenario import FailureConfig, Scenario

#: Hardware cause ids in a fixed order; ``Outages.cause`` indexes into it.
HARDWARE_CAUSES: tuple[str, ...] = tuple(
    c.id for c in CAUSES_BY_ID.values() if c.kind is CauseKind.HARDWARE
)
SOFTWARE_CAUSES: tuple[str, ...] = tuple(
    c.id for c in CAUSES_BY_ID.values() if c.kind is CauseKind.SOFTWARE
)


@dataclass(frozen=True, kw_only=True, slots=True)
class Outages:
    """Node outages as parallel arrays (struct of arrays), sorted by ``fail_s``."""

    #: Node index (0-based).
    node: np.ndarray
    #: When the fault happened (epoch s); the node does no useful work from here.
    fail_s: np.ndarray
    #: When Slurm marks the node DOWN/DOWN* (jobs on it end NODE_FAIL); the node event starts.
    detect_s: np.ndarray
    #: When the node is set to DRAIN for repair.
    drain_s: np.ndarray
    #: When the node returns to service.
    back_s: np.ndarray
    #: Index into ``HARDWARE_CAUSES``; for planned maintenance, into ``Scenario.maintenance``.
    cause: np.ndarray
    #: Planned maintenance (a DRAIN "scheduled maintenance" event), not a failure.
    planned: np.ndarray

    def __len__(self) -> int:
        return int(self.node.size)


def draw_outages(scenario: Scenario, rng: np.random.Generator) -> Outages:
    """Draw every hardware outage of the fleet in the scenario window."""
    rates = scenario.failure_rates()
    cfg = scenario.failures
    start, end = scenario.start_s, scenario.end_s
    exposure = scenario.fleet.num_nodes * float(end - start)
    nodes, times, causes = [], [], []
    lemons = _lemon_weights(scenario, rng)
    exposure *= 1.0 if lemons is None else float(lemons.mean())
    for index, cause_id in enumerate(HARDWARE_CAUSES):
        count = int(rng.poisson(rates[cause_id] * exposure))
        times.append(rng.integers(start, end, size=count, dtype=np.int64))
        nodes.append(_pick_nodes(scenario.fleet.num_nodes, count, lemons, rng))
        causes.append(np.full(count, index, dtype=np.int64))
    node = np.concatenate(nodes)
    fail = np.concatenate(times)
    cause = np.concatenate(causes)
    repair = _repair_times(cfg, node.size, rng)
    order = np.lexsort((cause, fail, node))
    node, fail, cause, repair = node[order], fail[order], cause[order], repair[order]
    keep = _drop_during_repair(node, fail, repair, cfg.detection_s + cfg.down_s)
    node, fail, cause, repair = node[keep], fail[keep], cause[keep], repair[keep]
    detect = fail + cfg.detection_s
    drain = detect + cfg.down_s
    back = drain + repair
    drawn = Outages(
        node=node,
        fail_s=fail,
        detect_s=detect,
        drain_s=drain,
        back_s=back,
        cause=cause,
        planned=np.zeros(node.size, dtype=bool),
    )
    return _with_maintenance(drawn, scenario)


def _lemon_weights(scenario: Scenario, rng: np.random.Generator) -> np.ndarray | None:
    """Relative failure rate per node: lemons fail ``lemon_factor`` times as often (None: none).

    Drawn only when the scenario has lemons, so scenarios without them keep their random stream.
    """
    cfg = scenario.failures
    if cfg.lemon_share <= 0 or cfg.lemon_factor == 1:
        return None
    count = round(cfg.lemon_share * scenario.fleet.num_nodes)
    weights = np.ones(scenario.fleet.num_nodes)
    weights[rng.choice(scenario.fleet.num_nodes, size=count, replace=False)] = cfg.lemon_factor
    return weights


def _pick_nodes(
    num_nodes: int, count: int, weights: np.ndarray | None, rng: np.random.Generator
) -> np.ndarray:
    if weights is None:
        return rng.integers(0, num_nodes, size=count, dtype=np.int64)
    return rng.choice(num_nodes, size=count, p=weights / weights.sum()).astype(np.int64)


def _repair_times(cfg: FailureConfig, size: int, rng: np.random.Generator) -> np.ndarray:
    """Exponential repair times: short for faults a reboot or reset clears, long for replacements.

    The recoverable draw happens only when the scenario has recoverable faults, so scenarios
    without them keep their random stream (and their outputs) unchanged.
    """
    replace = np.rint(rng.exponential(cfg.repair_mean_s, size=size)).astype(np.int64)
    if cfg.recoverable_share <= 0:
        return replace
    clears = rng.random(size) < cfg.recoverable_share
    reboot = np.rint(rng.exponential(cfg.recoverable_repair_mean_s, size=size)).astype(np.int64)
    return np.where(clears, reboot, replace)


def _with_maintenance(drawn: Outages, scenario: Scenario) -> Outages:
    """Add maintenance windows; a node already out when one starts skips it, and failures drawn
    inside a window on its nodes are dropped (a drained node is not running anything to fail)."""
    keep = np.ones(len(drawn), dtype=bool)
    extra: list[tuple[int, int, int, int]] = []
    for index, window in enumerate(scenario.maintenance):
        start = scenario.start_s + round(window.start_day * 86400)
        end = start + round(window.duration_h * 3600)
        if start >= scenario.end_s:
            continue
        for n in range(window.first_node, window.first_node + window.num_nodes):
            mine = drawn.node == n
            if (mine & (drawn.fail_s < start) & (drawn.back_s > start)).any():
                continue  # out for repair already; the repair covers the maintenance
            keep &= ~(mine & (drawn.fail_s >= start) & (drawn.fail_s < end))
            extra.append((n, start, end, index))
    node = np.concatenate((drawn.node[keep], np.array([e[0] for e in extra], dtype=np.int64)))
    at = np.array([e[1] for e in extra], dtype=np.int64)
    back = np.concatenate((drawn.back_s[keep], np.array([e[2] for e in extra], dtype=np.int64)))
    fail = np.concatenate((drawn.fail_s[keep], at))
    detect = np.concatenate((drawn.detect_s[keep], at))
    drain = np.concatenate((drawn.drain_s[keep], at))
    cause = np.concatenate((drawn.cause[keep], np.array([e[3] for e in extra], dtype=np.int64)))
    planned = np.concatenate((drawn.planned[keep], np.ones(len(extra), dtype=bool)))
    by_time = np.lexsort((node, fail))
    return Outages(
        node=node[by_time],
        fail_s=fail[by_time],
        detect_s=detect[by_time],
        drain_s=drain[by_time],
        back_s=back[by_time],
        cause=cause[by_time],
        planned=planned[by_time],
    )


def _drop_during_repair(
    node: np.ndarray, fail: np.ndarray, repair: np.ndarray, fixed_s: int
) -> np.ndarray:
    """Mask of draws that hit a node in service (input sorted by node, then time)."""
    keep = np.ones(node.size, dtype=bool)
    back = fail + fixed_s + repair
    # Only draws closer to the previous draw on the same node than its outage need the slow check.
    suspect = np.flatnonzero((node[1:] == node[:-1]) & (fail[1:] < back[:-1])) + 1
    if suspect.size == 0:
        return keep
    last_node, last_back = -1, -1
    for i in range(node.size):
        if node[i] != last_node:
            last_node, last_back = int(node[i]), -1
        if fail[i] < last_back:
            keep[i] = False
            continue
        last_back = int(back[i])
    return keep


def poisson_times(
    rng: np.random.Generator, rate_per_s: float, start_s: int, end_s: int
) -> np.ndarray:
    """Sorted integer times of a homogeneous Poisson process on ``[start_s, end_s)``."""
    count = int(rng.poisson(rate_per_s * (end_s - start_s)))
    return np.sort(rng.integers(start_s, end_s, size=count, dtype=np.int64))
