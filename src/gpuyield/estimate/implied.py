"""MFU implied by reported GPU-hours: effective (all-in) and training-step, never above the peak.

An implied MFU above 100% is not a result: more compute than the chips' peak in the hours given
means an input is wrong (an error naming it), and a ratio that would carry a run past the peak
cannot describe that run (the range ends at the peak, with a warning saying why).
"""

from __future__ import annotations

from dataclasses import dataclass

from gpuyield.errors import InputError
from gpuyield.estimate import formulas as f
from gpuyield.estimate.effective import step_to_effective_ratio
from gpuyield.estimate.numbers import Range
from gpuyield.estimate.worksheet import DOWN, UP, Step, compute, propagate, show

#: The most a step can achieve: the chips' dense peak.
PEAK_MFU = 1.0


def implied_mfu_step(reported: Range, flops: Range, peak: Range, *, where: str) -> Step:
    """MFU = C / (H_r x 3600 x peak); an error naming ``where`` the hours come from if above 1."""
    step = compute(
        "implied_mfu",
        "effective (all-in) MFU implied by reported hours",
        "MFU = C / (H_r * 3600 * peak)",
        "{flops} / ({gpu_hours} * 3600 * {peak_tflops}e12)",
        f.implied_mfu,
        {"flops": UP, "gpu_hours": DOWN, "peak_tflops": DOWN},
        "%",
        flops=flops,
        gpu_hours=reported,
        peak_tflops=peak,
    )
    if step.value.high > PEAK_MFU:
        # More compute than the chips' peak could do in those hours: an input is wrong.
        raise InputError(
            f"{where} ({show(reported, 'GPU-h')}) would mean an MFU of up to "
            f"{step.value.high:.0%}: more than the chips' peak can do in those hours",
            hint="check the hours, estimate.params, estimate.tokens and estimate.accelerator "
            "(or the catalog entry)",
        )
    return step


@dataclass(frozen=True, kw_only=True, slots=True)
class StepMfu:
    """The implied training-step MFU's worksheet step, and the warning it needs (or "")."""

    step: Step
    warning: str


def step_mfu_step(implied: Range) -> StepMfu:
    """The training-step MFU implied by reported hours, and a warning when a ratio cannot apply.

    Dividing by the lowest effective/step ratio of runs that report both (a run that lost much
    of its time to restarts) can put a run that lost little above the chips' peak (Llama 3.1
    405B: 129%). No step exceeds the peak, so that ratio cannot describe the run: the range ends
    at 100% and the output says why, instead of printing an impossible figure.
    """
    ratio = step_to_effective_ratio()
    directions = {"mfu": UP, "ratio": DOWN}
    raw = propagate(lambda mfu, ratio: mfu / ratio, directions, mfu=implied, ratio=ratio)
    if raw.high <= PEAK_MFU:
        formula, template, warning = "MFU_step = MFU_eff / r", "{mfu} / {ratio}", ""
    else:
        formula, template = "MFU_step = min(MFU_eff / r, 100%)", "min({mfu} / {ratio}, 100%)"
        warning = (
            f"warning: the implied training-step MFU ends at 100% (the peak): the lowest "
            f"effective/step ratio of runs that report both ({ratio.low:.3g}) would put this run "
            f"at {raw.high:.0%} of peak, which no step can reach, so that ratio cannot describe it."
        )
    step = compute(
        "implied_step_mfu",
        "training-step MFU implied (effective / ratio of runs reporting both)",
        formula,
        template,
        lambda mfu, ratio: min(mfu / ratio, PEAK_MFU),
        directions,
        "%",
        mfu=implied,
        ratio=ratio,
    )
    return StepMfu(step=step, warning=warning)
