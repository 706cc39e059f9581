"""The essay's estimation method, its Llama 3 405B arithmetic and its Behemoth estimate, checked.

Each function returns one ``ClaimCheck``; inputs are the essay's own words unless a reading says
otherwise. Verdicts come from ``claims.judge``; facts.md section 6 is the reference they must match.
"""

from __future__ import annotations

from gpuyield.estimate import formulas as f
from gpuyield.estimate.catalog import get_accelerator, get_model
from gpuyield.estimate.claims import ClaimCheck, computed, ratio_step, sourced
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
    return sourced(
        id="mfu-typical",
        section=METHOD,
        stated="40%",
        unit="%",
        claim="This is the MFU, which is typically 40%",
        source="Llama 3 paper (arXiv 2407.21783): 38-43% BF16 MFU per step on 8k-16k H100",
        reason="A per-step figure; reported GPU-hours imply less (Llama 3.1 405B: 33-35%).",
    )


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
    return computed(
        id="mfu-moe-fp8",
        section=METHOD,
        stated="20%",
        unit="%",
        claim="but drops to 20% for MoE models trained at fp8 (as per DeepSeek and Llama4's "
        "numbers explain)",
        reading="MFU against the FP8 peak: DeepSeek-V3 from its reported H800 hours, Llama 4 "
        "Behemoth from Meta's 390 TFLOP/s per GPU",
        steps=[deepseek, fp8, achieved, llama4, both],
        reason="DeepSeek-V3's hours imply ~17% and Behemoth's 390 TFLOP/s is ~20% of FP8 peak.",
    )


def _fp8_doubles() -> ClaimCheck:
    bf16, fp8 = _peak("bf16"), _peak("fp8")
    return computed(
        id="fp8-doubles",
        section=METHOD,
        stated="2",
        unit="x",
        claim="As fp8 simply doubles the theoretical output",
        reading="H100 SXM dense FP8 peak over dense BF16 peak",
        steps=[
            bf16,
            fp8,
            ratio_step(
                "fp8_over_bf16", "FP8 / BF16", "peak_fp8 / peak_bf16", fp8.value, bf16.value, "x"
            ),
        ],
        reason="1,978.9 / 989.4 TFLOP/s = 2.0 on the H100.",
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
    return computed(
        id="llama3-flops-per-gpu-batch",
        section=LLAMA,
        stated="2.4e15",
        unit="FLOP",
        claim="This means it used 6 405G 1024, or 2.4k Tflops.",
        reading="'6 405G 1024' is 6 x 405G x 1,024 tokens per GPU per batch (16M batch over 16k "
        "GPUs); 2.4k TFLOP = 2.4e15 FLOP",
        steps=[tokens, flops],
        reason="6 x 405e9 x 1,024 = 2.49e15 FLOP per GPU per batch (2.37e15 with decimal 16M).",
    )


def _llama_reports_mfu() -> ClaimCheck:
    return sourced(
        id="llama3-reported-mfu",
        section=LLAMA,
        stated="40%",
        unit="%",
        claim="Llama reports 40% mfu",
        source="Llama 3 paper (arXiv 2407.21783): 38-43% BF16 MFU per step",
        reason="Per-step MFU as reported; the card's hours imply 33-35% overall.",
    )


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
    return computed(
        id="llama3-seconds-per-batch",
        section=LLAMA,
        stated="6",
        unit="s",
        claim="Llama reports 40% mfu, so this effectively took 6 seconds a batch.",
        reading="2.49e15 FLOP per GPU per batch at 40% of the H100's 989.4 TFLOP/s BF16 peak",
        steps=[given("flops_per_gpu_batch", "FLOPs per GPU per batch", flops, "FLOP"), peak, step],
        reason="2.49e15 / (0.4 x 989.4e12) = 6.3 s (6.1 s with 1,000 tokens per GPU).",
    )


def _num_batches() -> ClaimCheck:
    return computed(
        id="llama3-num-batches",
        section=LLAMA,
        stated="940k",
        unit="batches",
        claim="They did 940k batches",
        reading="15T tokens in batches of 16M tokens",
        steps=[ratio_step("num_batches", "optimizer steps", "D / B", P(15e12), P(16e6))],
        reason="15e12 / 16e6 = 937,500 batches.",
    )


def _llama_days() -> ClaimCheck:
    run = estimate_train(params="405B", tokens="15T", gpus=16384, accelerator=H100, mfu=0.4)
    return computed(
        id="llama3-days",
        section=LLAMA,
        stated="65",
        unit="days",
        claim="meaning that this lasted roughly 65 days",
        reading="6 x 405B x 15T FLOPs on 16,384 H100 at 40% of BF16 peak",
        steps=run.worksheet.steps,
        reason="3.6e25 FLOP / (16,384 x 989.4e12 x 0.4) = 65 days.",
    )


def _behemoth_size() -> ClaimCheck:
    return sourced(
        id="behemoth-size",
        section=BEHEMOTH,
        stated="290B",
        unit="params",
        claim="Behometh has 290B active parameters and 390 TFlops",
        source=get_model("llama-4-behemoth").source,
        reason="Meta gives 288B active parameters and 390 TFLOP/s per GPU in FP8.",
    )


def _scout_tokens() -> ClaimCheck:
    return sourced(
        id="scout-tokens",
        section=BEHEMOTH,
        stated="40T",
        unit="tokens",
        claim="Scout was trained for 40T tokens",
        source=get_model("llama-4-scout").source,
        reason="The Llama 4 model card gives ~40T tokens for Scout.",
    )


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
    return computed(
        id="behemoth-days",
        section=BEHEMOTH,
        stated="62",
        unit="days",
        claim="Scout was trained for 40T tokens so on 32k GPUs this would take 62 days on 32k "
        "GPUs.",
        reading="Behemoth (290B active) at Scout's 40T tokens on 32,768 GPUs at 390 TFLOP/s each",
        steps=_behemoth_run(40e12),
        reason=f"Holds if Behemoth saw 40T tokens; Meta says >30T, which gives {at_30t:.0f} days.",
    )
