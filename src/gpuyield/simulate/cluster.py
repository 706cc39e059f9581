"""One simulation of a whole cluster: fleet failures, lineage runs, research jobs (no files)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gpuyield.simulate.failures import Outages, draw_outages
from gpuyield.simulate.lineage import LineageResult, simulate_lineage
from gpuyield.simulate.research import (
    Lend,
    ResearchJobs,
    ResearchRows,
    draw_jobs,
    lent_node_s,
    schedule,
)
from gpuyield.simulate.research_layout import _Layout, plan_layout
from gpuyield.simulate.scenario import Scenario

# Independent random streams (SeedSequence spawn keys), so adding research jobs does not change the
# failures a lineage run sees.
_STREAM_OUTAGES = 0
_STREAM_RESEARCH = 1
_STREAM_LINEAGE = 100


@dataclass(frozen=True, kw_only=True, slots=True)
class SimulationResult:
    """Everything one simulation produced, before it is written as files."""

    scenario: Scenario
    outages: Outages
    lineage: tuple[LineageResult, ...]
    #: Node ranges per lineage run: (first node, job nodes, spare nodes).
    groups: tuple[tuple[int, int, int], ...]
    layouts: tuple[_Layout, ...]
    jobs: ResearchJobs | None
    rows: ResearchRows | None

    @property
    def num_events(self) -> int:
        """Simulated events: outages, lineage job rows, research rows (each a start and an end)."""
        rows = len(self.rows) if self.rows is not None else 0
        return len(self.outages) + sum(len(r.rows) for r in self.lineage) + 2 * rows


def rng_for(scenario: Scenario, stream: int) -> np.random.Generator:
    """The random stream ``stream`` of this scenario's seed."""
    return np.random.default_rng(np.random.SeedSequence(scenario.seed, spawn_key=(stream,)))


def simulate(scenario: Scenario) -> SimulationResult:
    """Simulate ``scenario`` (seeded: the same scenario gives the same result)."""
    outages = draw_outages(scenario, rng_for(scenario, _STREAM_OUTAGES))
    results, groups = [], []
    cursor, next_id = 0, 1
    for index, run in enumerate(scenario.lineage):
        need = scenario.run_nodes(run)
        group = list(range(cursor, cursor + need))
        spares = list(range(cursor + need, cursor + need + run.spare_nodes))
        result = simulate_lineage(
            scenario,
            run,
            group,
            spares,
            outages,
            rng_for(scenario, _STREAM_LINEAGE + index),
            next_id,
        )
        next_id = result.next_job_id
        results.append(result)
        groups.append((cursor, need, run.spare_nodes))
        cursor += need + run.spare_nodes
    jobs = rows = None
    layouts: list[_Layout] = []
    if scenario.research.enabled and cursor < scenario.fleet.num_nodes:
        layouts = plan_layout(scenario, cursor, scenario.fleet.num_nodes - cursor)
        lends = _lends(scenario, results, groups)
        lent = lent_node_s(lends, scenario.start_s, scenario.end_s)
        jobs = draw_jobs(scenario, layouts, rng_for(scenario, _STREAM_RESEARCH), next_id, lent)
        rows = schedule(scenario, layouts, jobs, outages, lends)
    return SimulationResult(
        scenario=scenario,
        outages=outages,
        lineage=tuple(results),
        groups=tuple(groups),
        layouts=tuple(layouts),
        jobs=jobs,
        rows=rows,
    )


def _lends(
    scenario: Scenario, results: list[LineageResult], groups: list[tuple[int, int, int]]
) -> tuple[Lend, ...]:
    """Lineage nodes research may use before and after their run (``backfill_lineage_gaps``)."""
    if not scenario.research.backfill_lineage_gaps:
        return ()
    lends = []
    for run, result, (first, need, spares) in zip(scenario.lineage, results, groups, strict=True):
        held_from = scenario.start_s + round(run.start_day * 86400)
        if held_from >= scenario.end_s:
            held_from = scenario.end_s
        held_to = result.completed_s if result.completed_s is not None else scenario.end_s
        lends += [
            Lend(node=n, held_from_s=held_from, held_to_s=held_to)
            for n in range(first, first + need + spares)
        ]
    return tuple(lends)
