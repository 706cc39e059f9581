"""`estimate train`: how much compute, time and money a training run takes, from N, D and MFU."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gpuyield.estimate import formulas as f
from gpuyield.estimate.calibrated import CalibratedMfu
from gpuyield.estimate.catalog import (
    Accelerator,
    get_accelerator,
)
from gpuyield.estimate.effective import EffectiveMfu, effective_mfu_for
from gpuyield.estimate.implied import implied_mfu_step, step_mfu_step
from gpuyield.estimate.numbers import (
    NumberLike,
    Range,
    as_range,
    require_fraction,
    require_positive,
)
from gpuyield.estimate.train_effective import (
    EffectiveInputs,
    calibrated_for,
    calibrated_steps,
    effective_steps,
)
from gpuyield.estimate.train_inputs import GivenShape, TrainInputs, merge_inputs, source_of
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
    #: GPU-hours at the effective (all-in) MFU of published runs: what reported hours look like.
    gpu_hours_range: Range
    #: Wall days at the effective MFU, on ``num_gpus`` GPUs.
    wall_days_range: Range | None
    #: The effective MFU (lowest, median, highest of the runs in ``effective_basis``).
    effective_mfu: Range
    #: Which published runs set ``effective_mfu`` (``hopper runs (19)``).
    effective_basis: str
    #: Training-step MFU implied by reported hours (implied effective MFU over the
    #: effective/step ratio of runs that report both); None without reported hours.
    implied_step_mfu: Range | None
    #: Expected GPU-hours (central) and their calibrated interval (low, high), all-in.
    gpu_hours_calibrated: Range
    #: Expected wall days and their interval on ``num_gpus`` GPUs.
    wall_days_calibrated: Range | None
    #: The calibrated effective MFU behind them: expected, interval, coverage and support.
    calibrated_mfu: CalibratedMfu
    #: The shown work.
    worksheet: Worksheet
    #: What the output must not be read without (each also a worksheet note): an implied
    #: training-step MFU bounded by the peak, and why.
    warnings: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """The documented ``--json`` keys plus the worksheet."""
        keys = ("flops", "gpu_hours", "wall_days", "seconds_per_batch", "num_batches", "cost_usd")
        data: dict[str, Any] = {key: _json(getattr(self, key)) for key in keys}
        data["implied_mfu"] = _json(self.implied_mfu)
        data["implied_step_mfu"] = _json(self.implied_step_mfu)
        data["reported_wall_days"] = _json(self.reported_wall_days)
        data["gpu_hours_range"] = [self.gpu_hours_range.low, self.gpu_hours_range.high]
        data["wall_days_range"] = (
            None
            if self.wall_days_range is None
            else [self.wall_days_range.low, self.wall_days_range.high]
        )
        data["effective_mfu_range"] = [self.effective_mfu.low, self.effective_mfu.high]
        data.update(self._calibrated_json())
        data["mfu_used"] = {
            "gpu_hours": "training-step MFU (--mfu)",
            "gpu_hours_range": f"effective, all-in MFU of {self.effective_basis}",
        }
        data["mfu_used"]["gpu_hours_expected"] = (
            f"calibrated effective MFU of {self.calibrated_mfu.basis} "
            f"({self.calibrated_mfu.support} leave-one-out residuals)"
        )
        data["worksheet"] = self.worksheet.to_dict()
        if self.warnings:
            data["warnings"] = list(self.warnings)
        return data

    def _calibrated_json(self) -> dict[str, Any]:
        hours, days, mfu = self.gpu_hours_calibrated, self.wall_days_calibrated, self.calibrated_mfu
        return {
            "gpu_hours_expected": hours.central,
            "gpu_hours_interval": [hours.low, hours.high],
            "interval_coverage": mfu.coverage,
            "interval_support": mfu.support,
            "interval_basis": mfu.basis,
            "wall_days_expected": None if days is None else days.central,
            "wall_days_interval": None if days is None else [days.low, days.high],
            "effective_mfu_expected": mfu.expected,
            "effective_mfu_interval": [mfu.low, mfu.high],
        }


def _json(value: Range | None) -> Any:
    return None if value is None else value.to_dict()


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
    reported_gpu_hours: NumberLike | None = None,
    peak_tflops: NumberLike | None = None,
) -> TrainEstimate:
    """Training compute, GPU-hours, wall days, batches and cost of a run.

    ``model`` fills N and D from the catalog (and the accelerator, precision and GPU count where it
    records them).

    Explicit arguments override the catalog's; the catalog's reported GPU-hours are used only
    while the run is the catalog's (same N, D and accelerator). ``reported_gpu_hours`` gives
    reported hours for any run; ``peak_tflops`` stands in for an accelerator not in the catalog.
    Besides GPU-hours at the training-step ``mfu``, the result carries a range at the effective
    (all-in) MFU of published runs on the same accelerator generation.
    """
    inputs = merge_inputs(
        GivenShape(params=params, tokens=tokens, gpus=gpus, accelerator=accelerator),
        precision,
        model,
        reported_gpu_hours,
        peak_tflops,
    )
    chip = get_accelerator(inputs.accelerator_id) if inputs.peak_tflops is None else None
    peak = inputs.peak_tflops or Range.point(_chip(chip).peak_tflops(inputs.precision))
    mfu_r = require_fraction(as_range(mfu, field="estimate.mfu"), field="estimate.mfu")
    steps = _input_steps(inputs, chip, peak, mfu_r)
    flops, hours = _compute_steps(inputs, peak, mfu_r)
    effective = effective_mfu_for(chip.generation if chip else None)
    all_in = EffectiveInputs(
        flops=flops.value,
        peak_bf16=inputs.peak_tflops or _bf16(chip),
        active_params=inputs.active_params,
        generation=chip.generation if chip else None,
        num_gpus=inputs.num_gpus,
    )
    calibrated = calibrated_for(all_in)
    # The training-step result comes last: the essay's claims read a worksheet's final step.
    steps += [flops, *effective_steps(all_in, effective), *calibrated_steps(all_in, calibrated)]
    steps += [hours, *_gpu_steps(inputs, hours.value)]
    if batch_tokens is not None:
        batch = "estimate.batch_tokens"
        b = require_positive(as_range(batch_tokens, field=batch), field=batch)
        steps += _batch_steps(inputs, b, peak, mfu_r)
    if price_per_gpu_hour is not None:
        steps += _cost_steps(hours.value, price_per_gpu_hour)
    warnings: tuple[str, ...] = ()
    if inputs.reported is not None:
        reported_steps, warning = _reported_steps(inputs, inputs.reported, flops.value, peak)
        steps += reported_steps
        warnings = (warning,) if warning else ()
    return _result(inputs, steps, effective, calibrated, warnings)


def _chip(chip: Accelerator | None) -> Accelerator:
    assert chip is not None  # set whenever peak_tflops is not
    return chip


def _bf16(chip: Accelerator | None) -> Range:
    return Range.point(_chip(chip).peak_tflops_bf16)


def _result(
    inputs: TrainInputs,
    steps: list[Step],
    effective: EffectiveMfu,
    calibrated: CalibratedMfu,
    warnings: tuple[str, ...],
) -> TrainEstimate:
    results = {step.name: step.value for step in steps}
    return TrainEstimate(
        gpu_hours_calibrated=results["gpu_hours_calibrated"],
        wall_days_calibrated=results.get("wall_days_calibrated"),
        calibrated_mfu=calibrated,
        gpu_hours_range=results["gpu_hours_effective"],
        wall_days_range=results.get("wall_days_effective"),
        effective_mfu=effective.value,
        effective_basis=f"{effective.basis} ({effective.count})",
        implied_step_mfu=results.get("implied_step_mfu"),
        flops=results["flops"],
        gpu_hours=results["gpu_hours"],
        wall_days=results.get("wall_days"),
        seconds_per_batch=results.get("seconds_per_batch"),
        num_batches=results.get("num_batches"),
        cost_usd=results.get("cost_usd"),
        implied_mfu=results.get("implied_mfu"),
        reported_wall_days=results.get("reported_wall_days"),
        worksheet=Worksheet(
            title=_title(inputs), steps=tuple(steps), notes=(*warnings, *_notes(inputs))
        ),
        warnings=warnings,
    )


def _input_steps(
    inputs: TrainInputs, chip: Accelerator | None, peak: Range, mfu: Range
) -> list[Step]:
    model = inputs.model
    if chip is None:
        peak_step = given("peak_tflops", "dense peak (--peak-tflops)", peak, "TFLOP/s", "given")
    else:
        peak_step = given(
            "peak_tflops",
            f"{chip.id} dense {inputs.precision} peak",
            peak,
            "TFLOP/s",
            f"{chip.source} ({chip.status})",
        )
    return [
        given(
            "active_params",
            "active parameters N",
            inputs.active_params,
            source=source_of(model, "active_params"),
        ),
        given("tokens", "training tokens D", inputs.tokens, source=source_of(model, "tokens")),
        peak_step,
        given("mfu", "training-step MFU (the essay's 40%)", mfu, "%"),
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


def _compute_steps(inputs: TrainInputs, peak: Range, mfu: Range) -> tuple[Step, Step]:
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


def _gpu_steps(inputs: TrainInputs, gpu_hours: Range) -> list[Step]:
    g = inputs.num_gpus
    if g is None:
        return []
    return [
        given("num_gpus", "GPUs G", g, source=source_of(inputs.model, "num_gpus")),
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
    field = "estimate.price_per_gpu_hour"
    rate = require_positive(as_range(price, field=field), field=field)
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


def _batch_steps(inputs: TrainInputs, b: Range, peak: Range, mfu: Range) -> list[Step]:
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


def _reported_steps(
    inputs: TrainInputs, reported: Range, flops: Range, peak: Range
) -> tuple[list[Step], str]:
    where = (
        "estimate.reported_gpu_hours"
        if inputs.reported_source == "given"
        else f"the catalog's reported_gpu_hours of {inputs.model.id if inputs.model else 'the model'}"
    )
    implied = implied_mfu_step(reported, flops, peak, where=where)
    step_mfu = step_mfu_step(implied.value)
    steps = [
        given(
            "reported_gpu_hours",
            "reported GPU-hours H_r",
            reported,
            "GPU-h",
            inputs.reported_source,
        ),
        implied,
        step_mfu.step,
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
    return steps, step_mfu.warning


def _title(inputs: TrainInputs) -> str:
    subject = inputs.model.name if inputs.model else "training run"
    return f"Training estimate: {subject} on {inputs.accelerator_id} ({inputs.precision})"


def _notes(inputs: TrainInputs) -> tuple[str, ...]:
    notes = [
        "6 * N * D ignores attention FLOPs; it uses active parameters, so MoE models count "
        "only the experts each token visits."
    ]
    notes.append(
        "Two MFUs: the training-step MFU (--mfu, the essay's 40%) is what a step achieves while "
        "the job runs; the effective, all-in MFU of published runs also pays for restarts, "
        "evaluation, stragglers and idle inside the run, and sets the GPU-hours range."
    )
    if inputs.reported is not None:
        notes.append(
            "Reported hours include annealing, long-context stages and restarts, so the "
            "implied MFU sits below the per-step MFU a paper reports."
        )
    if inputs.reported_dropped:
        notes.append(inputs.reported_dropped)
    if inputs.model is not None and inputs.model.notes:
        notes.append(inputs.model.notes)
    return tuple(notes)
