"""`estimate lab` in the essay's units: H100-equivalent hours and dollars.

The essay counts fleets in "H100 GPU equivalents" (Meta's 600k) and prices compute at "$2 a H100
hour". A scenario entry's GPU-hours weigh ``peak(accelerator) / peak(h100-sxm)`` H100-hours (dense
BF16 peaks from the accelerator catalog, the one source of them; an entry names its
``accelerator``, a catalog ``model`` its own, and the default is the H100 SXM the essay counts in),
and a fleet entry may give ``h100_equivalents`` (with ``days``) directly. With
``price_per_h100_hour`` the fleet and the released models are also priced, and what the lab paid
for that did not end in a released model is the waste in dollars.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from gpuyield.errors import InputError
from gpuyield.estimate import formulas as f
from gpuyield.estimate.catalog import get_accelerator, get_model
from gpuyield.estimate.numbers import Range, parse_range, require_positive
from gpuyield.estimate.worksheet import DOWN, UP, Step, compute, given

REFERENCE = "h100-sxm"


@dataclass(frozen=True, kw_only=True, slots=True)
class Worked:
    """A number and the worksheet steps that show it."""

    steps: tuple[Step, ...]
    value: Range


def accelerator_of(entry: Mapping[str, Any]) -> str:
    """The accelerator an entry's GPU-hours ran on: its own, its catalog model's, or the H100."""
    if "model" in entry:
        return get_model(str(entry["model"])).accelerator
    if "h100_equivalents" in entry:
        return REFERENCE
    return str(entry.get("accelerator", REFERENCE))


def h100_weight(entry: Mapping[str, Any], where: str) -> Worked:
    """H100-hours per GPU-hour of an entry, with a step stating the peaks where it is not 1."""
    chip = get_accelerator(accelerator_of(entry))
    reference = get_accelerator(REFERENCE)
    weight = Range.point(chip.peak_tflops_bf16 / reference.peak_tflops_bf16)
    if chip.id == reference.id:
        return Worked(steps=(), value=weight)
    step = given(
        f"{where}.h100_equiv",
        f"{chip.id} in H100s: {chip.peak_tflops_bf16:g} / {reference.peak_tflops_bf16:g} "
        "TFLOP/s dense BF16",
        weight,
        "H100",
        f"{chip.source} ({chip.status}); {reference.source}",
    )
    return Worked(steps=(step,), value=weight)


@dataclass(frozen=True, kw_only=True, slots=True)
class ChipCount:
    """How an entry counts the chips it kept busy for some days: GPUs, or H100 equivalents."""

    #: The entry's key, and its name in the worksheet (``{where}.<key>``).
    key: str
    #: The count in words (``{label}: <noun>``, and in the formula).
    noun: str
    #: The count's name in the formula's template.
    symbol: str
    #: The hours' unit.
    unit: str
    #: Appended to the entry's label on the hours' step.
    suffix: str = ""


GPUS = ChipCount(key="num_gpus", noun="GPUs", symbol="gpus", unit="GPU-h")
H100_EQUIVALENTS = ChipCount(
    key="h100_equivalents",
    noun="H100 equivalents",
    symbol="h100e",
    unit="H100-h",
    suffix=" (as H100s)",
)


def busy_hours(
    chips: ChipCount, label: str, source: str, where: str, count: Range, days: Range
) -> Worked:
    """``count`` chips busy for ``days``: their hours, with the steps stating both inputs."""
    symbol = chips.symbol
    step = compute(
        f"{where}.gpu_hours",
        f"{label}{chips.suffix}",
        f"H = {chips.noun} * days * 24",
        f"{{{symbol}}} * {{days}} * 24",
        lambda **v: v[symbol] * v["days"] * f.HOURS_PER_DAY,
        {symbol: UP, "days": UP},
        chips.unit,
        **{symbol: count, "days": days},
    )
    inputs = [
        given(f"{where}.{chips.key}", f"{label}: {chips.noun}", count, source=source),
        given(f"{where}.days", f"{label}: days", days, "days", source),
    ]
    return Worked(steps=(*inputs, step), value=step.value)


def weighted_total(name: str, hours: dict[str, Range], weights: dict[str, Range]) -> Step:
    """``name``'s H100-equivalent hours: each entry's GPU-hours times its weight, summed."""
    values = {**{f"h{k}": v for k, v in hours.items()}, **{f"w{k}": v for k, v in weights.items()}}
    terms = " + ".join(f"{{h{k}}} * {{w{k}}}" for k in hours)
    return compute(
        f"{name}_h100_equiv_hours",
        f"{name} H100-equivalent hours",
        "sum of GPU-hours * H100 weight",
        terms,
        lambda **v: sum(v[f"h{k}"] * v[f"w{k}"] for k in hours),
        dict.fromkeys(values, UP),
        "H100-h",
        **values,
    )


def dollar_steps(
    data: Mapping[str, Any], path: str, fleet_h100: Range, released_h100: Range
) -> list[Step]:
    """The fleet, the released models and the waste in dollars at ``price_per_h100_hour``."""
    if "price_per_h100_hour" not in data:
        return []
    price = _price(data, path)
    steps = [
        given(
            "price_per_h100_hour",
            "price of an H100-hour",
            price,
            "USD",
            str(data.get("price_source", "")),
        )
    ]
    for name, hours in (("fleet", fleet_h100), ("released", released_h100)):
        steps.append(
            compute(
                f"{name}_dollars",
                f"{name}, in dollars",
                "$ = H100-hours * price",
                "{hours} * {price}",
                lambda hours, price: hours * price,
                {"hours": UP, "price": UP},
                "USD",
                hours=hours,
                price=price,
            )
        )
    steps.append(
        compute(
            "wasted_dollars",
            "paid for, not in a released model",
            "$ = fleet $ - released $",
            "{fleet} - {released}",
            lambda fleet, released: fleet - released,
            {"fleet": UP, "released": DOWN},
            "USD",
            fleet=steps[1].value,
            released=steps[2].value,
        )
    )
    return steps


def _price(data: Mapping[str, Any], path: str) -> Range:
    """``price_per_h100_hour``, checked; an error names the scenario file."""
    try:
        return require_positive(
            parse_range(str(data["price_per_h100_hour"]), field="price_per_h100_hour"),
            field="price_per_h100_hour",
        )
    except InputError as error:
        raise InputError(f"{path}: {error.message}", hint=error.hint) from None
