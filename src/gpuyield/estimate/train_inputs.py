"""What a training estimate starts from: a catalog model merged with the caller's arguments.

Explicit arguments override the catalog's; the catalog's reported GPU-hours are kept only while
the run is the catalog's own (same N, D and accelerator), because hours reported for one run imply
a meaningless MFU for another.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpuyield.errors import FieldError
from gpuyield.estimate.catalog import Model, get_accelerator, get_model, parse_precision
from gpuyield.estimate.numbers import NumberLike, Range, as_range, require_positive


@dataclass(frozen=True, kw_only=True, slots=True)
class TrainInputs:
    """Inputs after merging the catalog model with explicit arguments."""

    active_params: Range
    tokens: Range
    accelerator_id: str
    precision: str
    num_gpus: Range | None
    model: Model | None
    #: Peak the user gave (--peak-tflops) for hardware not in the catalog.
    peak_tflops: Range | None = None
    #: Reported GPU-hours that belong to exactly this configuration (given, or the catalog's).
    reported: Range | None = None
    #: Where ``reported`` comes from.
    reported_source: str = ""
    #: Why the catalog's reported hours were not used, if they were not.
    reported_dropped: str = ""


@dataclass(frozen=True, kw_only=True, slots=True)
class GivenShape:
    """The run's shape as the caller gave it (None: take the catalog model's)."""

    params: NumberLike | None
    tokens: NumberLike | None
    gpus: NumberLike | None
    accelerator: str | None


def merge_inputs(
    given_: GivenShape,
    precision: str | None,
    model_id: str | None,
    reported_gpu_hours: NumberLike | None,
    peak_tflops: NumberLike | None,
) -> TrainInputs:
    model = get_model(model_id) if model_id else None
    n = _pick(given_.params, "estimate.params", model.active_params if model else None)
    d = _pick(given_.tokens, "estimate.tokens", model.tokens if model else None)
    g = _pick(given_.gpus, "estimate.gpus", model.num_gpus if model else None)
    chip = given_.accelerator or (model.accelerator if model else None)
    peak = _peak(peak_tflops)
    missing = [
        name for name, value in (("estimate.params", n), ("estimate.tokens", d)) if not value
    ]
    if not chip and peak is None:
        missing.append("estimate.accelerator (or estimate.peak_tflops)")
    if missing:
        raise FieldError(
            missing[0],
            f"is missing{'' if len(missing) == 1 else ', and so is ' + ', '.join(missing[1:])}",
            hint="give them, or a catalog estimate.model to fill them in "
            "(see gpuyield estimate models)",
        )
    assert n and d  # narrowed by the check above
    reported = _reported(model, given_, peak, reported_gpu_hours)
    return TrainInputs(
        active_params=require_positive(n, field="estimate.params"),
        tokens=require_positive(d, field="estimate.tokens"),
        accelerator_id=chip or "custom",
        precision=parse_precision(precision or (model.precision if model else "bf16")),
        num_gpus=require_positive(g, field="estimate.gpus") if g else None,
        model=model,
        peak_tflops=peak,
        reported=reported.gpu_hours,
        reported_source=reported.source,
        reported_dropped=reported.dropped,
    )


def _pick(value: NumberLike | None, field: str, fallback: Range | None) -> Range | None:
    return as_range(value, field=field) if value is not None else fallback


def _peak(peak_tflops: NumberLike | None) -> Range | None:
    if peak_tflops is None:
        return None
    field = "estimate.peak_tflops"
    return require_positive(as_range(peak_tflops, field=field), field=field)


@dataclass(frozen=True, kw_only=True, slots=True)
class _Reported:
    """Reported GPU-hours that belong to this run (None: none do), and where they come from."""

    gpu_hours: Range | None = None
    source: str = ""
    #: Why the catalog's reported hours were not used, if they were not.
    dropped: str = ""


def _reported(
    model: Model | None,
    given_: GivenShape,
    peak: Range | None,
    reported_gpu_hours: NumberLike | None,
) -> _Reported:
    """Reported hours that belong to this configuration, their source, and why any were dropped.

    The catalog's hours describe the run as trained; applied to other parameters, tokens or
    hardware they would imply a meaningless MFU (bloom-176b on an H100 is not BLOOM's run).
    """
    if reported_gpu_hours is not None:
        field = "estimate.reported_gpu_hours"
        hours = require_positive(as_range(reported_gpu_hours, field=field), field=field)
        return _Reported(gpu_hours=hours, source="given")
    if model is None or model.reported_hours() is None:
        return _Reported()
    changed = [
        flag
        for flag, differs in (
            ("--params", _differs(given_.params, "estimate.params", model.active_params)),
            ("--tokens", _differs(given_.tokens, "estimate.tokens", model.tokens)),
            ("--accelerator", _other_chip(given_.accelerator, model.accelerator)),
            ("--peak-tflops", peak is not None),
        )
        if differs
    ]
    if changed:
        why = (
            f"{model.id}'s reported GPU-hours are for its own run; not used here because "
            f"{', '.join(changed)} changed the run (give --reported-gpu-hours for this one)"
        )
        return _Reported(dropped=why)
    return _Reported(
        gpu_hours=model.reported_hours(), source=source_of(model, "reported_gpu_hours")
    )


def _differs(value: NumberLike | None, field: str, catalog: Range | None) -> bool:
    return value is not None and as_range(value, field=field) != catalog


def _other_chip(accelerator: str | None, catalog_id: str) -> bool:
    return accelerator is not None and get_accelerator(accelerator).id != catalog_id


def source_of(model: Model | None, field_name: str) -> str:
    if model is None:
        return "given"
    override = model.field_sources.get(field_name)
    if override is not None:
        return f"{override.source} ({override.status})"
    return f"{model.source} ({model.status})"


__all__ = ["GivenShape", "TrainInputs", "merge_inputs", "source_of"]
