"""Check the fit: simulate the fitted scenario over the same window, ingest its files into a new
store, compute its ledger, and compare it with the real one category by category.

The replay goes the whole way a cluster's data goes (Slurm-format files, ``ingest slurm``, the
ledger), so it compares like with like: the real ledger's estimates (lost progress without
telemetry, hardware blame) are made the same way on the replay. A category misses when the real
share of installed GPU-time lies further than the tolerance from the replays' mean, the
tolerance widened by the replays' own seed-to-seed range (a small cluster varies that much by
chance alone).
"""

from __future__ import annotations

import statistics
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpuyield import store
from gpuyield.categories import Category
from gpuyield.ingest.slurm import SlurmInputs, ingest_slurm
from gpuyield.ledger import backend_for, compute_ledger
from gpuyield.simulate import simulate, write_outputs
from gpuyield.whatif.fit import shares_of
from gpuyield.whatif.model import ClusterFit, LedgerShares
from gpuyield.whatif.scenario_out import scenario_file

#: Default tolerance: a category's replay share may differ from the real one by 2 points of
#: installed GPU-time (plus the replays' seed-to-seed range).
TOLERANCE = 0.02
#: Seeds of the default replay.
REPLAY_SEEDS = 2


@dataclass(frozen=True, kw_only=True, slots=True)
class ReplayCategory:
    """One category: the real share of installed GPU-time against the replays'."""

    category: str
    real: float
    replay_mean: float
    replay_low: float
    replay_high: float
    allowed: float
    """The tolerance plus the replays' range."""

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
            "replay_range": [self.replay_low, self.replay_high],
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
    """Replay ``fit`` with ``seeds`` seeds and compare its ledgers with the real one."""
    with tempfile.TemporaryDirectory(prefix="gpuyield-replay-") as tmp:
        replays = [_replay(fit, seed, Path(tmp) / f"seed-{seed}") for seed in range(seeds)]
    categories = []
    for category in Category:
        name = category.value
        values = [r.shares.get(name, 0.0) for r in replays]
        categories.append(
            ReplayCategory(
                category=name,
                real=fit.real.shares.get(name, 0.0),
                replay_mean=statistics.fmean(values),
                replay_low=min(values),
                replay_high=max(values),
                allowed=tolerance + (max(values) - min(values)),
            )
        )
    return ReplayCheck(
        seeds=seeds, tolerance=tolerance, categories=tuple(categories), refusals=fit.refusals
    )


def _replay(fit: ClusterFit, seed: int, out: Path) -> LedgerShares:
    """One replay: simulate, write, ingest, ledger."""
    scenario = scenario_file(fit, seed=seed).scenario()
    write_outputs(simulate(scenario), out)
    db = out.with_suffix(".duckdb")
    ingest_slurm(db, SlurmInputs.from_dir(out), since_s=scenario.start_s, until_s=scenario.end_s)
    con = store.connect(db, read_only=True)
    try:
        ledger = compute_ledger(backend_for(con), since_s=scenario.start_s, until_s=scenario.end_s)
        return shares_of(ledger)
    finally:
        con.close()
