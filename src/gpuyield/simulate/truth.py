"""Ground truth: the report the ledger must reproduce, computed with its rules (docs/contracts.md).

Lineage jobs are booked by ``lineage.py`` (it knows the checkpoints); research jobs, down and idle
here, vectorised. ``down`` is every node event's GPU-seconds minus GPUs allocated during it
(allocation wins; only the ``drop`` policy keeps a job on a failed node).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from gpuyield.categories import SUBCATEGORIES, Category
from gpuyield.simulate.assumptions import RunAssumptions, run_assumptions
from gpuyield.simulate.calibration import CAUSES_BY_ID
from gpuyield.simulate.cluster import SimulationResult
from gpuyield.simulate.failures import HARDWARE_CAUSES
from gpuyield.simulate.records import Tally
from gpuyield.simulate.research import ResearchRows
from gpuyield.simulate.research_states import (
    S_CANCELLED,
    S_COMPLETED,
    S_FAILED,
    S_NODE_FAIL,
    S_OOM,
    S_PENDING,
    S_PREEMPTED,
    S_REQUEUED,
    S_RUNNING,
    S_TIMEOUT,
)
from gpuyield.times import iso_utc

if TYPE_CHECKING:
    from gpuyield.simulate.utilization import UtilizationTruth

# The ledger's closed vocabulary, in its own order: truth.json has the report's keys.
CATEGORY_ORDER = tuple(c.value for c in Category)
SUBCATEGORY_ORDER = SUBCATEGORIES
# A node event starting this long before to after a failed job's end blames the hardware.
_BLAME_BEFORE_S = 600
_BLAME_AFTER_S = 300


@dataclass(frozen=True, kw_only=True, slots=True)
class Interruptions:
    """How often the lineage runs were interrupted."""

    unexpected: int
    planned: int
    #: Unexpected interruptions per failure cause id, in name order.
    by_cause: dict[str, int]
    #: Divergence rollbacks; None when the scenario has none (truth.json then omits the key).
    rollbacks: int | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class Truth:
    """What the ledger must reproduce from the simulator's files (``truth.json``)."""

    window_start_s: int
    window_end_s: int
    installed_gpu_seconds: int
    #: GPU-seconds per category, in the ledger's order.
    categories: dict[str, int | float]
    subcategories: dict[str, int | float]
    #: Released / installed.
    yield_: float
    utilization: float
    goodput: float
    interruptions: Interruptions
    #: Released / all GPU-time of each lineage run's jobs.
    effective_training_time: dict[str, float]
    gpu_activity: UtilizationTruth | None = None
    """Idle allocated time of the simulated DCGM series (``simulate run --utilization``)."""
    assumptions: RunAssumptions | None = None
    """Every cost and policy that shaped the run (the scenario's), stated beside its figures."""

    def to_dict(self) -> dict[str, Any]:
        """``truth.json``: the report's JSON shape plus interruptions and effective training time."""
        return {
            "window": {"start": iso_utc(self.window_start_s), "end": iso_utc(self.window_end_s)},
            "installed_gpu_seconds": self.installed_gpu_seconds,
            "categories": self.categories,
            "subcategories": self.subcategories,
            "yield": self.yield_,
            "utilization": self.utilization,
            "goodput": self.goodput,
            # The simulator writes clean Slurm logs: nothing to reject, every job has GPUs.
            "rejected_rows": 0,
            "jobs_without_gpu_count": 0,
            "interruptions": {
                "unexpected": self.interruptions.unexpected,
                "planned": self.interruptions.planned,
                "by_cause": self.interruptions.by_cause,
                **(
                    {}
                    if self.interruptions.rollbacks is None
                    else {"rollbacks": self.interruptions.rollbacks}
                ),
            },
            "effective_training_time": self.effective_training_time,
            # Only with simulated utilization series: other truth files keep their shape.
            **(
                {}
                if self.gpu_activity is None
                else {
                    # Beside the report's ``gpu_activity`` block ("utilization" is the ratio).
                    "gpu_activity": {
                        "idle_allocated_gpu_seconds": self.gpu_activity.idle_allocated_gpu_seconds,
                        "samples": self.gpu_activity.samples,
                    }
                }
            ),
            **({} if self.assumptions is None else {"assumptions": self.assumptions.to_dict()}),
        }


def compute_truth(result: SimulationResult) -> Truth:
    """What the ledger must find: the report's figures plus interruptions and effective training time."""
    sc = result.scenario
    installed = sc.fleet.num_gpus * (sc.end_s - sc.start_s)
    tally = Tally()
    for run in result.lineage:
        tally.merge(run.tally)
    allocated = sum(lineage_allocated(result))
    if result.rows is not None:
        allocated += book_research(result, tally)
    down = book_down(result, tally)
    idle = installed - allocated - down
    assert idle >= 0, (installed, allocated, down)
    tally.add("idle", idle)
    categories = {c: _num(tally.categories.get(c, 0)) for c in CATEGORY_ORDER}
    total = sum(categories.values())
    assert total == installed, (total, installed, categories)
    subs = {s: _num(tally.subcategories.get(s, 0)) for s in SUBCATEGORY_ORDER}
    by_cause: dict[str, int] = {}
    for run in result.lineage:
        for cause, count in run.interruptions.items():
            by_cause[cause] = by_cause.get(cause, 0) + count
    return Truth(
        window_start_s=sc.start_s,
        window_end_s=sc.end_s,
        installed_gpu_seconds=installed,
        categories=categories,
        subcategories=subs,
        yield_=categories["released"] / installed,
        utilization=allocated / (installed - down) if installed > down else 0.0,
        goodput=categories["released"] / allocated if allocated else 0.0,
        interruptions=Interruptions(
            unexpected=sum(by_cause.values()),
            planned=sum(r.planned_interruptions for r in result.lineage),
            by_cause={c: by_cause[c] for c in sorted(by_cause)},
            rollbacks=_rollbacks(result),
        ),
        effective_training_time={r.run: r.effective_training_time for r in result.lineage},
        assumptions=run_assumptions(sc),
    )


def _rollbacks(result: SimulationResult) -> int | None:
    """Divergence rollbacks when the scenario has them (None keeps older truth files as they
    were)."""
    if result.scenario.failures.rollbacks_per_day > 0:
        return sum(r.rollbacks for r in result.lineage)
    return None


def _num(value: float) -> int | float:
    return int(value) if float(value).is_integer() else float(value)


def lineage_allocated(result: SimulationResult) -> list[int]:
    end = result.scenario.end_s
    return [
        row.num_gpus * ((row.end_s if row.end_s is not None else end) - row.start_s)
        for run in result.lineage
        for row in run.rows
        if row.start_s is not None
    ]


def book_research(result: SimulationResult, tally: Tally) -> int:
    """Book research rows; returns their allocated GPU-seconds."""
    rows, jobs = result.rows, result.jobs
    assert rows is not None and jobs is not None
    end = result.scenario.end_s
    started = rows.state != S_PENDING
    stop = np.where(rows.end_s >= 0, rows.end_s, end)
    gpu_s = np.where(started, (stop - rows.start_s) * rows.num_gpus, 0)
    diverged = jobs.diverged[rows.job]
    state = rows.state
    # Node-event evidence re-labels only plain FAILED jobs: OOM and TIMEOUT name their own cause
    # (the ledger's reading of the contract, ledger/jobs.py).
    hardware = _blamed_on_hardware(result, stop)
    plain = ~diverged
    book = [
        ("diverged", None, diverged),
        ("experiment", None, plain & np.isin(state, (S_COMPLETED, S_RUNNING))),
        ("failed", "hardware", plain & ((state == S_NODE_FAIL) | ((state == S_FAILED) & hardware))),
        ("failed", "oom", plain & (state == S_OOM)),
        ("failed", "timeout", plain & (state == S_TIMEOUT)),
        ("failed", "software", plain & (state == S_FAILED) & ~hardware),
        ("cancelled", "user", plain & np.isin(state, (S_CANCELLED, S_REQUEUED))),
        ("cancelled", "preempted", plain & (state == S_PREEMPTED)),
    ]
    covered = np.zeros(len(rows), dtype=bool)
    for category, sub, mask in book:
        assert not (covered & mask).any(), category
        covered |= mask
        tally.add(category, int(gpu_s[mask].sum()), sub)
    assert (covered | ~started).all()
    return int(gpu_s.sum())


def _blamed_on_hardware(result: SimulationResult, stop: np.ndarray) -> np.ndarray:
    """FAILED rows a node event on their nodes blames: a fault starting 10 min before to 5 min
    after their end, or planned maintenance they ended inside (the ledger's rule, docs/ledger.md)."""
    rows, out = result.rows, result.outages
    assert rows is not None
    blamed = np.zeros(len(rows), dtype=bool)
    candidates = np.flatnonzero(rows.state == S_FAILED)
    if candidates.size == 0 or len(out) == 0:
        return blamed
    order = candidates[np.argsort(stop[candidates], kind="stable")]
    ends = stop[order]
    held = _NodesHeld(rows, candidates, result.scenario.fleet.num_nodes)
    spans = []
    for starts in (out.detect_s, out.drain_s):
        lo = np.searchsorted(ends, starts - _BLAME_AFTER_S, side="left")
        hi = np.searchsorted(ends, starts + _BLAME_BEFORE_S, side="right")
        spans.append((lo, np.where(out.planned, lo, hi)))  # faults only
    # Maintenance: [detect, back) holds the end (an event still open at the window end holds it).
    lo = np.searchsorted(ends, out.detect_s, side="left")
    hi = np.searchsorted(ends, out.back_s, side="left")
    spans.append((lo, np.where(out.planned, hi, lo)))
    for lo, hi in spans:
        # Every (event, failed row it blames by time) pair, then whether the row held its node.
        counts = np.maximum(hi - lo, 0)
        event = np.repeat(np.arange(lo.size), counts)
        row = order[_ranges(lo, counts)]
        blamed[row[held.holds(row, out.node[event])]] = True
    return blamed


def _ranges(starts: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """``starts[i], starts[i] + 1, ..., starts[i] + counts[i] - 1`` for every i, concatenated."""
    ends = np.cumsum(counts)
    return np.repeat(starts - (ends - counts), counts) + np.arange(
        int(ends[-1]) if ends.size else 0
    )


class _NodesHeld:
    """Which nodes some rows held, as sorted (row, node) keys: a membership test is a search."""

    def __init__(self, rows: ResearchRows, which: np.ndarray, num_nodes: int) -> None:
        self._which, self._num_nodes = which, num_nodes
        counts = rows.num_nodes[which]
        nodes = rows.nodes[_ranges(rows.node_ptr[which], counts)]
        self._keys = np.sort(np.repeat(np.arange(which.size), counts) * num_nodes + nodes)

    def holds(self, row: np.ndarray, node: np.ndarray) -> np.ndarray:
        """Whether each row (one of ``which``) held the node beside it."""
        if self._keys.size == 0:
            return np.zeros(row.size, dtype=bool)
        keys = np.searchsorted(self._which, row) * self._num_nodes + node
        at = np.minimum(np.searchsorted(self._keys, keys), self._keys.size - 1)
        return np.asarray(self._keys[at] == keys)


def book_down(result: SimulationResult, tally: Tally, nodes: range | None = None) -> int:
    """Book node-event time not covered by an allocation (of the ``nodes`` given, or all);
    returns the down GPU-seconds."""
    sc, out = result.scenario, result.outages
    start, end = sc.start_s, sc.end_s
    lo = np.clip(out.detect_s, start, end)
    hi = np.clip(out.back_s, start, end)
    if nodes is not None:  # outside the nodes: no time
        outside = (out.node < nodes.start) | (out.node >= nodes.stop)
        hi = np.where(outside, lo, hi)
    node_s = (hi - lo) * sc.fleet.gpus_per_node
    planned = int(node_s[out.planned].sum())
    # Only the drop policy keeps a job on a failed node, and maintenance never covers lineage nodes.
    unplanned = int(node_s[~out.planned].sum()) - _allocated_during_outages(result, lo, hi)
    tally.add("down", planned, "planned")
    tally.add("down", unplanned, "unplanned")
    # Failure reasons never say maintenance, which would make the ledger call them planned.
    assert all("maint" not in CAUSES_BY_ID[c].reason.lower() for c in HARDWARE_CAUSES)
    return planned + unplanned


def _allocated_during_outages(result: SimulationResult, lo: np.ndarray, hi: np.ndarray) -> int:
    """GPU-seconds of lineage jobs that kept a node while it was out (policy drop)."""
    out, gpn, end = result.outages, result.scenario.fleet.gpus_per_node, result.scenario.end_s
    overlap = 0
    for run in result.lineage:
        for row in run.rows:
            if row.start_s is None:
                continue
            row_end = row.end_s if row.end_s is not None else end
            nodes = np.asarray(row.nodes, dtype=np.int64)
            hit = np.flatnonzero(
                np.isin(out.node, nodes) & (lo < row_end) & (hi > row.start_s) & ~out.planned
            )
            for i in hit.tolist():
                overlap += gpn * (min(int(hi[i]), row_end) - max(int(lo[i]), row.start_s))
    return overlap
