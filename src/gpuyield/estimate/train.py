"""`estimate train`: how much compute, time and money a training run takes, from N, D and MFU."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gpuyield.errors import InputError
from gpuyield.estimate import formulas as f
from gpuyield.estimate.catalog import (
    Accelerator,
    Model,
    get_accelerator,
    get_model,
    parse_precision,
)
from gpuyield.estimate.numbers import (
    NumberLike,
    Range,
    as_range,
    require_fraction,
    require_positive,
)
from gpuyield.estimate.worksheet import DOWN, UP, Step, Worksheet, compute, given

#: The essay's standard estimate: "we take 40% of the bf16 Flops".
DEFAULT_MFU = 0.4


@dataclass(frozen=True, kw_only=True, slots=True)
class TrainEstimate:
    """Results of ``estimate_train``; optional results are None when their inputs were not given."""

    #: Training compute, FLOP (6 * N * D).
    flops: Range
    #: GPU-hours at the given MFU.
    gpu_hours: Range
    #: Wall-clock days on ``num_gpus`` GPUs.
    wall_days: Range | None
    #: Seconds per optimizer step of ``batch_tokens`` tokens.
    seconds_per_batch: Range | None
    #: Optimizer steps: tokens / batch_tokens.
    num_batches: Range | None
    #: Cost at the given price per GPU-hour, US dollars.
    cost_usd: Range | None
    #: MFU implied by a catalog model's reported GPU-hours.
    implied_mfu: Range | None
    #: Wall days implied by a catalog model's reported GPU-hours on ``num_gpus`` GPUs.
    reported_wall_days: Range | None
    #: The shown work.
    worksheet: Worksheet

    def to_json(self) -> dict[str, Any]:
        """The documented ``--json`` keys plus the worksheet."""
        keys = ("flops", "gpu_hours", "wall_days", "seconds_per_batch", "num_batches", "cost_usd")
        data: dict[str, Any] = {key: _json(getattr(self, key)) for key in keys}
        data["implied_mfu"] = _json(self.implied_mfu)
        data["reported_wall_days"] = _json(self.reported_wall_days)
        data["worksheet"] = self.worksheet.to_json()
        return data


def _json(value: Range | None) -> Any:
    return None if value is None else value.to_json()


@dataclass(frozen=True, kw_only=True, slots=True)
class _Inputs:
    """Inputs after merging the catalog model with explicit arguments."""

    active_params: Range
    tokens: Range
    accelerator_id: str
    precision: str
    num_gpus: Range | None
    model: Model | None


def estimate_train(
    *,
    params: NumberLike | None = None,
    tokens: NumberLike | None = None,
    gpus: NumberLike | None = None,
    accelerator: str | None = None,
    mfu: NumberLike = DEFAULT_MFU,
    precision: str | None = None,
    batch_tokens: NumberLike | None = None,
    price_per_gpu_hour: NumberLike | None = None,
    model: str | None = None,
) -> TrainEstimate:
    """Training compute, GPU-hours, wall days, batches and cost of a run.

    ``model`` fills N and D from the catalog (and the accelerator, precision and GPU count where it
    records them).

    Explicit arguments override the catalog's. With a catalog model that reports GPU-hours,
    the result also carries the MFU those hours imply.
    """
    inputs = _merge_inputs(params, tokens, gpus, accelerator, precision, model)
    chip = get_accelerator(inputs.accelerator_id)
    peak = Range.point(chip.peak_tflops(inputs.precision))
    mfu_r = require_fraction(as_range(mfu, arg="--mfu"), arg="--mfu")
    steps = _input_steps(inputs, chip, peak, mfu_r)
    flops, hours = _compute_steps(inputs, peak, mfu_r)
    steps += [flops, hours, *_gpu_steps(inputs, hours.value)]
    if batch_tokens is not None:
        b = require_positive(as_range(batch_tokens, arg="--batch-tokens"), arg="--batch-tokens")
        steps += _batch_steps(inputs, b, peak, mfu_r)
    if price_per_gpu_hour is not None:
        steps += _cost_steps(hours.value, price_per_gpu_hour)
    if inputs.model is not None and inputs.model.reported_gpu_hours is not None:
        steps += _reported_steps(inputs, inputs.model.reported_gpu_hours, flops.value, peak)
    return _result(inputs, steps)


def _result(inputs: _Inputs, steps: list[Step]) -> TrainEstimate:
    results = {step.name: step.value for step in steps}
    return TrainEstimate(
        flops=results["flops"],
        gpu_hours=results["gpu_hours"],
        wall_days=results.get("wall_days"),
        seconds_per_batch=results.get("seconds_per_batch"),
        num_batches=results.get("num_batches"),
        cost_usd=results.get("cost_usd"),
        implied_mfu=results.get("implied_mfu"),
        reported_wall_days=results.get("reported_wall_days"),
        worksheet=Worksheet(title=_title(inputs), steps=tuple(steps), notes=_notes(inputs)),
    )


def _input_steps(inputs: _Inputs, chip: Accelerator, peak: Range, mfu: Range) -> list[Step]:
    model = inputs.model
    return [
        given(
            "active_params",
            "active parameters N",
            inputs.active_params,
            source=_src(model, "active_params"),
        ),
        given("tokens", "training tokens D", inputs.tokens, source=_src(model, "tokens")),
        given(
            "peak_tflops",
            f"{chip.id} dense {inputs.precision} peak",
            peak,
            "TFLOP/s",
            f"{chip.source} ({chip.status})",
        ),
        given("mfu", "model FLOPs utilization", mfu, "%"),
    ]


def flops_step(active_params: Range, tokens: Range) -> Step:
    """The worksheet step C = 6 * N * D (training compute), shared by every estimate that needs it."""
    return compute(
        "flops",
        "training compute",
        "C = 6 * N * D",
        "6 * {active_params} * {tokens}",
        f.training_flops,
        {"active_params": UP, "tokens": UP},
        "FLOP",
        active_params=active_params,
        tokens=tokens,
    )


def _compute_steps(inputs: _Inputs, peak: Range, mfu: Range) -> tuple[Step, Step]:
    flops = flops_step(inputs.active_params, inputs.tokens)
    hours = compute(
        "gpu_hours",
        "GPU-hours",
        "H = C / (peak * MFU) / 3600",
        "{flops} / ({peak_tflops}e12 * {mfu}) / 3600",
        f.gpu_hours_for,
        {"flops": UP, "peak_tflops": DOWN, "mfu": DOWN},
        "GPU-h",
        flops=flops.value,
        peak_tflops=peak,
        mfu=mfu,
    )
    return flops, hours


def _merge_inputs(
    params: NumberLike | None,
    tokens: NumberLike | None,
    gpus: NumberLike | None,
    accelerator: str | None,
    precision: str | None,
    model_id: str | None,
) -> _Inputs:
    model = get_model(model_id) if model_id else None
    n = as_range(params, arg="--params") if params is not None else (model and model.active_params)
    d = as_range(tokens, arg="--tokens") if tokens is not None else (model and model.tokens)
    g = as_range(gpus, arg="--gpus") if gpus is not None else (model and model.num_gpus)
    chip = accelerator or (model.accelerator if model else None)
    missing = [
        name
        for name, value in (("--params", n), ("--tokens", d), ("--accelerator", chip))
        if not value
    ]
    if missing:
        raise InputError(
            f"missing {', '.join(missing)}",
            hint="give them, or --model ID to fill them in (see gpuyield estimate models)",
        )
    assert n and d and chip  # narrowed by the check above
    return _Inputs(
        active_params=require_positive(n, arg="--params"),
        tokens=require_positive(d, arg="--tokens"),
        accelerator_id=chip,
        precision=parse_precision(precision or (model.precision if model else "bf16")),
        num_gpus=require_positive(g, arg="--gpus") if g else None,
        model=model,
    )


def _gpu_steps(inputs: _Inputs, gpu_hours: Range) -> list[Step]:
    g = inputs.num_gpus
    if g is None:
        return []
    return [
        given("num_gpus", "GPUs G", g, source=_src(inputs.model, "num_gpus")),
        compute(
            "wall_days",
            "wall-clock days",
            "T = H / G / 24",
            "{gpu_hours} / {num_gpus} / 24",
            f.wall_days,
            {"gpu_hours": UP, "num_gpus": DOWN},
            "days",
            gpu_hours=gpu_hours,
            num_gpus=g,
        ),
    ]


def _cost_steps(gpu_hours: Range, price: NumberLike) -> list[Step]:
    arg = "--price-per-gpu-hour"
    rate = require_positive(as_range(price, arg=arg), arg=arg)
    return [
        given("price_per_gpu_hour", "price per GPU-hour", rate, "USD"),
        compute(
            "cost_usd",
            "cost",
            "$ = H * price",
            "{h} * {p}",
            lambda h, p: h * p,
            {"h": UP, "p": UP},
            "USD",
            h=gpu_hours,
            p=rate,
        ),
    ]


def _batch_steps(inputs: _Inputs, b: Range, peak: Range, mfu: Range) -> list[Step]:
    steps = [
        given("batch_tokens", "tokens per batch B", b),
        compute(
            "num_batches",
            "optimizer steps",
            "S = D / B",
            "{d} / {b}",
            lambda d, b: d / b,
            {"d": UP, "b": DOWN},
            d=inputs.tokens,
            b=b,
        ),
    ]
    g = inputs.num_gpus
    if g is not None:
        steps.append(
            compute(
                "seconds_per_batch",
                "seconds per batch",
                "t = 6 * N * B / (G * peak * MFU)",
                "6 * {active_params} * {batch_tokens} / ({num_gpus} * {peak_tflops}e12 * {mfu})",
                f.seconds_per_batch,
                {
                    "active_params": UP,
                    "batch_tokens": UP,
                    "num_gpus": DOWN,
                    "peak_tflops": DOWN,
                    "mfu": DOWN,
                },
                "s",
                active_params=inputs.active_params,
                batch_tokens=b,
                num_gpus=g,
                peak_tflops=peak,
                mfu=mfu,
            )
        )
    return steps


def _reported_steps(inputs: _Inputs, reported: Range, flops: Range, peak: Range) -> list[Step]:
    steps = [
        given(
            "reported_gpu_hours",
            "reported GPU-hours H_r",
            reported,
            "GPU-h",
            _src(inputs.model, "reported_gpu_hours"),
        ),
        compute(
            "implied_mfu",
            "MFU implied by reported hours",
            "MFU = C / (H_r * 3600 * peak)",
            "{flops} / ({gpu_hours} * 3600 * {peak_tflops}e12)",
            f.implied_mfu,
            {"flops": UP, "gpu_hours": DOWN, "peak_tflops": DOWN},
            "%",
            flops=flops,
            gpu_hours=reported,
            peak_tflops=peak,
        ),
    ]
    if inputs.num_gpus is not None:
        steps.append(
            compute(
                "reported_wall_days",
                "wall days implied by reported hours",
                "T_r = H_r / G / 24",
                "{gpu_hours} / {num_gpus} / 24",
                f.wall_days,
                {"gpu_hours": UP, "num_gpus": DOWN},
                "days",
                gpu_hours=reported,
                num_gpus=inputs.num_gpus,
            )
        )
    return steps


def _src(model: Model | None, field_name: str) -> str:
    if model is None:
        return "given"
    override = model.field_sources.get(field_name)
    if override is not None:
        return f"{override.source} ({override.status})"
    return f"{model.source} ({model.status})"


def _title(inputs: _Inputs) -> str:
    subject = inputs.model.name if inputs.model else "training run"
    return f"Training estimate: {subject} on {inputs.accelerator_id} ({inputs.precision})"


def _notes(inputs: _Inputs) -> tuple[str, ...]:
    notes = [
        "6 * N * D ignores attention FLOPs; it uses active parameters, so MoE models count "
        "only the experts each token visits."
    ]
    if inputs.model is not None and inputs.model.reported_gpu_hours is not None:
        notes.append(
            "Reported hours include annealing, long-context stages and restarts, so the "
            "implied MFU sits below the per-step MFU a paper reports."
        )
    if inputs.model is not None and inputs.model.notes:
        notes.append(inputs.model.notes)
    return tuple(notes)
