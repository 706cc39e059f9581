"""`estimate validate`: the estimator run over every published run in the catalog.

Two predictions per run, both leave-one-out (a run's own figure never shapes what it is tested
against):

* the *range*: 6 N D over the BF16 peak times the lowest-highest effective MFU of the other runs on
  its accelerator generation; the run is *in range* when its reported hours fall inside;
* the *calibrated* estimate (``calibrated.py``): the expected GPU-hours from the fit of the other
  runs, and the 80% interval from their leave-one-out residuals; the run is *in the interval* when
  its reported hours fall inside. The summary reports the interval's coverage (the share inside),
  its median width (high over low) and the point estimate's median and worst ratio (reported over
  expected, or its inverse, whichever is above 1), overall and by generation and architecture.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from gpuyield.estimate import formulas as f
from gpuyield.estimate.calibrated import COVERAGE, calibration
from gpuyield.estimate.effective import EffectiveRun, effective_mfu_for, effective_runs
from gpuyield.estimate.numbers import Range, format_number


@dataclass(frozen=True, kw_only=True, slots=True)
class ValidationRow:
    """One published run: reported against predicted GPU-hours."""

    id: str
    name: str
    accelerator: str
    generation: str
    year: int | None
    moe: bool
    reported_gpu_hours: float
    #: Predicted GPU-hours: low (highest MFU), median MFU, high (lowest MFU).
    predicted_gpu_hours: Range
    #: The run's own effective MFU.
    effective_mfu: float
    #: The effective-MFU range used (leave-one-out).
    mfu_range: Range
    #: Which runs the range came from.
    basis: str
    #: Reported over predicted (central).
    ratio: float
    in_range: bool
    url: str
    states: str
    #: Calibrated estimate without this run: expected GPU-hours and the 80% interval.
    expected_gpu_hours: float
    interval_gpu_hours: tuple[float, float]
    in_interval: bool
    #: Leave-one-out residuals behind the interval, and which runs they are.
    interval_support: int
    interval_basis: str

    @property
    def expected_ratio(self) -> float:
        """Reported over expected GPU-hours."""
        return self.reported_gpu_hours / self.expected_gpu_hours

    @property
    def interval_width(self) -> float:
        """High over low end of the interval."""
        low, high = self.interval_gpu_hours
        return high / low

    def to_dict(self) -> dict[str, Any]:
        """Plain data for ``--json``."""
        return {
            "id": self.id,
            "name": self.name,
            "accelerator": self.accelerator,
            "generation": self.generation,
            "year": self.year,
            "moe": self.moe,
            "reported_gpu_hours": self.reported_gpu_hours,
            "predicted_gpu_hours": self.predicted_gpu_hours.central,
            "predicted_gpu_hours_range": [
                self.predicted_gpu_hours.low,
                self.predicted_gpu_hours.high,
            ],
            "effective_mfu": self.effective_mfu,
            "effective_mfu_range": [self.mfu_range.low, self.mfu_range.high],
            "basis": self.basis,
            "ratio": self.ratio,
            "in_range": self.in_range,
            "gpu_hours_expected": self.expected_gpu_hours,
            "gpu_hours_interval": list(self.interval_gpu_hours),
            "expected_ratio": self.expected_ratio,
            "in_interval": self.in_interval,
            "interval_support": self.interval_support,
            "interval_basis": self.interval_basis,
            "url": self.url,
            "states": self.states,
        }


@dataclass(frozen=True, kw_only=True, slots=True)
class IntervalSummary:
    """How the calibrated estimate did on a set of runs (each left out in turn)."""

    #: ``all``, a generation (``hopper``) or an architecture (``dense``, ``moe``).
    group: str
    runs: int
    #: Share of runs whose reported hours fall inside their interval.
    coverage: float
    #: Median of high / low over the runs' intervals.
    median_width: float
    #: Median and worst of max(reported / expected, expected / reported).
    median_ratio: float
    worst_ratio: float

    def to_dict(self) -> dict[str, Any]:
        """Plain data for ``--json``."""
        return {
            "group": self.group,
            "runs": self.runs,
            "coverage": self.coverage,
            "median_width": self.median_width,
            "median_ratio": self.median_ratio,
            "worst_ratio": self.worst_ratio,
        }


def summarise(group: str, rows: list[ValidationRow]) -> IntervalSummary:
    """Coverage, width and point-estimate ratios of ``rows``."""
    off = [max(r.expected_ratio, 1.0 / r.expected_ratio) for r in rows]
    return IntervalSummary(
        group=group,
        runs=len(rows),
        coverage=sum(r.in_interval for r in rows) / len(rows),
        median_width=statistics.median(r.interval_width for r in rows),
        median_ratio=statistics.median(off),
        worst_ratio=max(off),
    )


@dataclass(frozen=True, kw_only=True, slots=True)
class ValidationReport:
    """Every run's row, the share in the old range and the calibrated interval's record."""

    rows: tuple[ValidationRow, ...]
    share_in_range: float
    #: Stated coverage of the interval (0.8).
    stated_coverage: float
    #: Over every run, then by generation, then dense and MoE.
    summary: tuple[IntervalSummary, ...]

    @property
    def overall(self) -> IntervalSummary:
        """The summary over every run."""
        return self.summary[0]

    def to_dict(self) -> dict[str, Any]:
        """``runs``, ``share_in_range``, the overall ``interval`` record and ``interval_by_group``."""
        overall = self.overall
        return {
            "runs": [row.to_dict() for row in self.rows],
            "share_in_range": self.share_in_range,
            "interval": {
                "stated_coverage": self.stated_coverage,
                "coverage": overall.coverage,
                "median_width": overall.median_width,
                "point_median_ratio": overall.median_ratio,
                "point_worst_ratio": overall.worst_ratio,
                "runs": overall.runs,
                "method": "leave-one-out: each run against the fit and residuals of the others",
            },
            "interval_by_group": [s.to_dict() for s in self.summary[1:]],
        }


def validate_catalog() -> ValidationReport:
    """Predicted against reported GPU-hours for every run of the catalog."""
    rows = tuple(_row(run) for run in effective_runs())
    share = sum(row.in_range for row in rows) / len(rows)
    keys: list[tuple[str, Callable[[ValidationRow], str]]] = [
        ("generation", lambda r: r.generation),
        ("architecture", lambda r: "moe" if r.moe else "dense"),
    ]
    summary = [summarise("all", list(rows))]
    for _, key in keys:
        for group in sorted({key(r) for r in rows}):
            summary.append(summarise(group, [r for r in rows if key(r) == group]))
    return ValidationReport(
        rows=rows, share_in_range=share, stated_coverage=COVERAGE, summary=tuple(summary)
    )


def _row(run: EffectiveRun) -> ValidationRow:
    chosen = effective_mfu_for(run.generation, exclude=run.model.id)
    peak = run.accelerator.peak_tflops_bf16
    mfu = chosen.value
    predicted = Range(
        low=f.gpu_hours_for(run.flops, peak, mfu.high),
        central=f.gpu_hours_for(run.flops, peak, mfu.central),
        high=f.gpu_hours_for(run.flops, peak, mfu.low),
    )
    calibrated = calibration(exclude=run.model.id).interval(
        run.generation, run.model.active_params.central
    )
    interval = (
        f.gpu_hours_for(run.flops, peak, calibrated.high),
        f.gpu_hours_for(run.flops, peak, calibrated.low),
    )
    reported = run.reported_gpu_hours
    return ValidationRow(
        id=run.model.id,
        name=run.model.name,
        accelerator=run.accelerator.id,
        generation=run.generation,
        year=run.model.year,
        moe=run.model.is_moe,
        reported_gpu_hours=reported,
        predicted_gpu_hours=predicted,
        effective_mfu=run.effective_mfu,
        mfu_range=mfu,
        basis=chosen.basis,
        ratio=reported / predicted.central,
        in_range=predicted.low <= reported <= predicted.high,
        url=run.model.url,
        states=run.model.states,
        expected_gpu_hours=f.gpu_hours_for(run.flops, peak, calibrated.expected),
        interval_gpu_hours=interval,
        in_interval=interval[0] <= reported <= interval[1],
        interval_support=calibrated.support,
        interval_basis=calibrated.basis,
    )


def validation_markdown(report: ValidationReport) -> str:
    """The tables for docs/estimate.md: every run, then the interval's record by group."""
    lines = [
        "| run | on | reported GPU-h | expected GPU-h (80% interval) | reported / expected "
        "| in interval | old range | in range |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for row in report.rows:
        low, high = row.interval_gpu_hours
        p = row.predicted_gpu_hours
        lines.append(
            f"| {row.id} | {row.accelerator} | {format_number(row.reported_gpu_hours)} "
            f"| {format_number(row.expected_gpu_hours)} ({format_number(low)} - "
            f"{format_number(high)}) | {row.expected_ratio:.2f} "
            f"| {'yes' if row.in_interval else 'no'} "
            f"| {format_number(p.low)} - {format_number(p.high)} "
            f"| {'yes' if row.in_range else 'no'} |"
        )
    lines += ["", summary_markdown(report)]
    return "\n".join(lines)


def summary_markdown(report: ValidationReport) -> str:
    """The interval's leave-one-out record, overall and by group."""
    lines = [
        f"| runs | n | coverage (stated {report.stated_coverage:.0%}) | median width "
        "| point: median ratio | point: worst ratio |",
        "|---|---|---|---|---|---|",
    ]
    for s in report.summary:
        lines.append(
            f"| {s.group} | {s.runs} | {s.coverage:.0%} | {s.median_width:.2f}x "
            f"| {s.median_ratio:.2f}x | {s.worst_ratio:.2f}x |"
        )
    inside = sum(row.in_range for row in report.rows)
    lines += [
        "",
        f"Old range (lowest-highest effective MFU of the generation): {inside} of "
        f"{len(report.rows)} in range ({report.share_in_range:.0%}).",
    ]
    return "\n".join(lines) + "\n"
