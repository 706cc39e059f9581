"""The all-in half of `estimate train`: what published runs' reported hours say a run will take.

Two views, both against the dense BF16 peak (the scale every catalog run is measured on):

* the *range* (issue 18): the lowest to highest effective MFU of the published runs on the same
  accelerator generation, wide by construction;
* the *calibrated estimate* (issue 30, ``calibrated.py``): the expected effective MFU of a run of
  this size on this generation, and an interval that holds a run like the catalog's with 80%
  probability (``gpuyield estimate validate`` measures how often it does).
"""

from __future__ import annotations

from dataclasses import dataclass

from gpuyield.estimate import formulas as f
from gpuyield.estimate.calibrated import CalibratedMfu, calibration
from gpuyield.estimate.effective import EffectiveMfu
from gpuyield.estimate.numbers import Range
from gpuyield.estimate.worksheet import DOWN, UP, Step, compute, given


@dataclass(frozen=True, kw_only=True, slots=True)
class EffectiveInputs:
    """What the all-in steps need from the run."""

    #: Training compute, FLOP.
    flops: Range
    #: Dense BF16 peak per GPU (or the given peak for custom hardware), TFLOP/s.
    peak_bf16: Range
    #: Active parameters (the calibrated fit takes the central value).
    active_params: Range
    #: Accelerator generation; None for custom hardware (the pooled fit then predicts).
    generation: str | None
    num_gpus: Range | None


def calibrated_for(inputs: EffectiveInputs) -> CalibratedMfu:
    """The calibrated effective MFU of this run's size and generation."""
    return calibration().interval(inputs.generation, inputs.active_params.central)


def effective_steps(inputs: EffectiveInputs, effective: EffectiveMfu) -> list[Step]:
    """GPU-hours and days at the effective (all-in) MFU range of published runs."""
    mfu = given(
        "effective_mfu",
        "effective MFU, all-in (lowest:median:highest)",
        effective.value,
        "%",
        f"6ND / (reported hours x BF16 peak) of {effective.basis} ({effective.count}) in the "
        "catalog; see gpuyield estimate validate",
    )
    hours = _hours_step(
        "gpu_hours_effective",
        "GPU-hours at effective MFU (what reported hours look like)",
        inputs,
        mfu.value,
    )
    days = _days_steps("wall_days_effective", "wall-clock days at effective MFU", inputs, hours)
    return [mfu, hours, *days]


def calibrated_steps(inputs: EffectiveInputs, calibrated: CalibratedMfu) -> list[Step]:
    """Expected GPU-hours and their 80% interval from the calibrated effective MFU."""
    value = Range(low=calibrated.low, central=calibrated.expected, high=calibrated.high)
    mfu = given(
        "calibrated_mfu",
        f"expected effective MFU ({calibrated.coverage:.0%} interval)",
        value,
        "%",
        f"fit of log effective MFU on generation and log10(active params) over the catalog; "
        f"interval from the leave-one-out residuals of {calibrated.basis} "
        f"({calibrated.support}); see gpuyield estimate validate",
    )
    hours = _hours_step(
        "gpu_hours_calibrated",
        f"GPU-hours expected ({calibrated.coverage:.0%} interval)",
        inputs,
        value,
    )
    label = f"wall-clock days expected ({calibrated.coverage:.0%} interval)"
    return [mfu, hours, *_days_steps("wall_days_calibrated", label, inputs, hours)]


def _hours_step(name: str, label: str, inputs: EffectiveInputs, mfu: Range) -> Step:
    return compute(
        name,
        label,
        "H = C / (peak_bf16 * MFU) / 3600",
        "{flops} / ({peak_tflops}e12 * {mfu}) / 3600",
        f.gpu_hours_for,
        {"flops": UP, "peak_tflops": DOWN, "mfu": DOWN},
        "GPU-h",
        flops=inputs.flops,
        peak_tflops=inputs.peak_bf16,
        mfu=mfu,
    )


def _days_steps(name: str, label: str, inputs: EffectiveInputs, hours: Step) -> list[Step]:
    if inputs.num_gpus is None:
        return []
    return [
        compute(
            name,
            label,
            "T = H / G / 24",
            "{gpu_hours} / {num_gpus} / 24",
            f.wall_days,
            {"gpu_hours": UP, "num_gpus": DOWN},
            "days",
            gpu_hours=hours.value,
            num_gpus=inputs.num_gpus,
        )
    ]
