"""The essay's estimation method, its Llama 3 405B arithmetic and its Behemoth estimate, checked.

Each function returns one ``ClaimCheck``; inputs are the essay's own words unless a reading says
otherwise. Verdicts come from ``claims.judge``; facts.md section 6 is the reference they must match.
"""

from __future__ import annotations

from gpuyield.estimate import formulas as f
from gpuyield.estimate.catalog import get_accelerator, get_model
from gpuyield.estimate.claims import ClaimCheck, claim, ratio_step
from gpuyield.estimate.numbers import Range, format_percent
from gpuyield.estimate.train import estimate_train, flops_step
from gpuyield.estimate.worksheet import DOWN, UP, Step, compute, given

P = Range.point
H100 = "h100-sxm"
METHOD, LLAMA, BEHEMOTH = "Method", "Llama 3 405B", "Behemoth"


def claims() -> list[ClaimCheck]:
    """This module's claims in essay order."""
    return [
        _typical_mfu(),
        _moe_fp8_mfu(),
        _fp8_doubles(),
        _flops_per_gpu_batch(),
        _llama_reports_mfu(),
        _seconds_per_batch(),
        _num_batches(),
        _llama_days(),
        _behemoth_size(),
        _scout_tokens(),
        _behemoth_days(),
    ]


def _peak(precision: str) -> Step:
    chip = get_accelerator(H100)
    return given(
        f"peak_{precision}",
        f"H100 SXM dense {precision} peak",
        P(chip.peak_tflops(precision)),
        "TFLOP/s",
        f"{chip.source} ({chip.status})",
    )


def _typical_mfu() -> ClaimCheck:
    return claim("mfu-typical")


def _moe_fp8_mfu() -> ClaimCheck:
    deepseek = estimate_train(model="deepseek-v3").worksheet.step("implied_mfu")
    fp8 = _peak("fp8")
    behemoth = get_model("llama-4-behemoth").achieved_tflops_per_gpu
    assert behemoth is not None
    achieved = given(
        "behemoth_tflops",
        "Behemoth achieved TFLOP/s per GPU",
        behemoth,
        "TFLOP/s",
        get_model("llama-4-behemoth").source,
    )
    llama4 = ratio_step(
        "behemoth_mfu",
        "Behemoth MFU of FP8 peak",
        "achieved / peak",
        achieved.value,
        fp8.value,
        "%",
    )
    low, high = sorted((deepseek.value.central, llama4.value.central))
    both = Step(
        name="moe_fp8_mfu",
        label="range of the two",
        formula="[min .. max]",
        substituted=f"[{format_percent(P(low))} .. {format_percent(P(high))}]",
        value=Range(low=low, central=(low + high) / 2, high=high),
        unit="%",
    )
    return claim("mfu-moe-fp8", steps=[deepseek, fp8, achieved, llama4, both])


def _fp8_doubles() -> ClaimCheck:
    bf16, fp8 = _peak("bf16"), _peak("fp8")
    return claim(
        "fp8-doubles",
        steps=[
            bf16,
            fp8,
            ratio_step(
                "fp8_over_bf16", "FP8 / BF16", "peak_fp8 / peak_bf16", fp8.value, bf16.value, "x"
            ),
        ],
    )


def _flops_per_gpu_batch() -> ClaimCheck:
    tokens = given("tokens_per_gpu", "tokens per GPU per batch (16M / 16k)", P(1024))
    flops = compute(
        "flops_per_gpu_batch",
        "FLOPs per GPU per batch",
        "6 * N * tokens",
        "6 * {active_params} * {tokens}",
        f.training_flops,
        {"active_params": UP, "tokens": UP},
        "FLOP",
        active_params=P(405e9),
        tokens=tokens.value,
    )
    return claim("llama3-flops-per-gpu-batch", steps=[tokens, flops])


def _llama_reports_mfu() -> ClaimCheck:
    return claim("llama3-reported-mfu")


def _seconds_per_batch() -> ClaimCheck:
    flops = P(f.training_flops(405e9, 1024))
    peak = _peak("bf16")
    step = compute(
        "seconds_per_batch",
        "seconds per batch",
        "t = FLOPs per GPU / (peak * MFU)",
        "{c} / ({p}e12 * {m})",
        lambda c, p, m: c / (p * f.TFLOPS * m),
        {"c": UP, "p": DOWN, "m": DOWN},
        "s",
        c=flops,
        p=peak.value,
        m=P(0.4),
    )
    return claim(
        "llama3-seconds-per-batch",
        steps=[given("flops_per_gpu_batch", "FLOPs per GPU per batch", flops, "FLOP"), peak, step],
    )


def _num_batches() -> ClaimCheck:
    return claim(
        "llama3-num-batches",
        steps=[ratio_step("num_batches", "optimizer steps", "D / B", P(15e12), P(16e6))],
    )


def _llama_days() -> ClaimCheck:
    run = estimate_train(params="405B", tokens="15T", gpus=16384, accelerator=H100, mfu=0.4)
    return claim("llama3-days", steps=run.worksheet.steps)


def _behemoth_size() -> ClaimCheck:
    return claim("behemoth-size", source=get_model("llama-4-behemoth").source)


def _scout_tokens() -> ClaimCheck:
    return claim("scout-tokens", source=get_model("llama-4-scout").source)


def _behemoth_run(tokens: float) -> list[Step]:
    flops = flops_step(P(290e9), P(tokens))
    days = compute(
        "days",
        "wall-clock days",
        "C / (G * achieved) / 86400",
        "{c} / ({g} * {a}e12) / 86400",
        lambda c, g, a: c / (g * a * f.TFLOPS) / (f.SECONDS_PER_HOUR * f.HOURS_PER_DAY),
        {"c": UP, "g": DOWN, "a": DOWN},
        "days",
        c=flops.value,
        g=P(32768),
        a=P(390),
    )
    return [flops, days]


def _behemoth_days() -> ClaimCheck:
    at_30t = _behemoth_run(30e12)[-1].value.central
    return claim(
        "behemoth-days",
        steps=_behemoth_run(40e12),
        reason=f"Holds if Behemoth saw 40T tokens; Meta says >30T, which gives {at_30t:.0f} days.",
    )
