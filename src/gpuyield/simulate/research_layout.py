"""How research nodes are laid out in class partitions, and how many jobs each class draws.

``plan_layout`` splits the research nodes into one partition per size class by GPU-time share;
``expected_jobs`` is the mean number of jobs a class draws so that its offered load is the
scenario's (``research.py`` draws a Poisson count around it; ``gpuyield whatif`` solves the load
and shares that draw the arrivals a cluster's window saw).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gpuyield.simulate.scenario import JobClass, Scenario


@dataclass(frozen=True, kw_only=True, slots=True)
class _Layout:
    """Nodes of one class's partition and how its units map to them."""

    cls: JobClass
    first_node: int
    num_nodes: int
    #: Units (node slices) per node for small jobs; 0 when jobs take whole nodes.
    per_node: int
    #: Nodes per job (1 for small jobs).
    span: int

    @property
    def num_units(self) -> int:
        """Schedulable units: node slices for small jobs, whole nodes for multi-node jobs."""
        return self.num_nodes * self.per_node if self.per_node else self.num_nodes

    @property
    def units_per_job(self) -> int:
        return 1 if self.per_node else self.span

    def unit_node(self) -> np.ndarray:
        """Node of every unit."""
        units = np.arange(self.num_units, dtype=np.int64)
        return self.first_node + (units // self.per_node if self.per_node else units)


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


def borrower_class(layouts: list[_Layout]) -> int | None:
    """The class that runs on lent lineage nodes: the largest single-node class."""
    return max(
        (i for i, lay in enumerate(layouts) if lay.per_node and lay.num_units),
        key=lambda i: layouts[i].cls.num_gpus,
        default=None,
    )


def _expected_jobs(
    lay: _Layout,
    outcomes: list[str],
    probs: np.ndarray,
    gpn: int,
    span_s: float,
    lent_node_s: int,
    load: float,
) -> float:
    """Mean number of jobs of one class that keep its nodes ``load`` busy over the window."""
    cls = lay.cls
    mean_full = min(cls.median_duration_s * np.exp(cls.duration_sigma**2 / 2), cls.time_limit_s)
    # Jobs that stop early run half their duration on average (uniform fraction below).
    mean_run = mean_full * (probs[outcomes.index("completed")] if "completed" in outcomes else 0)
    mean_run += (
        mean_full
        * 0.5
        * (1 - (probs[outcomes.index("completed")] if "completed" in outcomes else 0))
    )
    capacity = lay.num_nodes * gpn * span_s
    # Lent lineage nodes bring their own demand, so they are not just idle capacity; while the run
    # holds them the borrowing class queues more (research is squeezed by the big run).
    capacity += lent_node_s * gpn
    return float(load * capacity / (mean_run * cls.num_gpus))


def expected_jobs(
    scenario: Scenario, layouts: list[_Layout], lent_node_s: int = 0
) -> tuple[float, ...]:
    """Mean number of research jobs each class draws in the window (what ``draw_jobs`` draws a
    Poisson count around); 0 for a class without nodes."""
    cfg = scenario.research
    outcomes = list(cfg.end_states)
    probs = np.array([cfg.end_states[o] for o in outcomes], dtype=float)
    probs /= probs.sum()
    span = float(scenario.end_s - scenario.start_s)
    borrower = borrower_class(layouts)
    return tuple(
        0.0
        if lay.num_units == 0
        else _expected_jobs(
            lay,
            outcomes,
            probs,
            scenario.fleet.gpus_per_node,
            span,
            lent_node_s if index == borrower else 0,
            cfg.load,
        )
        for index, lay in enumerate(layouts)
    )


def expected_research_jobs(scenario: Scenario, lent_node_s: int = 0) -> tuple[float, ...]:
    """Mean research jobs per class (``research.classes`` order) the simulator draws for
    ``scenario``, its research nodes laid out as ``simulate`` lays them out; ``lent_node_s`` is
    the node-seconds lineage groups lend research (``backfill_lineage_gaps``)."""
    first = scenario.group_nodes_total()
    layouts = plan_layout(scenario, first, scenario.fleet.num_nodes - first)
    return expected_jobs(scenario, layouts, lent_node_s)
