"""One call per command: ``gpuyield whatif fit`` and ``gpuyield whatif``."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpuyield.errors import FieldError, GpuyieldError
from gpuyield.times import iso_utc
from gpuyield.whatif.fit import fit_cluster
from gpuyield.whatif.model import ClusterFit
from gpuyield.whatif.price import FLAG_SOURCE, GpuHourPrice
from gpuyield.whatif.project import SEEDS, Projection, project
from gpuyield.whatif.remedies import (
    DEFAULT_REMEDIES,
    check_remedy,
    parse_duration_s,
    parse_remedy,
)
from gpuyield.whatif.replay import REPLAY_SEEDS, TOLERANCE, ReplayCheck, replay_check
from gpuyield.whatif.scenario_out import scenario_file


@dataclass(frozen=True, kw_only=True, slots=True)
class FitReport:
    """A fit, its replay check and where its scenario file went."""

    fit: ClusterFit
    check: ReplayCheck
    scenario_path: Path | None

    @property
    def passed(self) -> bool:
        """The check passed: projections may be made."""
        return self.check.passed

    def to_dict(self) -> dict[str, Any]:
        """JSON shape (docs/whatif.md)."""
        tables = dict(scenario_file(self.fit).to_dict())
        tables["scenario"] = {**tables["scenario"], "start": iso_utc(self.fit.start_s)}
        return {
            **self.fit.to_dict(),
            "check": self.check.to_dict(),
            "scenario_file": None if self.scenario_path is None else str(self.scenario_path),
            "scenario": tables,
        }


class ProjectionRefused(GpuyieldError):
    """The fit's check failed: the replay missed, or a parameter rests on too few events."""

    def __init__(self, check: ReplayCheck, fit: ClusterFit) -> None:
        super().__init__(
            "the fitted scenario does not reproduce this cluster well enough to project: "
            + "; ".join(check.reasons),
            hint="fit a longer window (--since/--until), or pass --force to project anyway "
            "(every output then says the check failed)",
        )
        self.check = check
        self.fit = fit


def run_fit(
    db: str | Path,
    *,
    since_s: int | None = None,
    until_s: int | None = None,
    out: Path | None = None,
    replay_seeds: int = REPLAY_SEEDS,
    tolerance: float = TOLERANCE,
) -> FitReport:
    """Fit, replay, and write the scenario to ``out`` (also when the check fails: it says so)."""
    _check_counts(replay_seeds=replay_seeds, tolerance=tolerance)
    fit = fit_cluster(db, since_s=since_s, until_s=until_s)
    check = replay_check(fit, seeds=replay_seeds, tolerance=tolerance)
    if out is not None:
        scenario_file(fit).write(out, scenario_header(fit, check))
    return FitReport(fit=fit, check=check, scenario_path=out)


def run_whatif(
    db: str | Path,
    *,
    remedies: list[str] | None = None,
    since_s: int | None = None,
    until_s: int | None = None,
    horizon: str | None = None,
    seeds: int = SEEDS,
    replay_seeds: int = REPLAY_SEEDS,
    tolerance: float = TOLERANCE,
    price_per_gpu_hour: float | None = None,
    uncertainty: bool = True,
    force: bool = False,
) -> Projection:
    """Fit, check, and project each remedy over ``horizon`` (``90d``; default: the window)."""
    _check_counts(replay_seeds=replay_seeds, tolerance=tolerance)
    if seeds < 1:
        raise FieldError("whatif.seeds", "must be at least 1", example="5")
    texts = remedies or list(DEFAULT_REMEDIES)
    for text in texts:
        check_remedy(text)  # before the fit: a typo is refused at once
    horizon_days = None if horizon is None else parse_duration_s(horizon, "whatif.horizon") / 86400
    fit = fit_cluster(db, since_s=since_s, until_s=until_s)
    days = fit.days if horizon_days is None else horizon_days
    base = scenario_file(fit).scenario()
    parsed = [parse_remedy(text, fit, base) for text in texts]
    check = replay_check(fit, seeds=replay_seeds, tolerance=tolerance)
    if not check.passed and not force:
        raise ProjectionRefused(check, fit)
    # The flag wins; without it, the manifest's [prices] (the source says which, or why none).
    price = (
        fit.price
        if price_per_gpu_hour is None
        else GpuHourPrice(usd_per_gpu_hour=price_per_gpu_hour, source=FLAG_SOURCE)
    )
    return project(
        fit,
        parsed,
        check,
        horizon_days=days,
        seeds=seeds,
        uncertainty=uncertainty,
        price_per_gpu_hour=price.usd_per_gpu_hour,
        price_source=price.source,
        forced=not check.passed,
    )


def _check_counts(*, replay_seeds: int, tolerance: float) -> None:
    if replay_seeds < 1:
        raise FieldError("whatif.replay_seeds", "must be at least 1", example="2")
    if not 0 < tolerance < 1:
        raise FieldError("whatif.tolerance", "must be a share between 0 and 1", example="0.02")


def scenario_header(fit: ClusterFit, check: ReplayCheck) -> str:
    """The fitted scenario file's comment lines: where it came from, every parameter with its
    interval and evidence, the notes and the check."""
    lines = [
        f"Fitted by `gpuyield whatif fit` from {fit.db}, window {iso_utc(fit.start_s)} .. "
        f"{iso_utc(fit.end_s)}. Run it with `gpuyield simulate run FILE --out DIR`.",
        f"Replay check ({check.seeds} seeds, tolerance {check.tolerance:.0%} of installed): "
        + ("passed" if check.passed else "FAILED: " + "; ".join(check.reasons)),
        "",
        "Parameters (value [95% interval] unit; where it came from):",
    ]
    for p in fit.parameters:
        lines.append(
            f"  {p.key} = {p.value:.6g} [{p.low:.4g}, {p.high:.4g}] {p.unit}; {p.status.value}: "
            f"{p.evidence}"
        )
    if fit.notes:
        lines += ["", "Notes:", *(f"  {note}" for note in fit.notes)]
    return "\n".join(lines)
