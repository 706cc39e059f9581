"""What `gpuyield plan` returns: typed records with ``to_dict()`` (the JSON the CLI prints)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from gpuyield.errors import FieldError
from gpuyield.estimate.numbers import NumberLike
from gpuyield.estimate.train import TrainEstimate
from gpuyield.simulate.failure_tables import FailureTable
from gpuyield.simulate.scenario import Policy

#: Interval of the simulated figures: 10th to 90th percentile over seeds.
INTERVAL = (0.1, 0.9)


@dataclass(frozen=True, kw_only=True, slots=True)
class PlanSpec:
    """What a lead types: the run, the cluster, the remedy."""

    params: NumberLike
    tokens: NumberLike
    gpus: NumberLike
    accelerator: str
    policy: Policy = Policy.RESTART
    checkpoint_interval_s: int = 1800
    #: Training-step MFU while the job computes (failures are simulated, not folded in).
    mfu: float = 0.4
    precision: str = "bf16"
    #: Independent seeds simulated (``seed``, ``seed + 1``, ...).
    seeds: int = 10
    seed: int = 0
    #: Bundled scenario name or TOML path whose failure costs and lineage timing the plan uses.
    base: str = "llama3-405b"

    def __post_init__(self) -> None:
        if self.seeds < 1:
            raise FieldError("plan.seeds", "must be >= 1", example="10")
        if self.seed < 0:
            raise FieldError("plan.seed", "must be >= 0", example="0")
        if not 0 < self.mfu <= 1:
            raise FieldError("plan.mfu", f"must be in (0, 1], got {self.mfu}", example="0.4")
        if self.policy not in (Policy.RESTART, Policy.DROP):
            raise FieldError("plan.policy", "must be restart or drop", example="drop")
        if self.checkpoint_interval_s <= 0:
            raise FieldError("plan.checkpoint_interval_s", "must be > 0", example="30m")

    def to_dict(self) -> dict[str, Any]:
        """The inputs as JSON (numbers as typed)."""
        return {
            "params": str(self.params),
            "tokens": str(self.tokens),
            "gpus": str(self.gpus),
            "accelerator": self.accelerator,
            "policy": self.policy.value,
            "checkpoint_interval_s": self.checkpoint_interval_s,
            "mfu": self.mfu,
            "precision": self.precision,
            "seeds": self.seeds,
            "seed": self.seed,
            "base": self.base,
        }


@dataclass(frozen=True, kw_only=True, slots=True)
class Summary:
    """One figure over seeds: median, 10th-90th percentile interval, mean."""

    median: float
    low: float
    high: float
    mean: float

    @classmethod
    def of(cls, values: Sequence[float]) -> Summary:
        """Summarise ``values`` (Weibull plotting positions for the percentiles)."""
        data = np.asarray(values, dtype=float)
        low, high = (
            np.quantile(data, INTERVAL, method="weibull") if data.size > 1 else (data[0],) * 2
        )
        return cls(
            median=float(np.median(data)), low=float(low), high=float(high), mean=float(data.mean())
        )

    def to_dict(self) -> dict[str, Any]:
        """``{"median", "interval": [low, high], "mean"}``."""
        return {"median": self.median, "interval": [self.low, self.high], "mean": self.mean}


@dataclass(frozen=True, kw_only=True, slots=True)
class Variant:
    """One way to run the job, simulated over the plan's seeds."""

    name: str
    policy: Policy
    checkpoint_interval_s: int
    #: Why this variant (what it changes).
    why: str
    wall_days: Summary
    #: GPU-hours held (job and spare GPUs) from submission to completion.
    gpu_hours: Summary
    #: Kept progress over GPU-time held.
    yield_: Summary
    effective_training_time: Summary
    interruptions_mean: float
    #: Wall days of each seed, in seed order.
    days_by_seed: tuple[float, ...]
    #: The scenario of this variant as a TOML file, at the plan's first seed.
    scenario_toml: str

    def to_dict(self) -> dict[str, Any]:
        """The variant's JSON."""
        return {
            "name": self.name,
            "policy": self.policy.value,
            "checkpoint_interval_s": self.checkpoint_interval_s,
            "why": self.why,
            "wall_days": self.wall_days.to_dict(),
            "gpu_hours": self.gpu_hours.to_dict(),
            "yield": self.yield_.to_dict(),
            "effective_training_time": self.effective_training_time.to_dict(),
            "interruptions_mean": self.interruptions_mean,
            "wall_days_by_seed": list(self.days_by_seed),
        }


@dataclass(frozen=True, kw_only=True, slots=True)
class PlanResult:
    """The estimate, the failure model, and the run simulated under each variant."""

    spec: PlanSpec
    estimate: TrainEstimate
    table: FailureTable
    gpus: int
    #: The base scenario's multiplier on the table's rate (1: the table as published).
    rate_scale: float
    #: The plan as given first, then the other policy, then restart at Daly's interval.
    variants: tuple[Variant, ...]
    assumptions: tuple[str, ...]

    @property
    def rate_per_gpu_hour(self) -> float:
        """Interruptions per GPU-hour of this job (the table at its size, times ``rate_scale``)."""
        return self.table.per_gpu_hour(self.gpus) * self.rate_scale

    @property
    def mtbf_minutes(self) -> float:
        """Minutes between interruptions of the whole job."""
        return 60.0 / (self.rate_per_gpu_hour * self.gpus)

    @property
    def planned(self) -> Variant:
        """The variant as given."""
        return self.variants[0]

    def scenario_toml(self) -> str:
        """The planned variant's scenario as a TOML file ``gpuyield simulate run`` reads."""
        return self.planned.scenario_toml

    def changes(self) -> dict[str, float]:
        """Median wall days saved by each other variant against the plan (negative: lost)."""
        base = self.planned.wall_days.median
        return {v.name: base - v.wall_days.median for v in self.variants[1:]}

    def to_dict(self) -> dict[str, Any]:
        """The JSON of ``gpuyield plan --json``."""
        est = self.estimate.to_dict()
        keys = (
            "flops",
            "gpu_hours",
            "wall_days",
            "gpu_hours_expected",
            "gpu_hours_interval",
            "wall_days_expected",
            "wall_days_interval",
            "interval_coverage",
            "interval_support",
            "interval_basis",
        )
        return {
            "inputs": self.spec.to_dict(),
            "estimate": {key: est[key] for key in keys},
            "failure_model": {
                "table": self.table.id,
                "rate_scale": self.rate_scale,
                "rate_per_gpu_hour": self.rate_per_gpu_hour,
                "mtbf_minutes": self.mtbf_minutes,
                "source": self.table.url,
            },
            "variants": [v.to_dict() for v in self.variants],
            "days_saved_vs_plan": self.changes(),
            "assumptions": list(self.assumptions),
        }


def variants_markdown(result: PlanResult) -> str:
    """The variants table of docs/plan.md (regenerated, never typed)."""
    lines = [
        "| variant | checkpoint | wall days (10-90%) | GPU-hours held | yield | days saved |",
        "|---|---|---|---|---|---|",
    ]
    saved = result.changes()
    for v in result.variants:
        d = v.wall_days
        name = f"{v.name} ({v.policy.value})" if v is result.planned else v.name
        days_saved = f"{saved[v.name]:+.1f}" if v.name in saved else ""
        lines.append(
            f"| {name} | {v.checkpoint_interval_s} s | {d.median:.1f} ({d.low:.1f} - {d.high:.1f}) "
            f"| {v.gpu_hours.median / 1e6:.2f}M | {v.yield_.median:.1%} | {days_saved} |"
        )
    return "\n".join(lines) + "\n"
