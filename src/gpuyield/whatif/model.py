"""The fit of one cluster as a typed record: parameters, the scenario's shape, the evidence."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from gpuyield.times import iso_utc
from gpuyield.whatif.fit_lineage import LineageShape
from gpuyield.whatif.maintenance import MaintenanceShape
from gpuyield.whatif.params import MIN_EVENTS, Parameter
from gpuyield.whatif.price import GpuHourPrice
from gpuyield.whatif.stats import LEVEL


@dataclass(frozen=True, kw_only=True, slots=True)
class DownReason:
    """Down time of one node-event reason in the window."""

    reason: str
    planned: bool
    outages: int
    node_hours: float


@dataclass(frozen=True, kw_only=True, slots=True)
class CategoryMix:
    """Jobs of one ledger category: how many, how big, how long."""

    category: str
    jobs: int
    gpu_hours: float
    gpus_median: float
    gpus_max: int
    duration_median_s: float
    duration_p90_s: float


@dataclass(frozen=True, kw_only=True, slots=True)
class IdleStretches:
    """Whole nodes idle (no job, in service) in the window: how long their idle stretches ran."""

    stretches: int
    node_hours: float
    median_h: float
    p90_h: float
    longest_h: float


@dataclass(frozen=True, kw_only=True, slots=True)
class Evidence:
    """Tables the fit reports beside its parameters."""

    down_by_reason: tuple[DownReason, ...]
    job_mix: tuple[CategoryMix, ...]
    idle: IdleStretches


@dataclass(frozen=True, kw_only=True, slots=True)
class LedgerShares:
    """A ledger's categories as shares of installed GPU-time (the real one, or a replay's)."""

    installed_gpu_seconds: float
    shares: dict[str, float]
    """Category -> share of installed GPU-seconds."""

    @property
    def yield_(self) -> float:
        """Released / installed."""
        return self.shares.get("released", 0.0)


@dataclass(frozen=True, kw_only=True, slots=True)
class ClusterFit:
    """The simulator's parameters for one cluster, fitted from its store over one window."""

    db: str
    cluster: str
    start_s: int
    end_s: int
    num_nodes: int
    gpus_per_node: int
    parameters: tuple[Parameter, ...]
    lineage: tuple[LineageShape, ...]
    research_classes: tuple[int, ...]
    """GPUs per job of each research class (none: no research jobs)."""
    backfill: bool
    """Research ran on lineage nodes outside their runs."""
    maintenance: tuple[MaintenanceShape, ...]
    real: LedgerShares
    evidence: Evidence
    notes: tuple[str, ...]
    """What could not be fitted, or was changed to fit the simulator."""
    price: GpuHourPrice
    """A GPU-hour's price under the manifest's ``[prices]`` (projections without a flag's)."""

    @property
    def days(self) -> float:
        """Window length in days."""
        return (self.end_s - self.start_s) / 86400.0

    def values(self) -> dict[str, float]:
        """Every parameter's value by key."""
        return {p.key: p.value for p in self.parameters}

    def parameter(self, key: str) -> Parameter:
        """The parameter ``key`` (KeyError when the fit has none)."""
        for p in self.parameters:
            if p.key == key:
                return p
        raise KeyError(key)

    @property
    def refusals(self) -> tuple[str, ...]:
        """Why projections are refused: each parameter with too few events behind it."""
        return tuple(
            f"{p.key}: {p.events} events in the window, {MIN_EVENTS} needed ({p.evidence})"
            for p in self.parameters
            if p.refused
        )

    def to_dict(self) -> dict[str, Any]:
        """JSON shape (docs/whatif.md)."""
        return {
            "db": self.db,
            "cluster": self.cluster,
            "window": {"start": iso_utc(self.start_s), "end": iso_utc(self.end_s)},
            "fleet": {"num_nodes": self.num_nodes, "gpus_per_node": self.gpus_per_node},
            "interval_level": LEVEL,
            "min_events": MIN_EVENTS,
            "parameters": [p.to_dict() for p in self.parameters],
            "lineage": [asdict(s) for s in self.lineage],
            "research_classes": list(self.research_classes),
            "backfill_lineage_gaps": self.backfill,
            "maintenance": [m.to_dict() for m in self.maintenance],
            "ledger": {
                "installed_gpu_seconds": self.real.installed_gpu_seconds,
                "shares": self.real.shares,
                "yield": self.real.yield_,
            },
            "evidence": {
                "down_by_reason": [asdict(r) for r in self.evidence.down_by_reason],
                "job_mix": [asdict(r) for r in self.evidence.job_mix],
                # Flat records of scalars: asdict is each one's fields, in order.
                "idle_stretches": asdict(self.evidence.idle),
            },
            "notes": list(self.notes),
            "refusals": list(self.refusals),
        }
