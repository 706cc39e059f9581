"""How large is a model? From its decode speed, or from its training budget."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gpuyield.errors import FieldError, InputError
from gpuyield.estimate import formulas as f
from gpuyield.estimate.catalog import get_accelerator, parse_precision
from gpuyield.estimate.numbers import (
    NumberLike,
    Range,
    as_range,
    format_range,
    require_fraction,
    require_positive,
)
from gpuyield.estimate.train import DEFAULT_MFU
from gpuyield.estimate.worksheet import DOWN, UP, Step, Worksheet, compute, given

SPEED_NOTES = (
    "This bounds ACTIVE parameters only: a mixture-of-experts model reads only the experts each "
    "token visits, so its total parameter count can be far larger.",
    "It assumes batch-1 decoding without speculative decoding, which can break the bound.",
)

BUDGET_NOTE = (
    "The budget is assumed to be spent on the final run alone at the given MFU; "
    "6 * N * D ignores attention FLOPs."
)


@dataclass(frozen=True, kw_only=True, slots=True)
class SpeedBound:
    """Result of ``params_from_speed``."""

    #: Upper bound on active parameters.
    max_active_params: Range
    #: HBM bytes a chip group can read per generated token.
    bytes_per_token: Range
    #: The shown work.
    worksheet: Worksheet

    def to_dict(self) -> dict[str, Any]:
        """The documented ``--json`` keys plus the worksheet."""
        return {
            "max_active_params": self.max_active_params.to_dict(),
            "bounds": "active parameters, not total",
            "bytes_per_token": self.bytes_per_token.to_dict(),
            "worksheet": self.worksheet.to_dict(),
        }


@dataclass(frozen=True, kw_only=True, slots=True)
class BudgetParams:
    """Result of ``params_from_budget``."""

    #: GPU-hours the budget buys.
    gpu_hours: Range
    #: FLOPs those hours deliver at the given MFU.
    flops: Range
    #: Active parameters trainable on the given tokens (6 * N * D = FLOPs).
    active_params: Range
    #: The shown work.
    worksheet: Worksheet

    def to_dict(self) -> dict[str, Any]:
        """The documented ``--json`` keys plus the worksheet."""
        return {
            "gpu_hours": self.gpu_hours.to_dict(),
            "flops": self.flops.to_dict(),
            "active_params": self.active_params.to_dict(),
            "worksheet": self.worksheet.to_dict(),
        }


def params_from_speed(
    *,
    tokens_per_s: NumberLike,
    accelerator: str | None = None,
    num_chips: NumberLike = 1,
    bytes_per_param: NumberLike = 2,
    efficiency: NumberLike = 1.0,
    context_tokens: NumberLike = 0,
    kv_bytes_per_token: NumberLike = 0,
    bandwidth_tbps: NumberLike | None = None,
) -> SpeedBound:
    """Upper bound on active parameters from single-stream decode speed.

    Bandwidth is the accelerator's HBM bandwidth per chip, or ``bandwidth_tbps`` per chip (with
    ``num_chips=1`` that is a whole box, like the essay's "DGX box ... 25T/s").
    """
    tps = _positive(tokens_per_s, "estimate.tokens_per_s")
    chips = _positive(num_chips, "estimate.num_chips")
    b_w = _positive(bytes_per_param, "estimate.bytes_per_param")
    eta = require_fraction(
        as_range(efficiency, field="estimate.efficiency"), field="estimate.efficiency"
    )
    bandwidth, bandwidth_source = _bandwidth(accelerator, bandwidth_tbps)
    inputs = [
        given("tokens_per_s", "decode speed", tps, "tokens/s"),
        given("num_chips", "chips serving one copy T", chips),
        given("bandwidth_tbps", "HBM bandwidth per chip B", bandwidth, "TB/s", bandwidth_source),
        given("efficiency", "achieved bandwidth fraction eta", eta, "%"),
        given("bytes_per_param", "bytes per weight b_w", b_w, "bytes"),
    ]
    budget = _read_budget_step(eta, chips, bandwidth, tps)
    kv_steps, kv = _kv_steps(context_tokens, kv_bytes_per_token)
    weights = _weight_bytes(budget.value, kv)
    bound = compute(
        "max_active_params",
        "max active parameters",
        "N_active <= W / b_w",
        "{w} / {b_w}",
        lambda w, b_w: w / b_w,
        {"w": UP, "b_w": DOWN},
        w=weights.value,
        b_w=b_w,
    )
    sheet = Worksheet(
        title="Upper bound on active parameters from decode speed",
        steps=(*inputs, budget, *kv_steps, weights, bound),
        notes=SPEED_NOTES,
    )
    return SpeedBound(max_active_params=bound.value, bytes_per_token=budget.value, worksheet=sheet)


def _weight_bytes(budget: Range, kv: Range) -> Step:
    """Bytes per token left for weights; an error, not a negative size, if the KV cache eats all."""
    weights = compute(
        "weight_bytes_per_token",
        "bytes left for weights",
        "W = R - L_ctx * k_kv",
        "{budget} - {kv}",
        lambda budget, kv: budget - kv,
        {"budget": UP, "kv": DOWN},
        "bytes",
        budget=budget,
        kv=kv,
    )
    if weights.value.low <= 0:
        raise InputError(
            f"the KV cache alone ({format_range(kv, 'bytes')} per token) needs at least the whole "
            f"read budget ({format_range(budget, 'bytes')} per token)",
            hint="check estimate.context_tokens and estimate.kv_bytes_per_token, "
            "or raise estimate.efficiency",
        )
    return weights


def _read_budget_step(eta: Range, chips: Range, bandwidth: Range, tps: Range) -> Step:
    return compute(
        "bytes_per_token",
        "bytes readable per token",
        "R = eta * T * B / tokens_per_s",
        "{eta} * {chips} * {bandwidth}e12 / {tps}",
        _read_budget,
        {"eta": UP, "chips": UP, "bandwidth": UP, "tps": DOWN},
        "bytes",
        eta=eta,
        chips=chips,
        bandwidth=bandwidth,
        tps=tps,
    )


def _read_budget(eta: float, chips: float, bandwidth: float, tps: float) -> float:
    return f.bytes_read_per_token(tps, eta, chips, bandwidth)


def _kv_steps(
    context_tokens: NumberLike, kv_bytes_per_token: NumberLike
) -> tuple[list[Step], Range]:
    fields = ("estimate.context_tokens", "estimate.kv_bytes_per_token")
    ctx = as_range(context_tokens, field=fields[0])
    k_kv = as_range(kv_bytes_per_token, field=fields[1])
    for value, field in zip((ctx, k_kv), fields, strict=True):
        if value.low < 0:
            raise FieldError(field, f"must be >= 0, got {format_range(value)}")
    if ctx.high == 0 or k_kv.high == 0:
        return [], Range.point(0.0)
    kv = compute(
        "kv_bytes",
        "KV cache read per token",
        "L_ctx * k_kv",
        "{ctx} * {k_kv}",
        lambda ctx, k_kv: ctx * k_kv,
        {"ctx": UP, "k_kv": UP},
        "bytes",
        ctx=ctx,
        k_kv=k_kv,
    )
    inputs = [
        given("context_tokens", "context tokens L_ctx", ctx),
        given("kv_bytes_per_token", "KV bytes per context token k_kv", k_kv, "bytes"),
    ]
    return [*inputs, kv], kv.value


def _bandwidth(accelerator: str | None, bandwidth_tbps: NumberLike | None) -> tuple[Range, str]:
    if bandwidth_tbps is not None:
        return _positive(bandwidth_tbps, "estimate.bandwidth_tbps"), "given"
    if accelerator is None:
        raise FieldError(
            "estimate.accelerator",
            "or estimate.bandwidth_tbps is needed to bound parameters from decode speed",
            hint="e.g. estimate.accelerator=h100-sxm with estimate.num_chips=8 "
            "(see gpuyield estimate accelerators)",
        )
    chip = get_accelerator(accelerator)
    return Range.point(chip.hbm_bandwidth_tbps), f"{chip.id}: {chip.source} ({chip.status})"


def params_from_budget(
    *,
    tokens: NumberLike,
    accelerator: str,
    dollars: NumberLike | None = None,
    price_per_gpu_hour: NumberLike | None = None,
    gpu_hours: NumberLike | None = None,
    mfu: NumberLike = DEFAULT_MFU,
    precision: str = "bf16",
) -> BudgetParams:
    """Active parameters that a budget (dollars at a price per GPU-hour, or GPU-hours) can train
    on ``tokens`` tokens."""
    chip = get_accelerator(accelerator)
    prec = parse_precision(precision)
    peak = Range.point(chip.peak_tflops(prec))
    d = _positive(tokens, "estimate.tokens")
    m = require_fraction(as_range(mfu, field="estimate.mfu"), field="estimate.mfu")
    steps, hours = _budget_hours(dollars, price_per_gpu_hour, gpu_hours)
    steps += [
        given("tokens", "training tokens D", d),
        given(
            "peak_tflops",
            f"{chip.id} dense {prec} peak",
            peak,
            "TFLOP/s",
            f"{chip.source} ({chip.status})",
        ),
        given("mfu", "model FLOPs utilization", m, "%"),
    ]
    flops = _delivered_flops(hours, peak, m)
    params = compute(
        "active_params",
        "active parameters",
        "N = C / (6 * D)",
        "{c} / (6 * {d})",
        lambda c, d: c / (f.FLOPS_PER_PARAM_TOKEN * d),
        {"c": UP, "d": DOWN},
        c=flops.value,
        d=d,
    )
    sheet = Worksheet(
        title=f"Model size from a training budget on {chip.id} ({prec})",
        steps=(*steps, flops, params),
        notes=(BUDGET_NOTE,),
    )
    return BudgetParams(
        gpu_hours=hours, flops=flops.value, active_params=params.value, worksheet=sheet
    )


def _delivered_flops(hours: Range, peak: Range, mfu: Range) -> Step:
    return compute(
        "flops",
        "compute delivered",
        "C = H * 3600 * peak * MFU",
        "{h} * 3600 * {p}e12 * {m}",
        lambda h, p, m: h * f.SECONDS_PER_HOUR * p * f.TFLOPS * m,
        {"h": UP, "p": UP, "m": UP},
        "FLOP",
        h=hours,
        p=peak,
        m=mfu,
    )


def _budget_hours(
    dollars: NumberLike | None, price: NumberLike | None, gpu_hours: NumberLike | None
) -> tuple[list[Step], Range]:
    if gpu_hours is not None:
        if dollars is not None:
            raise FieldError(
                "estimate.gpu_hours", "and estimate.dollars were both given: give one of them"
            )
        given_hours = _positive(gpu_hours, "estimate.gpu_hours")
        return [given("gpu_hours", "GPU-hours H", given_hours, "GPU-h")], given_hours
    if dollars is None or price is None:
        raise FieldError(
            "estimate.dollars",
            "and estimate.price_per_gpu_hour, or estimate.gpu_hours, are needed for a budget",
            hint="e.g. estimate.dollars=30M at estimate.price_per_gpu_hour=2",
        )
    usd = _positive(dollars, "estimate.dollars")
    rate = _positive(price, "estimate.price_per_gpu_hour")
    hours = compute(
        "gpu_hours",
        "GPU-hours bought",
        "H = $ / price",
        "{usd} / {rate}",
        lambda usd, rate: usd / rate,
        {"usd": UP, "rate": DOWN},
        "GPU-h",
        usd=usd,
        rate=rate,
    )
    return [
        given("dollars", "budget", usd, "USD"),
        given("price_per_gpu_hour", "price per GPU-hour", rate, "USD"),
        hours,
    ], hours.value


def _positive(value: NumberLike, field: str) -> Range:
    return require_positive(as_range(value, field=field), field=field)
