"""Check the fit: simulate the fitted scenario over the same window, ingest its files into a new
store, compute its ledger, and compare it with the real one category by category.

The replay goes the whole way a cluster's data goes (Slurm-format files, ``ingest slurm``, the
ledger) for the first ``LEDGER_REPLAYS`` seeds, so the real ledger's estimates (lost progress
without telemetry, hardware blame) are made the same way on the replay; every seed's simulation
also gives its truth, which costs no ingest. The replay's share of a category is the truths' mean
over all seeds plus the mean difference ledger - truth of the ledger replays.

A category misses when the real share lies further from the replay's than the tolerance plus the
replay's own prediction interval (Student's t over the seeds: a small cluster varies that much by
chance alone, and one window is one draw).
"""

from __future__ import annotations

import math
import statistics
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpuyield import store
from gpuyield.categories import Category
from gpuyield.ingest.slurm import SlurmInputs, ingest_slurm
from gpuyield.ledger import backend_for, compute_ledger
from gpuyield.simulate import SimulationResult, compute_truth, simulate, write_outputs
from gpuyield.whatif.fit import shares_of
from gpuyield.whatif.model import ClusterFit, LedgerShares
from gpuyield.whatif.scenario_out import scenario_file
from gpuyield.whatif.stats import t_quantile

#: Default tolerance: a category's replay share may differ from the real one by 2 points of
#: installed GPU-time (plus the replay's prediction interval).
TOLERANCE = 0.02
#: Seeds of the default replay.
REPLAY_SEEDS = 6
#: Of them, how many go through files, ingest and ledger.
LEDGER_REPLAYS = 2


@dataclass(frozen=True, kw_only=True, slots=True)
class ReplayCategory:
    """One category: the real share of installed GPU-time against the replay's."""

    category: str
    real: float
    replay_mean: float
    """Mean over seeds (truth, corrected by the ledger replays' difference from truth)."""
    replay_sd: float
    """Standard deviation over seeds."""
    allowed: float
    """The tolerance plus the replay's prediction interval."""

    @property
    def missed(self) -> bool:
        """The real share lies outside the replay mean +- allowed."""
        return abs(self.real - self.replay_mean) > self.allowed

    def to_dict(self) -> dict[str, Any]:
        """JSON shape."""
        return {
            "category": self.category,
            "real": self.real,
            "replay_mean": self.replay_mean,
            "replay_sd": self.replay_sd,
            "allowed": self.allowed,
            "missed": self.missed,
        }


@dataclass(frozen=True, kw_only=True, slots=True)
class ReplayCheck:
    """The replay of a fit and whether it passed."""

    seeds: int
    tolerance: float
    categories: tuple[ReplayCategory, ...]
    refusals: tuple[str, ...]
    """Parameters with too few events (the fit's own refusals)."""

    @property
    def misses(self) -> tuple[str, ...]:
        """One line per category the replay missed."""
        return tuple(
            f"{c.category}: real {c.real:.1%} of installed, replay {c.replay_mean:.1%} "
            f"(allowed +-{c.allowed:.1%})"
            for c in self.categories
            if c.missed
        )

    @property
    def passed(self) -> bool:
        """No category missed and no parameter rests on too few events."""
        return not self.misses and not self.refusals

    @property
    def reasons(self) -> tuple[str, ...]:
        """Why projections are refused (empty when the check passed)."""
        return tuple(f"replay missed {m}" for m in self.misses) + tuple(
            f"too few events: {r}" for r in self.refusals
        )

    def to_dict(self) -> dict[str, Any]:
        """JSON shape."""
        return {
            "seeds": self.seeds,
            "tolerance": self.tolerance,
            "passed": self.passed,
            "categories": [c.to_dict() for c in self.categories],
            "reasons": list(self.reasons),
        }


def replay_check(
    fit: ClusterFit, *, seeds: int = REPLAY_SEEDS, tolerance: float = TOLERANCE
) -> ReplayCheck:
    """Replay ``fit`` with ``seeds`` seeds and compare the replay's ledger with the real one."""
    truths: list[dict[str, float]] = []
    offsets: list[dict[str, float]] = []
    with tempfile.TemporaryDirectory(prefix="gpuyield-replay-") as tmp:
        for seed in range(seeds):
            scenario = scenario_file(fit, seed=seed).scenario()
            result = simulate(scenario)
            truth = compute_truth(result)
            shares = {k: v / truth.installed_gpu_seconds for k, v in truth.categories.items()}
            truths.append(shares)
            if seed < LEDGER_REPLAYS:
                ledger = _ledger_replay(result, Path(tmp) / f"seed-{seed}")
                offsets.append({k: ledger.shares.get(k, 0.0) - v for k, v in shares.items()})
    categories = tuple(
        _category(c.value, fit.real.shares.get(c.value, 0.0), truths, offsets, tolerance)
        for c in Category
    )
    return ReplayCheck(
        seeds=seeds, tolerance=tolerance, categories=categories, refusals=fit.refusals
    )


def _category(
    name: str,
    real: float,
    truths: list[dict[str, float]],
    offsets: list[dict[str, float]],
    tolerance: float,
) -> ReplayCategory:
    values = [t.get(name, 0.0) for t in truths]
    offset = statistics.fmean(o.get(name, 0.0) for o in offsets) if offsets else 0.0
    n = len(values)
    sd = statistics.stdev(values) if n > 1 else 0.0
    spread = t_quantile(n - 1) * sd * math.sqrt(1 + 1 / n) if n > 1 else 0.0
    return ReplayCategory(
        category=name,
        real=real,
        replay_mean=statistics.fmean(values) + offset,
        replay_sd=sd,
        allowed=tolerance + spread,
    )


def _ledger_replay(result: SimulationResult, out: Path) -> LedgerShares:
    """One simulation the whole way: files, ingest into a new store, ledger."""
    scenario = result.scenario
    write_outputs(result, out)
    db = out.with_suffix(".duckdb")
    # The simulated capture was taken at the scenario's end, which may lie after this machine's
    # clock (a fit of a window that ends in the future, as the generated 10M-job store does).
    ingest_slurm(
        db,
        SlurmInputs.from_dir(out),
        since_s=scenario.start_s,
        until_s=scenario.end_s,
        now_s=scenario.end_s,
    )
    con = store.connect(db, read_only=True)
    try:
        ledger = compute_ledger(backend_for(con), since_s=scenario.start_s, until_s=scenario.end_s)
        return shares_of(ledger)
    finally:
        con.close()
