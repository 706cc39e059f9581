"""The estimator's formulas on plain numbers (facts.md section 4). Units are in the names.

Each is monotonic in every argument, which is what lets ``worksheet.propagate`` carry ranges
exactly; the direction of each argument is declared where the function is used.
"""

from __future__ import annotations

SECONDS_PER_HOUR = 3600.0
HOURS_PER_DAY = 24.0
TFLOPS = 1e12
TBPS = 1e12
#: Forward plus backward pass: 2 FLOPs per parameter per token forward, 4 backward.
FLOPS_PER_PARAM_TOKEN = 6.0


def training_flops(active_params: float, tokens: float) -> float:
    """C = 6 * N * D: training compute, ignoring attention FLOPs."""
    return FLOPS_PER_PARAM_TOKEN * active_params * tokens


def gpu_hours_for(flops: float, peak_tflops: float, mfu: float) -> float:
    """GPU-hours to do ``flops`` at ``mfu`` of a ``peak_tflops`` chip."""
    return flops / (peak_tflops * TFLOPS * mfu) / SECONDS_PER_HOUR


def wall_days(gpu_hours: float, num_gpus: float) -> float:
    """Days of wall clock when ``num_gpus`` share ``gpu_hours`` evenly."""
    return gpu_hours / num_gpus / HOURS_PER_DAY


def implied_mfu(flops: float, gpu_hours: float, peak_tflops: float) -> float:
    """The MFU at which ``gpu_hours`` on a ``peak_tflops`` chip deliver ``flops``."""
    return flops / (gpu_hours * SECONDS_PER_HOUR * peak_tflops * TFLOPS)


def seconds_per_batch(
    active_params: float, batch_tokens: float, num_gpus: float, peak_tflops: float, mfu: float
) -> float:
    """Wall seconds per optimizer step: 6 * N * B FLOPs over the whole cluster's achieved rate."""
    return training_flops(active_params, batch_tokens) / (num_gpus * peak_tflops * TFLOPS * mfu)


def max_active_params(
    tokens_per_s: float,
    efficiency: float,
    num_chips: float,
    bandwidth_tbps: float,
    bytes_per_param: float,
    kv_bytes: float,
) -> float:
    """Decode-speed bound: N_active <= (eta * T * B_chip / tokens_per_s - kv_bytes) / b_w.

    Every generated token (batch 1, no speculation) reads each active weight once plus the KV cache
    (``kv_bytes`` = context tokens * KV bytes per token), from HBM at ``efficiency`` of peak.
    """
    bytes_per_token = bytes_read_per_token(tokens_per_s, efficiency, num_chips, bandwidth_tbps)
    return (bytes_per_token - kv_bytes) / bytes_per_param


def bytes_read_per_token(
    tokens_per_s: float, efficiency: float, num_chips: float, bandwidth_tbps: float
) -> float:
    """HBM bytes ``num_chips`` chips can read in the time of one generated token."""
    return efficiency * num_chips * bandwidth_tbps * TBPS / tokens_per_s


def params_for_budget(gpu_hours: float, peak_tflops: float, mfu: float, tokens: float) -> float:
    """Active parameters a compute budget trains on ``tokens``: N = hours * peak * MFU / (6 * D)."""
    flops = gpu_hours * SECONDS_PER_HOUR * peak_tflops * TFLOPS * mfu
    return flops / (FLOPS_PER_PARAM_TOKEN * tokens)
