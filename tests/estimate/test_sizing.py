"""Model size from decode speed (an upper bound on active parameters) and from a budget."""

from __future__ import annotations

import pytest

from gpuyield.errors import FieldError, InputError
from gpuyield.estimate import params_from_budget, params_from_speed


def test_grok_bound_on_a_dgx_h100() -> None:
    bound = params_from_speed(
        tokens_per_s=68, accelerator="h100-sxm", num_chips=8, bytes_per_param=1
    )
    assert bound.max_active_params.central == pytest.approx(8 * 3.35e12 / 68)
    assert "active" in bound.to_dict()["bounds"]
    assert any("ACTIVE" in note for note in bound.worksheet.notes)


def test_efficiency_range_gives_a_range() -> None:
    bound = params_from_speed(
        tokens_per_s="68",
        accelerator="h100-sxm",
        num_chips="8",
        bytes_per_param="1",
        efficiency="0.5:1.0",
    )
    assert bound.max_active_params.low == pytest.approx(0.5 * 8 * 3.35e12 / 68)
    assert bound.max_active_params.high == pytest.approx(8 * 3.35e12 / 68)
    assert isinstance(bound.to_dict()["max_active_params"], dict)


def test_faster_decoding_lowers_the_bound() -> None:
    bound = params_from_speed(tokens_per_s="20:40", bandwidth_tbps=25, bytes_per_param=2)
    assert bound.max_active_params.low == pytest.approx(25e12 / 40 / 2)
    assert bound.max_active_params.high == pytest.approx(25e12 / 20 / 2)


def test_kv_cache_reads_come_out_of_the_budget() -> None:
    bound = params_from_speed(
        tokens_per_s=27,
        bandwidth_tbps=25,
        bytes_per_param=1,
        context_tokens="8k",
        kv_bytes_per_token=160_000,
    )
    assert bound.max_active_params.central == pytest.approx(25e12 / 27 - 8000 * 160_000)


def test_kv_cache_larger_than_budget_is_an_error() -> None:
    with pytest.raises(InputError, match="KV cache"):
        params_from_speed(
            tokens_per_s=100, bandwidth_tbps=1, context_tokens="1M", kv_bytes_per_token="1M"
        )


def test_needs_bandwidth() -> None:
    with pytest.raises(FieldError, match=r"^estimate\.accelerator or estimate\.bandwidth_tbps"):
        params_from_speed(tokens_per_s=68)


def test_sonnet_budget() -> None:
    result = params_from_budget(
        dollars="$30M", price_per_gpu_hour="2", tokens="30T", accelerator="h100-sxm", mfu="0.4"
    )
    hours = 30e6 / 2
    assert result.gpu_hours.central == hours
    assert result.active_params.central == pytest.approx(
        hours * 3600 * 989.4e12 * 0.4 / (6 * 30e12)
    )
    fp8 = params_from_budget(
        gpu_hours="15M", tokens="30T", accelerator="h100-sxm", mfu="0.4", precision="fp8"
    )
    assert fp8.active_params.central == pytest.approx(result.active_params.central * 1978.9 / 989.4)


def test_budget_needs_one_way_to_give_hours() -> None:
    with pytest.raises(FieldError, match=r"^estimate\.dollars and estimate\.price_per_gpu_hour"):
        params_from_budget(tokens="30T", accelerator="h100-sxm")
    with pytest.raises(FieldError, match=r"estimate\.dollars were both given"):
        params_from_budget(tokens="30T", accelerator="h100-sxm", dollars="1M", gpu_hours="1M")
