"""Effective ("all-in") MFU of published training runs, and the range an estimate takes from it.

The essay's 40% is a *training-step* MFU: the share of peak a step achieves while the job runs.
Reported GPU-hours also hold restarts, evaluation, stragglers, idle inside the allocation and
annealing stages, so ``6 N D / (reported hours x peak)`` (the *effective* MFU) sits lower. The
catalog's runs give its distribution; an estimate takes the spread (lowest to highest, median as
the central value) of the runs on the same accelerator generation, or of every run where that
generation has fewer than ``MIN_GROUP`` runs.

Every effective MFU here is against the dense BF16 peak (FP16 on V100), FP8 runs included, so one
scale compares all runs; an estimate's range multiplies by the same BF16 peak.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from functools import cache

from gpuyield.estimate import formulas as f
from gpuyield.estimate.catalog import Accelerator, Model, get_accelerator, list_models
from gpuyield.estimate.numbers import Range

#: A generation with fewer runs than this borrows the whole catalog's spread.
MIN_GROUP = 5


@dataclass(frozen=True, kw_only=True, slots=True)
class EffectiveRun:
    """One catalog run with reported hours, and the effective MFU they imply."""

    model: Model
    accelerator: Accelerator
    #: 6 * N * D, FLOP (central N and D).
    flops: float
    #: Reported GPU-hours (or GPUs x days x 24).
    reported_gpu_hours: float
    #: 6 N D / (reported hours x 3600 x BF16 peak).
    effective_mfu: float

    @property
    def generation(self) -> str:
        """Accelerator generation (``ampere``, ``hopper``, ``tpu``)."""
        return self.accelerator.generation or self.accelerator.id


@dataclass(frozen=True, kw_only=True, slots=True)
class EffectiveMfu:
    """The effective-MFU range an estimate uses, and which runs it came from."""

    #: Lowest, median and highest effective MFU of the runs in ``basis``.
    value: Range
    #: Which runs (``hopper runs`` or ``all runs``).
    basis: str
    #: How many runs.
    count: int


@dataclass(frozen=True, kw_only=True, slots=True)
class GroupStats:
    """Distribution of effective MFU in one group (an era, a generation, dense or MoE)."""

    #: ``era``, ``generation`` or ``architecture``.
    dimension: str
    #: The group's label (``2023``, ``hopper``, ``moe``).
    group: str
    count: int
    low: float
    quartile_1: float
    median: float
    quartile_3: float
    high: float


@cache
def effective_runs() -> tuple[EffectiveRun, ...]:
    """Every catalog run that has tokens, reported hours and is not excluded from validation."""
    runs = []
    for model in list_models():
        hours = model.reported_hours()
        if hours is None or model.tokens is None or not model.validate:
            continue
        chip = get_accelerator(model.accelerator)
        flops = f.training_flops(model.active_params.central, model.tokens.central)
        runs.append(
            EffectiveRun(
                model=model,
                accelerator=chip,
                flops=flops,
                reported_gpu_hours=hours.central,
                effective_mfu=f.implied_mfu(flops, hours.central, chip.peak_tflops_bf16),
            )
        )
    return tuple(runs)


def effective_mfu_for(generation: str | None, *, exclude: str | None = None) -> EffectiveMfu:
    """The spread of effective MFU on ``generation`` (all runs if it has too few).

    ``exclude`` leaves one run out, so a validation never tests a run against its own figure.
    """
    pool = [run for run in effective_runs() if run.model.id != exclude]
    mine = [run for run in pool if generation and run.generation == generation]
    chosen, basis = (mine, f"{generation} runs") if len(mine) >= MIN_GROUP else (pool, "all runs")
    values = sorted(run.effective_mfu for run in chosen)
    return EffectiveMfu(
        value=Range(low=values[0], central=statistics.median(values), high=values[-1]),
        basis=basis,
        count=len(values),
    )


def step_to_effective_ratio() -> Range:
    """Effective over training-step MFU, from runs that report both (lowest, median, highest)."""
    ratios = sorted(
        run.effective_mfu / run.model.reported_mfu.central
        for run in effective_runs()
        if run.model.reported_mfu is not None
    )
    return Range(low=ratios[0], central=statistics.median(ratios), high=ratios[-1])


def distribution() -> tuple[GroupStats, ...]:
    """Effective MFU by era (year), accelerator generation and dense vs MoE."""
    keys = {
        "era": lambda run: str(run.model.year or "unknown"),
        "generation": lambda run: run.generation,
        "architecture": lambda run: "moe" if run.model.is_moe else "dense",
    }
    out = []
    for dimension, key in keys.items():
        groups: dict[str, list[float]] = {}
        for run in effective_runs():
            groups.setdefault(key(run), []).append(run.effective_mfu)
        for group in sorted(groups):
            out.append(_stats(dimension, group, groups[group]))
    return tuple(out)


def _stats(dimension: str, group: str, values: list[float]) -> GroupStats:
    ordered = sorted(values)
    if len(ordered) > 1:
        q1, _, q3 = statistics.quantiles(ordered, n=4, method="inclusive")
    else:
        q1 = q3 = ordered[0]
    return GroupStats(
        dimension=dimension,
        group=group,
        count=len(ordered),
        low=ordered[0],
        quartile_1=q1,
        median=statistics.median(ordered),
        quartile_3=q3,
        high=ordered[-1],
    )


def distribution_markdown() -> str:
    """The effective-MFU table of docs/estimate.md (regenerated, never typed)."""
    lines = [
        "| by | group | runs | lowest | 1st quartile | median | 3rd quartile | highest |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for s in distribution():
        lines.append(
            f"| {s.dimension} | {s.group} | {s.count} | {s.low:.1%} | {s.quartile_1:.1%} "
            f"| {s.median:.1%} | {s.quartile_3:.1%} | {s.high:.1%} |"
        )
    return "\n".join(lines) + "\n"
