"""The essay's Meta estimates (2025: Llama 4 against the fleet; 2024: Llama 3.x), checked.

Each function returns one ``ClaimCheck``; inputs are the essay's own words unless a reading says
otherwise. Verdicts come from ``claims.judge``; facts.md section 6 is the reference they must match.
"""

from __future__ import annotations

from gpuyield.estimate import formulas as f
from gpuyield.estimate.catalog import get_model
from gpuyield.estimate.claims import ClaimCheck, computed, ratio_step, sourced, unreproducible
from gpuyield.estimate.numbers import Range, format_number, format_percent
from gpuyield.estimate.worksheet import DOWN, UP, Step, compute, given

P = Range.point
META25, META24 = "Meta 2025", "Meta 2024"


def claims() -> list[ClaimCheck]:
    """This module's claims in essay order."""
    return [
        _meta_fleet_600k(),
        _meta_fleet_350k(),
        _llama4_tokens(),
        _scoutratio_step(),
        _maverickratio_step(),
        _meta_10k_gpus(),
        _meta_yield_350k(),
        _zuckerberg_100k(),
        _meta_yield_100k(),
        _vision_90b_hours(),
        _llama31_hours(),
        _clusters_24k(),
        _cluster_100k(),
        _meta_2024_released(),
        _meta_2024_yield(),
    ]


def _meta_fleet_600k() -> ClaimCheck:
    return sourced(
        id="meta-fleet-600k",
        section=META25,
        stated="600k",
        unit="GPUs",
        claim="Meta says they have 600k H100 GPU equivalents",
        source="Meta statement quoted by the essay",
        reason="Quoted; H100 equivalents include other GPUs.",
    )


def _meta_fleet_350k() -> ClaimCheck:
    return sourced(
        id="meta-fleet-350k",
        section=META25,
        stated="350k",
        unit="GPUs",
        claim="Let's presume they have 350k H100s, another quoted figure.",
        source="Meta statement quoted by the essay",
        reason="Quoted figure; the essay's basis for Meta's fleet.",
    )


def _llama4_tokens() -> ClaimCheck:
    return sourced(
        id="llama4-tokens",
        section=META25,
        stated="17B",
        unit="params",
        claim="These models were trained for 40T and 22T tokens with a 17B active parameter model",
        source=get_model("llama-4-maverick").source,
        reason="The Llama 4 model card: Scout 17B/109B on ~40T, Maverick 17B/400B on ~22T tokens.",
    )


def _behemoth_costratio_step(tokens: float, name: str) -> list[Step]:
    big = compute(
        "behemoth_flops",
        "Behemoth compute (290B x 40T)",
        "6 * N * D",
        "6 * {active_params} * {tokens}",
        f.training_flops,
        {"active_params": UP, "tokens": UP},
        "FLOP",
        active_params=P(290e9),
        tokens=P(40e12),
    )
    small = compute(
        f"{name}_flops",
        f"{name} compute (17B x {format_number(tokens)})",
        "6 * N * D",
        "6 * {active_params} * {tokens}",
        f.training_flops,
        {"active_params": UP, "tokens": UP},
        "FLOP",
        active_params=P(17e9),
        tokens=P(tokens),
    )
    ratio = ratio_step(
        f"{name}_ratio", f"Behemoth / {name}", "C_behemoth / C", big.value, small.value, "x"
    )
    return [big, small, ratio]


def _scoutratio_step() -> ClaimCheck:
    return computed(
        id="scout-vs-behemoth",
        section=META25,
        stated="17",
        unit="x",
        claim="meaning they took between 17 and 30 times less than the Behemoth model",
        reading="Scout (17B active, 40T tokens) against Behemoth (290B, 40T)",
        steps=_behemoth_costratio_step(40e12, "Scout"),
        reason="290 / 17 = 17x at equal tokens.",
    )


def _maverickratio_step() -> ClaimCheck:
    return computed(
        id="maverick-vs-behemoth",
        section=META25,
        stated="30",
        unit="x",
        claim="meaning they took between 17 and 30 times less than the Behemoth model",
        reading="Maverick (17B active, 22T tokens) against Behemoth (290B, 40T)",
        steps=_behemoth_costratio_step(22e12, "Maverick"),
        reason="(290 x 40) / (17 x 22) = 31x.",
    )


def _meta_10k_gpus() -> ClaimCheck:
    scout, maverick = (
        get_model(m).reported_gpu_hours for m in ("llama-4-scout", "llama-4-maverick")
    )
    assert scout is not None and maverick is not None
    hours = compute(
        "released_hours",
        "Scout + Maverick reported GPU-hours",
        "H_s + H_m",
        "{a} + {b}",
        lambda a, b: a + b,
        {"a": UP, "b": UP},
        "GPU-h",
        a=scout,
        b=maverick,
    )
    days = compute(
        "days_at_10k",
        "days 10k GPUs need for them",
        "H / 10,000 / 24",
        "{gpu_hours} / {num_gpus} / 24",
        f.wall_days,
        {"gpu_hours": UP, "num_gpus": DOWN},
        "days",
        gpu_hours=hours.value,
        num_gpus=P(10_000),
    )
    return unreproducible(
        id="meta-10k-gpus",
        section=META25,
        stated="10k",
        unit="GPUs",
        claim="Including the unrelated model, Meta seems to have released 10k GPU worth of models",
        reading="GPUs busy for the whole period on released models",
        steps=[hours, days],
        reason=f"No period or unrelated model is named; the cards' "
        f"{format_number(hours.value.central)} GPU-hours equal 10k GPUs for "
        f"{days.value.central:.0f} days.",
    )


def _meta_yield_350k() -> ClaimCheck:
    return computed(
        id="meta-yield-350k",
        section=META25,
        stated="3%",
        unit="%",
        claim="despite having 350k GPUs. This is a 3% yield.",
        reading="10k GPUs of released models over a 350k-GPU fleet",
        steps=[ratio_step("yield", "yield", "10k / 350k", P(10e3), P(350e3), "%")],
        reason="10k / 350k = 2.9%, given the 10k (which is not reproducible).",
    )


def _zuckerberg_100k() -> ClaimCheck:
    return sourced(
        id="meta-cluster-100k",
        section=META25,
        stated="100k",
        unit="GPUs",
        claim="training Llama 4 models 'on a cluster that is bigger than 100,000 H100 AI GPUs'",
        source="Mark Zuckerberg, Meta Q3 2024 earnings call, quoted by the essay",
        reason="Quoted.",
    )


def _meta_yield_100k() -> ClaimCheck:
    return computed(
        id="meta-yield-100k",
        section=META25,
        stated="10%",
        unit="%",
        claim="Even if we reduce our estimate to 100k GPUS, we are seeing a plus 10% yield.",
        reading="10k GPUs of released models over a 100k-GPU fleet",
        steps=[ratio_step("yield", "yield", "10k / 100k", P(10e3), P(100e3), "%")],
        reason="10k / 100k = 10%, given the 10k (which is not reproducible).",
    )


def _vision_90b_hours() -> ClaimCheck:
    model = get_model("llama-3.2-90b-vision")
    assert model.reported_gpu_hours is not None
    step = given(
        "gpu_hours",
        "Llama 3.2 90B Vision reported GPU-hours",
        model.reported_gpu_hours,
        "GPU-h",
        f"{model.source} ({model.status})",
    )
    return computed(
        id="llama32-90b-hours",
        section=META24,
        stated="2M",
        unit="GPU-h",
        claim="the Llama 3.2 90B vision model, trained for 2M hours of H100",
        reading="the model card's total GPU-hours",
        steps=[step],
        reason="The model card says 1.775M H100 GPU-hours, which rounds to 2M.",
    )


def _llama31_hours() -> ClaimCheck:
    ids = ("llama-3.1-8b", "llama-3.1-70b", "llama-3.1-405b")
    hours = {f"h{i}": get_model(m).reported_gpu_hours for i, m in enumerate(ids)}
    inputs = {key: value for key, value in hours.items() if value is not None}
    assert len(inputs) == len(ids)
    total = compute(
        "gpu_hours",
        "Llama 3.1 8B + 70B + 405B",
        "sum of model-card hours",
        "{h0} + {h1} + {h2}",
        lambda **h: sum(h.values()),
        dict.fromkeys(inputs, UP),
        "GPU-h",
        **inputs,
    )
    return computed(
        id="llama31-total-hours",
        section=META24,
        stated="40M",
        unit="GPU-h",
        claim="The Llama 3.1 release had a 405B model, a 70B model, and an 8B model - it trained "
        "for a collective 40M hours.",
        reading="sum of the three model cards' GPU-hours",
        steps=[total],
        reason="1.46M + 7.0M + 30.84M = 39.3M H100 GPU-hours.",
    )


def _clusters_24k() -> ClaimCheck:
    step = compute(
        "gpu_hours",
        "two 24k clusters, Jan-Jun 2024",
        "GPUs * days * 24",
        "{g} * {d} * 24",
        lambda g, d: g * d * f.HOURS_PER_DAY,
        {"g": UP, "d": UP},
        "GPU-h",
        g=P(2 * 24_576),
        d=P(182),
    )
    implied = 210e6 / (2 * 24_576) / f.HOURS_PER_DAY
    return computed(
        id="meta-24k-clusters",
        section=META24,
        stated="210M",
        unit="GPU-h",
        claim="The 24k clusters give 210M H100 hours",
        reading="2 x 24,576 H100 for the first half of 2024 ('earlier in the year', 182 days)",
        steps=[step],
        reason=f"210M H100-hours is 49,152 GPUs for {implied:.0f} days, about January to June.",
    )


def _cluster_100k() -> ClaimCheck:
    step = compute(
        "gpu_hours",
        "100k cluster, Nov-Dec 2024",
        "GPUs * days * 24",
        "{g} * {d} * 24",
        lambda g, d: g * d * f.HOURS_PER_DAY,
        {"g": UP, "d": UP},
        "GPU-h",
        g=P(100e3),
        d=P(60),
    )
    return computed(
        id="meta-100k-cluster",
        section=META24,
        stated="144M",
        unit="GPU-h",
        claim="we know they got their 100l cluster by the end of October ... the new 100k cluster "
        "adds another 144M hours",
        reading="'100l' is 100k; 100,000 H100 for November and December (60 days)",
        steps=[step],
        reason="100,000 GPUs x 60 days x 24 h = 144M GPU-hours.",
    )


def _card_hours_2024() -> Step:
    ids = ("llama-3.3-70b", "llama-3.2-90b-vision", "llama-3.2-11b-vision")
    inputs: dict[str, Range] = {}
    for i, model_id in enumerate(ids):
        hours = get_model(model_id).reported_gpu_hours
        assert hours is not None
        inputs[f"h{i}"] = hours
    return compute(
        "released_hours",
        "Llama 3.3 70B + 3.2 90B + 11B Vision (cards)",
        "sum of model-card hours",
        "{h0} + {h1} + {h2}",
        lambda **h: sum(h.values()),
        dict.fromkeys(inputs, UP),
        "GPU-h",
        **inputs,
    )


def _meta_2024_released() -> ClaimCheck:
    return computed(
        id="meta-2024-released-hours",
        section=META24,
        stated="11M",
        unit="GPU-h",
        claim="from July onwards ... Llama's yield would have probably been 9M H100 hours ... we "
        "see three significant models, adding up to 11M hours",
        reading="the three releases named: Llama 3.3 70B, Llama 3.2 90B and 11B Vision",
        steps=[_card_hours_2024()],
        reason="Their cards sum to 9.0M, the essay's own '9M'; its '11M' contradicts that.",
    )


def _meta_2024_yield() -> ClaimCheck:
    fleet = compute(
        "fleet_hours",
        "fleet: 24k clusters + 100k cluster",
        "210M + 144M",
        "{a} + {b}",
        lambda a, b: a + b,
        {"a": UP, "b": UP},
        "GPU-h",
        a=P(210e6),
        b=P(144e6),
    )
    cards = _card_hours_2024().value.central / fleet.value.central
    return computed(
        id="meta-2024-yield",
        section=META24,
        stated="3%",
        unit="%",
        claim="we see three significant models, adding up to 11M hours, so this produces a yield "
        "of 3%.",
        reading="the essay's 11M over its 210M + 144M",
        steps=[fleet, ratio_step("yield", "yield", "11M / fleet", P(11e6), fleet.value, "%")],
        reason=f"11M / 354M = 3.1%; with the cards' 9.0M it is {format_percent(P(cards))}.",
    )
