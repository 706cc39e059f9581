"""The essay's estimates for xAI, Anthropic and OpenAI, its anecdotes and its waste split, checked.

Each function returns one ``ClaimCheck``; inputs are the essay's own words unless a reading says
otherwise. Verdicts come from ``claims.judge``; facts.md section 6 is the reference they must match.
"""

from __future__ import annotations

from gpuyield.estimate import formulas as f
from gpuyield.estimate.catalog import get_accelerator, get_model
from gpuyield.estimate.claims import ClaimCheck, claim, ratio_step
from gpuyield.estimate.numbers import Range, format_number
from gpuyield.estimate.sizing import params_from_budget, params_from_speed
from gpuyield.estimate.train import estimate_train, flops_step
from gpuyield.estimate.worksheet import DOWN, UP, Step, compute, given

P = Range.point
H100 = "h100-sxm"
XAI, ANTHROPIC, OPENAI, GOOGLE, WASTE = ("xAI", "Anthropic", "OpenAI", "Google", "Waste")
#: The essay's figure for a DGX box, used in both decode-speed bounds.
DGX_TBPS = 25.0


def claims() -> list[ClaimCheck]:
    """This module's claims in essay order."""
    return [
        _dgx_bandwidth(),
        _grok_speed(),
        _grok_max_size(),
        _grok_likely_size(),
        _grok_hours(),
        _xai_fleet_hours(),
        _xai_yield(),
        _opus_speed_size(),
        _sonnet37_compute(),
        _llama405_flops(),
        _sonnet_hours(),
        _sonnet_vs_llama(),
        _sonnet_size(),
        _opus_size_bound(),
        _anthropic_released(),
        _anthropic_spend(),
        _anthropic_yield(),
        _openai_spend(),
        _openai_yield(),
        _openai_small_models(),
        _ul2_anecdote(),
        _search_efficiency(),
        _waste_breakdown(),
    ]


def _dgx_bandwidth() -> ClaimCheck:
    chip = get_accelerator(H100)
    step = compute(
        "dgx_tbps",
        "8 x H100 SXM HBM bandwidth",
        "8 * B_chip",
        "{n} * {b}",
        lambda n, b: n * b,
        {"n": UP, "b": UP},
        "TB/s",
        n=P(8),
        b=P(chip.hbm_bandwidth_tbps),
    )
    return claim("dgx-bandwidth", steps=[step])


def _grok_speed() -> ClaimCheck:
    return claim("grok-speed")


def _grok_bound(efficiency: str) -> list[Step]:
    bound = params_from_speed(
        tokens_per_s=68,
        bandwidth_tbps=DGX_TBPS,
        num_chips=1,
        bytes_per_param=1,
        efficiency=efficiency,
    )
    return list(bound.worksheet.steps)


def _grok_max_size() -> ClaimCheck:
    return claim("grok-max-size", steps=_grok_bound("1"))


def _grok_likely_size() -> ClaimCheck:
    return claim("grok-likely-size", steps=_grok_bound("0.5:0.8"))


def _grok_hours() -> ClaimCheck:
    run = estimate_train(params="200B", tokens="40T", accelerator=H100, mfu=0.4)
    llama = get_model("llama-3.1-405b")
    assert llama.reported_gpu_hours is not None and llama.tokens is not None
    scaled = llama.reported_gpu_hours.central * (200e9 * 40e12) / (405e9 * llama.tokens.central)
    return claim(
        "grok-hours",
        steps=run.worksheet.steps,
        reason=f"6ND at 40% MFU gives 33.7M; 40M matches scaling Llama 3.1 405B's actual hours "
        f"({format_number(scaled)}).",
    )


def _xai_fleet_hours() -> ClaimCheck:
    step = compute(
        "gpu_hours",
        "fleet GPU-hours",
        "GPUs * days * 24",
        "{g} * {d} * 24",
        lambda g, d: g * d * f.HOURS_PER_DAY,
        {"g": UP, "d": UP},
        "GPU-h",
        g=Range(low=100e3, central=100e3, high=200e3),
        d=P(180),
    )
    return claim("xai-fleet-hours", steps=[step])


def _xai_yield() -> ClaimCheck:
    return claim(
        "xai-yield", steps=[ratio_step("yield", "yield", "40M / 432M", P(40e6), P(432e6), "%")]
    )


def _opus_bound() -> list[Step]:
    bound = params_from_speed(
        tokens_per_s=27, bandwidth_tbps=DGX_TBPS, num_chips=1, bytes_per_param=1, efficiency=1
    )
    return list(bound.worksheet.steps)


def _opus_speed_size() -> ClaimCheck:
    steps = _opus_bound()
    at_full = steps[-1].value.central
    dgx_exact = 8 * get_accelerator(H100).hbm_bandwidth_tbps * f.TBPS / 27
    needed = (600e9 / dgx_exact, 600e9 / at_full)
    return claim(
        "opus-size",
        steps=steps,
        reason=f"The bound is {format_number(at_full)}; 600B needs eta "
        f"{needed[0]:.2f}-{needed[1]:.2f}, which the essay does not state.",
    )


def _sonnet37_compute() -> ClaimCheck:
    return claim("sonnet37-compute")


def _llama405_flops() -> ClaimCheck:
    run = estimate_train(model="llama-3.1-405b")
    tokens = P(run.worksheet.step("tokens").value.central)
    flops = flops_step(P(405e9), tokens)
    return claim(
        "llama405-flops",
        steps=[given("tokens", "training tokens", tokens, source="Llama 3 paper"), flops],
    )


def _budget_hours() -> Step:
    return ratio_step("gpu_hours", "GPU-hours bought", "$ / price", P(30e6), P(2), "GPU-h")


def _sonnet_hours() -> ClaimCheck:
    return claim("sonnet-hours", steps=[_budget_hours()])


def _sonnet_vs_llama() -> ClaimCheck:
    llama = get_model("llama-3.1-405b").reported_gpu_hours
    assert llama is not None
    return claim(
        "sonnet-vs-llama",
        steps=[
            ratio_step("ratio", "Sonnet / Llama 405B hours", "15M / H_llama", P(15e6), llama, "x")
        ],
    )


def _sonnet_params() -> Range:
    implied = estimate_train(model="llama-3.1-405b").implied_mfu
    assert implied is not None
    mfu = Range(low=implied.central, central=0.4, high=0.4)
    return params_from_budget(
        dollars=30e6, price_per_gpu_hour=2, tokens=30e12, accelerator=H100, mfu=mfu
    ).active_params


def _sonnet_size() -> ClaimCheck:
    implied = estimate_train(model="llama-3.1-405b").implied_mfu
    assert implied is not None
    mfu = Range(low=implied.central, central=0.4, high=0.4)
    bf16 = params_from_budget(
        dollars=30e6, price_per_gpu_hour=2, tokens=30e12, accelerator=H100, mfu=mfu
    )
    fp8 = params_from_budget(
        dollars=30e6, price_per_gpu_hour=2, tokens=30e12, accelerator=H100, mfu=mfu, precision="fp8"
    )
    return claim(
        "sonnet-size",
        steps=bf16.worksheet.steps,
        reason=f"BF16 gives {format_number(bf16.active_params.low)}-"
        f"{format_number(bf16.active_params.high)}; 200B only at 40% of FP8 peak "
        f"({format_number(fp8.active_params.high)}).",
    )


def _opus_size_bound() -> ClaimCheck:
    sonnet = _sonnet_params()
    step = compute(
        "opus_bound",
        "twice the Sonnet size",
        "2 * N_sonnet",
        "2 * {n}",
        lambda n: 2 * n,
        {"n": UP},
        "params",
        n=sonnet,
    )
    return claim(
        "opus-size-bound",
        steps=[given("sonnet", "Sonnet active parameters (recomputed)", sonnet), step],
        reason=f"Twice the essay's 200B Sonnet; with Sonnet at {format_number(sonnet.low)}-"
        f"{format_number(sonnet.high)} the bound is < {format_number(step.value.high)}.",
    )


def _anthropic_released() -> ClaimCheck:
    step = compute(
        "released_usd",
        "three $30M models and one at twice that",
        "3 * $30M + 2 * $30M",
        "3 * {a} + 2 * {a}",
        lambda a: 5 * a,
        {"a": UP},
        "USD",
        a=P(30e6),
    )
    return claim("anthropic-released", steps=[step])


def _anthropic_spend() -> ClaimCheck:
    return claim("anthropic-spend")


def _anthropic_yield() -> ClaimCheck:
    return claim(
        "anthropic-yield",
        steps=[ratio_step("yield", "yield", "$150M / $2.7B", P(150e6), P(2.7e9), "%")],
    )


def _openai_spend() -> ClaimCheck:
    return claim("openai-spend")


def _openai_yield() -> ClaimCheck:
    return claim(
        "openai-yield", steps=[ratio_step("yield", "yield", "$150M / $3B", P(150e6), P(3e9), "%")]
    )


def _openai_small_models() -> ClaimCheck:
    return claim("openai-small-models")


def _ul2_anecdote() -> ClaimCheck:
    return claim("ul2-anecdote")


def _search_efficiency() -> ClaimCheck:
    return claim("search-efficiency")


def _waste_breakdown() -> ClaimCheck:
    lost = {"down": 0.2, "idle": 0.2, "bad_runs": 0.2, "failed": 0.2, "experiments": 0.1}
    step = compute(
        "left",
        "left after the named losses",
        "1 - (20% + 20% + 20% + 20% + 10%)",
        "1 - ({down} + {idle} + {bad_runs} + {failed} + {experiments})",
        lambda **shares: 1 - sum(shares.values()),
        dict.fromkeys(lost, DOWN),
        "%",
        **{key: P(value) for key, value in lost.items()},
    )
    return claim("waste-breakdown", steps=[step])
