"""The essay's estimates for xAI, Anthropic and OpenAI, its anecdotes and its waste split, checked.

Each function returns one ``ClaimCheck``; inputs are the essay's own words unless a reading says
otherwise. Verdicts come from ``claims.judge``; facts.md section 6 is the reference they must match.
"""

from __future__ import annotations

from gpuyield.estimate import formulas as f
from gpuyield.estimate.catalog import get_accelerator, get_model
from gpuyield.estimate.claims import ClaimCheck, computed, ratio_step, sourced, unreproducible
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
    return computed(
        id="dgx-bandwidth",
        section=XAI,
        stated="25",
        unit="TB/s",
        claim="A DGX box has a memory bandwidth 25T/s.",
        reading="a DGX H100: 8 x H100 SXM at 3.35 TB/s each",
        steps=[step],
        reason="8 x 3.35 = 26.8 TB/s; the essay rounds down, which only tightens its bounds.",
    )


def _grok_speed() -> ClaimCheck:
    return sourced(
        id="grok-speed",
        section=XAI,
        stated="68",
        unit="tokens/s",
        claim="Grok generates tokens as 68/s",
        source="the essay's observation of Grok's serving speed",
        reason="Observed serving speed; not a published figure.",
    )


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
    return computed(
        id="grok-max-size",
        section=XAI,
        stated="400B",
        unit="params",
        claim="so its models can be at most 400G",
        reading="25 TB/s / 68 tokens/s, FP8 weights (1 byte), full bandwidth, batch 1",
        steps=_grok_bound("1"),
        reason="25e12 / 68 = 368B active parameters at most; a bound on active, not total.",
    )


def _grok_likely_size() -> ClaimCheck:
    return computed(
        id="grok-likely-size",
        section=XAI,
        stated="200B",
        unit="params",
        claim="but 200G is more likely",
        reading="the same bound at a typical 50-80% of peak bandwidth (facts.md section 4)",
        steps=_grok_bound("0.5:0.8"),
        reason="At 50-80% achieved bandwidth the bound is 184-294B.",
    )


def _grok_hours() -> ClaimCheck:
    run = estimate_train(params="200B", tokens="40T", accelerator=H100, mfu=0.4)
    llama = get_model("llama-3.1-405b")
    assert llama.reported_gpu_hours is not None and llama.tokens is not None
    scaled = llama.reported_gpu_hours.central * (200e9 * 40e12) / (405e9 * llama.tokens.central)
    return computed(
        id="grok-hours",
        section=XAI,
        stated="40M",
        unit="GPU-h",
        claim="Let's assume they serve quantized at fp8, but trained in bf16. They most likely "
        "trained for 40T tokens. This would be 40M H100 hours.",
        reading="200B active, 40T tokens, BF16 at 40% MFU on H100",
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
    return computed(
        id="xai-fleet-hours",
        section=XAI,
        stated="432M",
        unit="GPU-h",
        claim="They have between 100k or 200k GPUs for at least 6 months before releasing Grok 3 "
        "... This is 432M H100 hours.",
        reading="100k-200k H100 for 180 days",
        steps=[step],
        reason="100k x 180 days x 24 h = 432M, the low end; 200k GPUs give 864M.",
    )


def _xai_yield() -> ClaimCheck:
    return computed(
        id="xai-yield",
        section=XAI,
        stated="10%",
        unit="%",
        claim="By these numbers, xAI has perhaps 10% efficiency at training.",
        reading="the essay's 40M over its 432M",
        steps=[ratio_step("yield", "yield", "40M / 432M", P(40e6), P(432e6), "%")],
        reason="40M / 432M = 9.3% (7.8% with the recomputed 33.7M).",
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
    return computed(
        id="opus-size",
        section=ANTHROPIC,
        stated="600B",
        unit="params",
        claim="A similar analysis suggests Claude 3 Opus is about 600G in size (as it serves at "
        "27 tokens a second).",
        reading="25 TB/s / 27 tokens/s with FP8 weights, full bandwidth, batch 1",
        steps=steps,
        reason=f"The bound is {format_number(at_full)}; 600B needs eta "
        f"{needed[0]:.2f}-{needed[1]:.2f}, which the essay does not state.",
    )


def _sonnet37_compute() -> ClaimCheck:
    return sourced(
        id="sonnet37-compute",
        section=ANTHROPIC,
        stated="1e26",
        unit="FLOP",
        claim="Claude 3.7 Sonnet, cost 'a few tens of millions of dollars' to train using less "
        "than 1026 FLOPs",
        source="Ethan Mollick's X post (Feb 2025) relaying Anthropic; '1026' means 10^26",
        reason="Quoted; an upper bound, consistent with the ~2e25 FLOP recomputed below.",
    )


def _llama405_flops() -> ClaimCheck:
    run = estimate_train(model="llama-3.1-405b")
    tokens = P(run.worksheet.step("tokens").value.central)
    flops = flops_step(P(405e9), tokens)
    return computed(
        id="llama405-flops",
        section=ANTHROPIC,
        stated="3.8e25",
        unit="FLOP",
        claim="Using a baseline the Llama 3, 405B model usage of 3.8x1025 Flops",
        reading="'3.8x1025' is 3.8e25; 6 x 405B x 15.6T tokens (the paper's count)",
        steps=[given("tokens", "training tokens", tokens, source="Llama 3 paper"), flops],
        reason="6 x 405e9 x 15.6e12 = 3.8e25 FLOP (3.6e25 with 15T).",
    )


def _budget_hours() -> Step:
    return ratio_step("gpu_hours", "GPU-hours bought", "$ / price", P(30e6), P(2), "GPU-h")


def _sonnet_hours() -> ClaimCheck:
    return computed(
        id="sonnet-hours",
        section=ANTHROPIC,
        stated="15M",
        unit="GPU-h",
        claim="a few tens of millions means $30M, then that buys (at $2 a H100 hour) 15M GPU "
        "hours.",
        reading="$30M at $2 per H100-hour",
        steps=[_budget_hours()],
        reason="$30M / $2 = 15M GPU-hours.",
    )


def _sonnet_vs_llama() -> ClaimCheck:
    llama = get_model("llama-3.1-405b").reported_gpu_hours
    assert llama is not None
    return computed(
        id="sonnet-vs-llama",
        section=ANTHROPIC,
        stated="0.5",
        unit="x",
        claim="This is half of what Llama 405B used.",
        reading="15M over Llama 3.1 405B's reported 30.84M GPU-hours",
        steps=[
            ratio_step("ratio", "Sonnet / Llama 405B hours", "15M / H_llama", P(15e6), llama, "x")
        ],
        reason="15M / 30.84M = 0.49.",
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
    return computed(
        id="sonnet-size",
        section=ANTHROPIC,
        stated="200B",
        unit="params",
        claim="If Sonnet was trained for 30T tokens, then this suggests it is about 200B "
        "parameters in size.",
        reading="15M H100-hours at 40% of BF16 peak (low end: Llama 3.1 405B's implied MFU), 30T "
        "tokens",
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
    return computed(
        id="opus-size-bound",
        section=ANTHROPIC,
        stated="400B",
        unit="params",
        claim="Opus runs at more than half the speed of Sonnet, and this suggests it is in the "
        "range of < 400B parameters.",
        reading="decode time grows with active parameters, so Opus < 2 x Sonnet",
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
    return computed(
        id="anthropic-released",
        section=ANTHROPIC,
        stated="150M",
        unit="USD",
        claim="Thus, Antrophic likely trained three models that cost $30M each, and one that cost "
        "time that in the last year. This is aggregately $150M in released training.",
        reading="'cost time that' is 'cost twice that'",
        steps=[step],
        reason="3 x $30M + $60M = $150M.",
    )


def _anthropic_spend() -> ClaimCheck:
    return sourced(
        id="anthropic-spend",
        section=ANTHROPIC,
        stated="2.7B",
        unit="USD",
        claim="Over that time they report using $2.7B in training",
        source="Anthropic's reported training spend, quoted by the essay",
        reason="Quoted.",
    )


def _anthropic_yield() -> ClaimCheck:
    return computed(
        id="anthropic-yield",
        section=ANTHROPIC,
        stated="5.5%",
        unit="%",
        claim="for a yield of 5.5%.",
        reading="$150M over $2.7B",
        steps=[ratio_step("yield", "yield", "$150M / $2.7B", P(150e6), P(2.7e9), "%")],
        reason="150 / 2,700 = 5.6%.",
    )


def _openai_spend() -> ClaimCheck:
    return sourced(
        id="openai-spend",
        section=OPENAI,
        stated="3B",
        unit="USD",
        claim="Open AI's claimed training costs of $3B",
        source="OpenAI's reported training spend, quoted by the essay",
        reason="Quoted.",
    )


def _openai_yield() -> ClaimCheck:
    return computed(
        id="openai-yield",
        section=OPENAI,
        stated="5%",
        unit="%",
        claim="If their costs are similar, then Open AI's claimed training costs of $3B gives them "
        "a yield of 5%.",
        reading="Anthropic's $150M of releases over $3B",
        steps=[ratio_step("yield", "yield", "$150M / $3B", P(150e6), P(3e9), "%")],
        reason="150 / 3,000 = 5%.",
    )


def _openai_small_models() -> ClaimCheck:
    return unreproducible(
        id="openai-small-models",
        section=OPENAI,
        stated="30B",
        unit="params",
        claim="GPT4.1 and O4 Mini may be in the range of 30B and 8B",
        reading="sizes of GPT-4.1 and o4-mini",
        reason="The essay gives no speed, cost or token count for these models to compute from.",
    )


def _ul2_anecdote() -> ClaimCheck:
    return sourced(
        id="ul2-anecdote",
        section=GOOGLE,
        stated="1T",
        unit="tokens",
        claim="the UL20 model ... was trained on 1T tokens over a month at Christmas because he "
        "forgot to turn off the job",
        source="Yi Tay, as recounted by the essay",
        reason="Anecdote; 'UL20' is UL2 (20B).",
    )


def _search_efficiency() -> ClaimCheck:
    return sourced(
        id="search-efficiency",
        section=GOOGLE,
        stated="70%",
        unit="%",
        claim="those clusters would, in well managed companies, manage about 70% efficiency",
        source="the author's experience with search-engine clusters",
        reason="Personal experience; no published figure.",
    )


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
    return computed(
        id="waste-breakdown",
        section=WASTE,
        stated="3%",
        unit="%",
        claim="20% of time being lost to machines being physically unavailable ... The second "
        "20% is wasted on plain idleness ... The third 20% is lost to people running jobs that "
        "they realize are bad ideas half way through ... The fourth 20% is actual divergence "
        "and failed jobs ... Perhaps 10% of the time is spent on valuable experiments ... That "
        "leaves 3% of released work",
        reading="the five shares the essay names, subtracted from 100%",
        steps=[step],
        reason="They leave 10%; only 3% released plus 'double that' (6%) unreleased comes close.",
    )
