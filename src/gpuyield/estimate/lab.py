"""`estimate lab`: a lab's yield from its fleet and its released models, as the essay estimates it.

A scenario is a TOML file (bundled ones live in ``gpuyield/data/scenarios/labs``; see
docs/estimate.md for the format). Each ``[[fleet]]`` and ``[[released]]`` entry gives GPU-hours
in one of five ways: ``gpu_hours``; ``num_gpus`` and ``days``; ``h100_equivalents`` and ``days``;
``dollars`` (at the scenario's or the entry's ``price_per_gpu_hour``); or a training run
(``params``, ``tokens``, ``accelerator``, ``mfu``, ``precision``). A released entry may instead
name a catalog ``model`` and use its reported hours.
yield = released GPU-hours / fleet GPU-hours; the same in H100-equivalent hours, and in dollars
with ``price_per_h100_hour`` (lab_units.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpuyield import tomlfile
from gpuyield.errors import InputError, ParseError
from gpuyield.estimate import formulas as f
from gpuyield.estimate.catalog import get_accelerator, get_model, parse_precision
from gpuyield.estimate.lab_units import (
    GPUS,
    H100_EQUIVALENTS,
    Worked,
    busy_hours,
    dollar_steps,
    h100_weight,
    weighted_total,
)
from gpuyield.estimate.numbers import (
    Range,
    format_percent,
    parse_range,
    require_fraction,
    require_positive,
)
from gpuyield.estimate.train import DEFAULT_MFU
from gpuyield.estimate.worksheet import DOWN, UP, Step, Worksheet, compute, given

_ENTRY_KEYS = frozenset(
    {
        "label",
        "source",
        "gpu_hours",
        "num_gpus",
        "days",
        "dollars",
        "price_per_gpu_hour",
        "params",
        "tokens",
        "accelerator",
        "mfu",
        "precision",
        "model",
        "h100_equivalents",
    }
)
# Bundled lab scenarios: gpuyield/data/scenarios/labs/<id>.toml.
_FOLDER = "scenarios/labs"
_TOP_KEYS = frozenset(
    {
        "id",
        "title",
        "essay_quote",
        "essay_yield",
        "price_per_gpu_hour",
        "price_per_h100_hour",
        "price_source",
        "period_days",
        "notes",
        "fleet",
        "released",
    }
)


@dataclass(frozen=True, kw_only=True, slots=True)
class LabEstimate:
    """Result of ``estimate_lab``."""

    #: Scenario id (or file name).
    scenario: str
    #: GPU-hours the fleet offered in the period.
    fleet_gpu_hours: Range
    #: GPU-hours that went into released models.
    released_gpu_hours: Range
    #: released / fleet.
    yield_fraction: Range
    #: Released GPU-hours as GPUs busy for the whole period; None without ``period_days``.
    released_gpu_equivalents: Range | None
    #: The yield the essay states for this lab, if any.
    essay_yield: Range | None
    #: The shown work.
    worksheet: Worksheet
    #: The fleet's GPU-hours in H100-equivalent hours (dense BF16 peaks; lab_units.py).
    fleet_h100_equiv_hours: Range | None = None
    #: The released models' GPU-hours in H100-equivalent hours.
    released_h100_equiv_hours: Range | None = None
    #: released / fleet in H100-equivalents (differs from ``yield_fraction`` on mixed fleets).
    yield_h100_equiv: Range | None = None
    #: Fleet, released and wasted dollars at ``price_per_h100_hour``; None without a price.
    fleet_dollars: Range | None = None
    released_dollars: Range | None = None
    wasted_dollars: Range | None = None

    def to_dict(self) -> dict[str, Any]:
        """Plain data for ``--json``."""
        return {
            "scenario": self.scenario,
            "fleet_gpu_hours": self.fleet_gpu_hours.to_dict(),
            "released_gpu_hours": self.released_gpu_hours.to_dict(),
            "yield": self.yield_fraction.to_dict(),
            "released_gpu_equivalents": _json(self.released_gpu_equivalents),
            "essay_yield": _json(self.essay_yield),
            "fleet_h100_equiv_hours": _json(self.fleet_h100_equiv_hours),
            "released_h100_equiv_hours": _json(self.released_h100_equiv_hours),
            "yield_h100_equiv": _json(self.yield_h100_equiv),
            "fleet_dollars": _json(self.fleet_dollars),
            "released_dollars": _json(self.released_dollars),
            "wasted_dollars": _json(self.wasted_dollars),
            "worksheet": self.worksheet.to_dict(),
        }


def _json(value: Range | None) -> Any:
    return None if value is None else value.to_dict()


def list_lab_scenarios() -> list[str]:
    """Ids of the bundled lab scenarios."""
    return tomlfile.bundled_names(_FOLDER)


def estimate_lab(scenario: str | Path) -> LabEstimate:
    """The yield of a bundled scenario (by id) or of a scenario file (by path)."""
    doc = tomlfile.load(scenario, folder=_FOLDER, kind="lab scenario")
    path, data = doc.origin, doc.data
    tomlfile.check_keys(data, _TOP_KEYS, origin=path)
    default_price = data.get("price_per_gpu_hour")
    fleet = _section(data, "fleet", path, default_price)
    released = _section(data, "released", path, default_price)
    yield_step = _yield("yield", "yield", "released / fleet", released.total, fleet.total)
    steps = [*fleet.steps, fleet.total, *released.steps, released.total, yield_step]
    equivalents = _equivalents(data, path, released.total.value)
    if equivalents is not None:
        steps.append(equivalents)
    yield_h100 = _yield(
        "yield_h100_equiv",
        "yield in H100-equivalents",
        "released H100-h / fleet H100-h",
        released.h100_total,
        fleet.h100_total,
    )
    dollars = dollar_steps(data, path, fleet.h100_total.value, released.h100_total.value)
    steps += [fleet.h100_total, released.h100_total, yield_h100, *dollars]
    essay = _optional_range(data, "essay_yield", path)
    priced = {s.name: s.value for s in dollars}
    return LabEstimate(
        fleet_h100_equiv_hours=fleet.h100_total.value,
        released_h100_equiv_hours=released.h100_total.value,
        yield_h100_equiv=yield_h100.value,
        fleet_dollars=priced.get("fleet_dollars"),
        released_dollars=priced.get("released_dollars"),
        wasted_dollars=priced.get("wasted_dollars"),
        scenario=str(data.get("id", Path(path).stem)),
        fleet_gpu_hours=fleet.total.value,
        released_gpu_hours=released.total.value,
        yield_fraction=yield_step.value,
        released_gpu_equivalents=equivalents.value if equivalents else None,
        essay_yield=essay,
        worksheet=Worksheet(
            title=str(data.get("title", data.get("id", path))),
            steps=tuple(steps),
            notes=_notes(data, essay, path),
        ),
    )


def _yield(name: str, label: str, ratio: str, released: Step, fleet: Step) -> Step:
    """Yield ``released / fleet``, in the units of the two totals (``ratio`` says which)."""
    return compute(
        name,
        label,
        f"Y = {ratio}",
        "{released} / {fleet}",
        lambda released, fleet: released / fleet,
        {"released": UP, "fleet": DOWN},
        "%",
        released=released.value,
        fleet=fleet.value,
    )


@dataclass(frozen=True, kw_only=True, slots=True)
class _Section:
    """A ``[[fleet]]`` or ``[[released]]`` section worked out: its entries, then its totals."""

    steps: list[Step]
    #: GPU-hours of all entries.
    total: Step
    #: The same in H100-equivalent hours.
    h100_total: Step


def _section(data: Mapping[str, Any], name: str, path: str, default_price: Any) -> _Section:
    entries = data.get(name)
    if not isinstance(entries, list) or not entries:
        raise ParseError(f"needs at least one [[{name}]] entry", path=path, field=name)
    steps: list[Step] = []
    totals: dict[str, Range] = {}
    weights: dict[str, Range] = {}
    for index, entry in enumerate(entries):
        where = f"{name}[{index}]"
        hours = _entry(entry, where, path, default_price)
        weight = _weight(entry, where, path)
        steps += [*hours.steps, *weight.steps]
        totals[f"e{index}"], weights[f"e{index}"] = hours.value, weight.value
    total = compute(
        f"{name}_gpu_hours",
        f"{name} GPU-hours, total",
        "sum of the entries above",
        " + ".join(f"{{{key}}}" for key in totals),
        lambda **hours: sum(hours.values()),
        dict.fromkeys(totals, UP),
        "GPU-h",
        **totals,
    )
    return _Section(steps=steps, total=total, h100_total=weighted_total(name, totals, weights))


def _weight(entry: Mapping[str, Any], where: str, path: str) -> Worked:
    try:
        return h100_weight(entry, where)
    except InputError as error:
        raise ParseError(error.message, path=path, field=where, hint=error.hint) from error


def _entry(entry: Mapping[str, Any], where: str, path: str, default_price: Any) -> Worked:
    unknown = sorted(set(entry) - _ENTRY_KEYS)
    if unknown:
        raise ParseError(f"unknown keys {unknown}", path=path, field=where)
    label = str(entry.get("label", entry.get("model", where)))
    source = str(entry.get("source", ""))

    def num(key: str) -> Range:
        return require_positive(_range(entry, key, where, path), field=f"{where}.{key}")

    try:
        if "model" in entry:
            return _from_model(entry, label, where)
        if "gpu_hours" in entry:
            hours = num("gpu_hours")
            return Worked(
                steps=(given(f"{where}.gpu_hours", label, hours, "GPU-h", source),), value=hours
            )
        for chips in (H100_EQUIVALENTS, GPUS):
            if chips.key in entry:
                return busy_hours(chips, label, source, where, num(chips.key), num("days"))
        if "dollars" in entry:
            price = entry.get("price_per_gpu_hour", default_price)
            if price is None:
                raise InputError(f"{where}: dollars need a price_per_gpu_hour")
            rate = require_positive(
                parse_range(str(price), field=f"{where}.price_per_gpu_hour"),
                field=f"{where}.price_per_gpu_hour",
            )
            return _from_dollars(label, source, where, num("dollars"), rate)
        if "params" in entry:
            return _from_training(entry, label, source, where, num)
    except InputError as error:
        if isinstance(error, ParseError):
            raise
        raise ParseError(error.message, path=path, field=where, hint=error.hint) from error
    raise ParseError(
        "give gpu_hours, num_gpus and days, dollars, params and tokens, or model",
        path=path,
        field=where,
    )


def _from_model(entry: Mapping[str, Any], label: str, where: str) -> Worked:
    model = get_model(str(entry["model"]))
    if model.reported_gpu_hours is None:
        raise InputError(
            f"{where}: catalog model {model.id} has no reported GPU-hours",
            hint="give gpu_hours or params and tokens instead",
        )
    source = f"{model.source} ({model.status})"
    step = given(
        f"{where}.gpu_hours",
        f"{label}: reported GPU-hours",
        model.reported_gpu_hours,
        "GPU-h",
        source,
    )
    return Worked(steps=(step,), value=model.reported_gpu_hours)


def _from_dollars(label: str, source: str, where: str, usd: Range, rate: Range) -> Worked:
    step = compute(
        f"{where}.gpu_hours",
        f"{label}",
        "H = $ / price",
        "{usd} / {rate}",
        lambda usd, rate: usd / rate,
        {"usd": UP, "rate": DOWN},
        "GPU-h",
        usd=usd,
        rate=rate,
    )
    inputs = [
        given(f"{where}.dollars", f"{label}: cost", usd, "USD", source),
        given(f"{where}.price_per_gpu_hour", "price per GPU-hour", rate, "USD"),
    ]
    return Worked(steps=(*inputs, step), value=step.value)


def _from_training(
    entry: Mapping[str, Any], label: str, source: str, where: str, num: Any
) -> Worked:
    chip = get_accelerator(str(entry.get("accelerator", "h100-sxm")))
    precision = parse_precision(str(entry.get("precision", "bf16")))
    peak = Range.point(chip.peak_tflops(precision))
    mfu = require_fraction(
        parse_range(str(entry.get("mfu", DEFAULT_MFU)), field=f"{where}.mfu"), field=f"{where}.mfu"
    )
    n, d = num("params"), num("tokens")
    step = compute(
        f"{where}.gpu_hours",
        f"{label}",
        "H = 6 * N * D / (peak * MFU) / 3600",
        "6 * {n} * {d} / ({peak}e12 * {mfu}) / 3600",
        lambda n, d, peak, mfu: f.gpu_hours_for(f.training_flops(n, d), peak, mfu),
        {"n": UP, "d": UP, "peak": DOWN, "mfu": DOWN},
        "GPU-h",
        n=n,
        d=d,
        peak=peak,
        mfu=mfu,
    )
    inputs = [
        given(f"{where}.params", f"{label}: active parameters", n, source=source),
        given(f"{where}.tokens", f"{label}: tokens", d, source=source),
        given(
            f"{where}.peak_tflops",
            f"{chip.id} dense {precision} peak",
            peak,
            "TFLOP/s",
            f"{chip.source} ({chip.status})",
        ),
        given(f"{where}.mfu", f"{label}: MFU", mfu, "%", source),
    ]
    return Worked(steps=(*inputs, step), value=step.value)


def _equivalents(data: Mapping[str, Any], path: str, released: Range) -> Step | None:
    if "period_days" not in data:
        return None
    days = require_positive(_range(data, "period_days", "period_days", path), field="period_days")
    return compute(
        "released_gpu_equivalents",
        "released, as GPUs busy all period",
        "G = released / (days * 24)",
        "{released} / ({days} * 24)",
        lambda released, days: released / (days * f.HOURS_PER_DAY),
        {"released": UP, "days": DOWN},
        "GPUs",
        released=released,
        days=days,
    )


def _range(data: Mapping[str, Any], key: str, where: str, path: str) -> Range:
    if key not in data:
        raise ParseError(f"missing {key}", path=path, field=where)
    try:
        return parse_range(str(data[key]), field=f"{where}.{key}")
    except InputError as error:
        raise ParseError(error.message, path=path, field=f"{where}.{key}") from error


def _optional_range(data: Mapping[str, Any], key: str, path: str) -> Range | None:
    return _range(data, key, key, path) if key in data else None


def _notes(data: Mapping[str, Any], essay: Range | None, path: str) -> tuple[str, ...]:
    given = data.get("notes", [])
    if not isinstance(given, list) or not all(isinstance(note, str) for note in given):
        raise ParseError("must be an array of strings", path=path, field="notes")
    notes = list(given)
    if essay is not None:
        quote = data.get("essay_quote", "")
        notes.append(
            f"The essay states a yield of {format_percent(essay)}"
            + (f': "{quote}"' if quote else ".")
        )
    return tuple(notes)
