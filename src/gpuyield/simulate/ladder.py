"""What enforcing the scaling ladder is worth: the research workload with and without rung skipping.

The knob is the research workload's ``ladder_skip_share`` (jobs above the smallest size class that
skip their lower rung) and ``ladder_skip_failure_multiplier`` (how much likelier they end failed,
cancelled or OOM). For each share this draws the research jobs of a cluster (the simulator's own
``draw_jobs``, without scheduling: the demand, not the queue) and sums their GPU-time by end state.
Enforcing the ladder sets the share to 0 and pays for it: every job that would have skipped runs
its lower rung first, ``lower GPUs / its GPUs`` of its full GPU-time (one size class down, for as
long). Saved = waste at the share - waste at 0 - that climb cost.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from gpuyield.errors import FieldError
from gpuyield.simulate.research import (
    _OUTCOME_CODES,
    LADDER_BAD_OUTCOMES,
    draw_jobs,
)
from gpuyield.simulate.research_layout import plan_layout
from gpuyield.simulate.scenario import FleetConfig, ResearchConfig, Scenario

_BAD_CODES = tuple(_OUTCOME_CODES[o] for o in LADDER_BAD_OUTCOMES)
#: Where the default end-state mix comes from.
END_STATES_SOURCE = "RSC-1, Kokolis et al., arXiv 2410.21680"


@dataclass(frozen=True, kw_only=True, slots=True)
class LadderPoint:
    """One skip share, mean over seeds (GPU-seconds of the research jobs drawn)."""

    skip_share: float
    """Share of jobs above the smallest class that skip their lower rung."""
    research_gpu_s: float
    """GPU-time the research jobs ran."""
    wasted_gpu_s: float
    """Of it, in jobs that ended failed, cancelled or OOM (diverged runs are cancelled too)."""
    climb_gpu_s: float
    """What enforcing would add: the lower-rung runs of the jobs that skipped."""
    saved_gpu_s: float
    """Waste at this share - waste with the ladder enforced - the climb cost."""

    @property
    def wasted_share(self) -> float:
        """Wasted / run."""
        return self.wasted_gpu_s / self.research_gpu_s if self.research_gpu_s else 0.0


@dataclass(frozen=True, kw_only=True, slots=True)
class LadderSweep:
    """The ladder's worth across skip shares, for one cluster size."""

    num_gpus: int
    """GPUs of the cluster (all research)."""
    days: float
    """Window."""
    multiplier: float
    """``ladder_skip_failure_multiplier``."""
    seeds: int
    """Draws per share."""
    enforced: LadderPoint
    """Share 0: the ladder enforced (no climb cost counted here)."""
    points: tuple[LadderPoint, ...]
    """One per skip share asked."""
    research: ResearchConfig
    """The research workload drawn (its classes, load and end-state mix), stated on the output."""

    def to_dict(self) -> dict[str, object]:
        """The ``--json`` shape and ``ladder-sweep.json`` (GPU-hours, docs/ladder.md)."""

        def point(p: LadderPoint) -> dict[str, float]:
            return {
                "skip_share": p.skip_share,
                "research_gpu_hours": p.research_gpu_s / 3600,
                "wasted_gpu_hours": p.wasted_gpu_s / 3600,
                "wasted_share": p.wasted_share,
                "climb_gpu_hours": p.climb_gpu_s / 3600,
                "saved_gpu_hours": p.saved_gpu_s / 3600,
            }

        r = self.research
        return {
            "param": "ladder-skip-share",
            "num_gpus": self.num_gpus,
            "days": self.days,
            "skip_failure_multiplier": self.multiplier,
            "seeds": self.seeds,
            "assumptions": {
                "research_load": r.load,
                "classes": [dataclasses.asdict(c) for c in r.classes],
                "end_states": dict(r.end_states),
                "end_states_source": END_STATES_SOURCE,
                "diverged_share": r.diverged_share,
                "climb": "the lower rung: one size class down, for as long as the job",
            },
            "enforced": point(self.enforced),
            "points": [point(p) for p in self.points],
        }

    def assumption_lines(self) -> list[str]:
        """What shaped the numbers, one line each (the terminal header)."""
        r = self.research
        classes = ", ".join(f"{c.num_gpus} GPUs {c.gpu_time_share:.0%}" for c in r.classes)
        return [
            f"research workload: load {r.load:g}; classes by GPU-time share: {classes}",
            "end states: "
            + ", ".join(f"{k} {v:.1%}" for k, v in r.end_states.items())
            + f" ({END_STATES_SOURCE}); diverged runs {r.diverged_share:.0%}",
            f"a skipping job ends failed, cancelled or OOM x{self.multiplier:g} as often; "
            "enforcing runs its lower rung first (one size class down, for as long); "
            f"mean of {self.seeds} seed(s)",
        ]


def _drawn(scenario: Scenario, seed: int) -> tuple[float, float, np.ndarray, np.ndarray]:
    """(GPU-s run, GPU-s wasted, per-job full GPU-s, per-job class GPUs) of one draw."""
    scenario = dataclasses.replace(scenario, seed=seed)
    layouts = plan_layout(scenario, 0, scenario.fleet.num_nodes)
    jobs = draw_jobs(scenario, layouts, np.random.default_rng(seed), 1)
    gpus = np.array([lay.cls.num_gpus for lay in layouts])[jobs.cls]
    run_gpu_s = jobs.run_s.astype(float) * gpus
    bad = np.isin(jobs.outcome, _BAD_CODES)
    return float(run_gpu_s.sum()), float(run_gpu_s[bad].sum()), run_gpu_s, gpus


def _climb_gpu_s(scenario: Scenario, run_gpu_s: np.ndarray, gpus: np.ndarray) -> float:
    """Expected lower-rung GPU-time of the jobs that skip (a ``skip_share`` of each upper class)."""
    sizes = sorted({c.num_gpus for c in scenario.research.classes})
    lower = {g: sizes[i - 1] for i, g in enumerate(sizes) if i > 0}
    ratio = np.array([lower.get(int(g), 0) / g for g in gpus])
    return float(scenario.research.ladder_skip_share * (run_gpu_s * ratio).sum())


def _means(scenario: Scenario, seeds: int) -> tuple[float, float, float, float]:
    """(skip share, GPU-s run, GPU-s wasted, climb GPU-s), each the mean over seeds."""
    draws = [_drawn(scenario, seed) for seed in range(seeds)]
    return (
        scenario.research.ladder_skip_share,
        float(np.mean([d[0] for d in draws])),
        float(np.mean([d[1] for d in draws])),
        float(np.mean([_climb_gpu_s(scenario, d[2], d[3]) for d in draws])),
    )


def run_ladder_sweep(
    *,
    num_gpus: int = 100_000,
    days: float = 30.0,
    skip_shares: tuple[float, ...] = (0.1, 0.2, 0.3, 0.5),
    multiplier: float = 2.0,
    seeds: int = 3,
    research: ResearchConfig | None = None,
) -> LadderSweep:
    """Waste of the research workload at each skip share, against the ladder enforced."""
    if num_gpus < 8:
        raise FieldError("ladder_sweep.num_gpus", "must be >= 8", example="100000")
    if seeds < 1:
        raise FieldError("ladder_sweep.seeds", "must be >= 1", example="3")
    if not skip_shares:
        raise FieldError("ladder_sweep.skip_shares", "must not be empty", example="0.1,0.3,0.5")
    if days <= 0:
        raise FieldError("ladder_sweep.days", "must be > 0", example="30")
    base = research or ResearchConfig(enabled=True)
    scenarios = [
        Scenario(
            name="ladder",
            days=days,
            fleet=FleetConfig(num_nodes=num_gpus // 8),
            research=dataclasses.replace(
                base,
                enabled=True,
                ladder_skip_share=share,
                ladder_skip_failure_multiplier=multiplier,
            ),
        )
        for share in (0.0, *skip_shares)
    ]
    means = [_means(scenario, seeds) for scenario in scenarios]
    enforced_waste = means[0][2]
    points = [
        LadderPoint(
            skip_share=share,
            research_gpu_s=run,
            wasted_gpu_s=wasted,
            climb_gpu_s=climb,
            saved_gpu_s=wasted - enforced_waste - climb,
        )
        for share, run, wasted, climb in means
    ]
    return LadderSweep(
        num_gpus=num_gpus,
        days=days,
        multiplier=multiplier,
        seeds=seeds,
        enforced=points[0],
        points=tuple(points[1:]),
        research=scenarios[0].research,
    )


def ladder_sweep_from_options(
    *, out: Path, values: str | None, seeds: int, days: float, gpus: int, multiplier: float
) -> LadderSweep:
    """``simulate sweep --param ladder-skip-share``: parse, run, write ``ladder-sweep.json``."""
    try:
        shares = tuple(float(v) for v in values.split(",")) if values else (0.1, 0.2, 0.3, 0.5)
    except ValueError as error:
        raise FieldError(
            "ladder_sweep.skip_shares",
            f"{values!r} is not a list of shares",
            example="0.1,0.3,0.5",
        ) from error
    if any(not 0 < s <= 1 for s in shares):
        raise FieldError(
            "ladder_sweep.skip_shares", f"{values!r}: skip shares must be in (0, 1]", example="0.3"
        )
    if multiplier < 0:
        raise FieldError("ladder_sweep.multiplier", "must be >= 0", example="2")
    sweep = run_ladder_sweep(
        num_gpus=gpus, days=days, skip_shares=shares, multiplier=multiplier, seeds=seeds
    )
    out.mkdir(parents=True, exist_ok=True)
    (out / "ladder-sweep.json").write_text(json.dumps(sweep.to_dict(), indent=2) + "\n")
    return sweep
