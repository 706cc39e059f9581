"""``gpuyield report ladder``: each family's climb, the runs that skipped a rung, and what they wasted."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpuyield import store
from gpuyield.errors import EmptyDataError
from gpuyield.ledger import backend_for, compute_ledger
from gpuyield.ledger.ladder import LadderAnalysis, analyse_ladder
from gpuyield.times import iso_utc as iso


@dataclass(frozen=True, kw_only=True, slots=True)
class LadderReport:
    """The ladder analysis of one window of the store."""

    window_start_s: int
    """Window of the GPU-seconds (the climb itself is judged over all stored history)."""
    window_end_s: int
    """Window end (exclusive)."""
    analysis: LadderAnalysis
    """Families, runs and the waste comparison."""

    def to_dict(self) -> dict[str, Any]:
        """The ``--json`` shape (docs/ladder.md)."""
        policy = self.analysis.policy
        return {
            "window": {"start": iso(self.window_start_s), "end": iso(self.window_end_s)},
            "ladder": {"rungs": list(policy.rungs), "within_days": policy.within_days},
            "families": [f.to_dict() for f in self.analysis.families],
            "waste_in_skipped_rungs": self.analysis.waste.to_dict(),
        }


def build_ladder(
    db: str | Path, *, since_s: int | None = None, until_s: int | None = None
) -> LadderReport:
    """Compute the ledger of the store at ``db`` and judge every family's runs against the ladder."""
    con = store.connect(db, read_only=True)
    try:
        ledger = compute_ledger(backend_for(con), since_s=since_s, until_s=until_s)
        analysis = analyse_ladder(ledger)
        if analysis is None:
            raise EmptyDataError(
                f"the manifest stored in {db} declares no [ladder] and no [[families]]",
                hint="add them to the manifest (docs/ladder.md) and ingest it again: "
                "gpuyield ingest slurm --manifest FILE --db DB",
            )
        return LadderReport(
            window_start_s=ledger.window.start_s,
            window_end_s=ledger.window.end_s,
            analysis=analysis,
        )
    finally:
        con.close()
