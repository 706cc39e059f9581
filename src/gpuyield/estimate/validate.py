"""`estimate validate`: the estimator run over every published run in the catalog.

For each run the predicted GPU-hours are 6 N D over the BF16 peak times the effective-MFU range of
the *other* runs on its accelerator generation (leave-one-out: a run's own figure never widens the
range it is tested against). The run is *in range* when its reported hours fall inside.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gpuyield.estimate import formulas as f
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

    def to_json(self) -> dict[str, Any]:
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
            "url": self.url,
            "states": self.states,
        }


@dataclass(frozen=True, kw_only=True, slots=True)
class ValidationReport:
    """Every run's row and the share whose reported hours fall in the predicted range."""

    rows: tuple[ValidationRow, ...]
    share_in_range: float

    def to_json(self) -> dict[str, Any]:
        """``{"runs": [...], "share_in_range": x}``."""
        return {"runs": [row.to_json() for row in self.rows], "share_in_range": self.share_in_range}


def validate_catalog() -> ValidationReport:
    """Predicted against reported GPU-hours for every run of the catalog."""
    rows = tuple(_row(run) for run in effective_runs())
    share = sum(row.in_range for row in rows) / len(rows)
    return ValidationReport(rows=rows, share_in_range=share)


def _row(run: EffectiveRun) -> ValidationRow:
    chosen = effective_mfu_for(run.generation, exclude=run.model.id)
    peak = run.accelerator.peak_tflops_bf16
    mfu = chosen.value
    predicted = Range(
        low=f.gpu_hours_for(run.flops, peak, mfu.high),
        central=f.gpu_hours_for(run.flops, peak, mfu.central),
        high=f.gpu_hours_for(run.flops, peak, mfu.low),
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
    )


def validation_markdown(report: ValidationReport) -> str:
    """The table for docs/estimate.md."""
    lines = [
        "| run | on | reported GPU-h | predicted GPU-h (range) | reported / predicted "
        "| effective MFU | in range |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in report.rows:
        p = row.predicted_gpu_hours
        lines.append(
            f"| {row.id} | {row.accelerator} | {format_number(row.reported_gpu_hours)} "
            f"| {format_number(p.central)} ({format_number(p.low)} - {format_number(p.high)}) "
            f"| {row.ratio:.2f} | {row.effective_mfu:.1%} | {'yes' if row.in_range else 'no'} |"
        )
    inside = sum(row.in_range for row in report.rows)
    lines += ["", f"In range: {inside} of {len(report.rows)} ({report.share_in_range:.0%})."]
    return "\n".join(lines) + "\n"
