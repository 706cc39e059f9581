"""The essay's Meta estimates (2025: Llama 4 against the fleet; 2024: Llama 3.x), checked.

Each function returns one ``ClaimCheck``; inputs are the essay's own words unless a reading says
otherwise. Verdicts come from ``claims.judge``; facts.md section 6 is the reference they must match.
"""

from __future__ import annotations

from gpuyield.estimate import formulas as f
from gpuyield.estimate.catalog import get_model
from gpuyield.estimate.claims import ClaimCheck, claim, ratio_step
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
    return claim("meta-fleet-600k")


def _meta_fleet_350k() -> ClaimCheck:
    return claim("meta-fleet-350k")


def _llama4_tokens() -> ClaimCheck:
    return claim("llama4-tokens", source=get_model("llama-4-maverick").source)


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
    return claim("scout-vs-behemoth", steps=_behemoth_costratio_step(40e12, "Scout"))


def _maverickratio_step() -> ClaimCheck:
    return claim("maverick-vs-behemoth", steps=_behemoth_costratio_step(22e12, "Maverick"))


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
    return claim(
        "meta-10k-gpus",
        steps=[hours, days],
        reason=f"No period or unrelated model is named; the cards' "
        f"{format_number(hours.value.central)} GPU-hours equal 10k GPUs for "
        f"{days.value.central:.0f} days.",
    )


def _meta_yield_350k() -> ClaimCheck:
    return claim(
        "meta-yield-350k",
        steps=[ratio_step("yield", "yield", "10k / 350k", P(10e3), P(350e3), "%")],
    )


def _zuckerberg_100k() -> ClaimCheck:
    return claim("meta-cluster-100k")


def _meta_yield_100k() -> ClaimCheck:
    return claim(
        "meta-yield-100k",
        steps=[ratio_step("yield", "yield", "10k / 100k", P(10e3), P(100e3), "%")],
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
    return claim("llama32-90b-hours", steps=[step])


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
    return claim("llama31-total-hours", steps=[total])


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
    return claim(
        "meta-24k-clusters",
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
    return claim("meta-100k-cluster", steps=[step])


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
    return claim("meta-2024-released-hours", steps=[_card_hours_2024()])


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
    return claim(
        "meta-2024-yield",
        steps=[fleet, ratio_step("yield", "yield", "11M / fleet", P(11e6), fleet.value, "%")],
        reason=f"11M / 354M = 3.1%; with the cards' 9.0M it is {format_percent(P(cards))}.",
    )
