"""`estimate_train`: hand-derived numbers and the published cases of issue 3."""

from __future__ import annotations

import pytest

from gpuyield.errors import FieldError, UnknownIdError
from gpuyield.estimate import estimate_train

H100_BF16 = 989.4e12  # FLOP/s, facts.md section 1
H100_FP8 = 1978.9e12
A100_BF16 = 312e12


def test_llama3_405b_by_hand() -> None:
    result = estimate_train(
        params="405B",
        tokens="15T",
        gpus=16384,
        accelerator="h100-sxm",
        mfu="40%",
        batch_tokens="16M",
        price_per_gpu_hour="$2",
    )
    flops = 6 * 405e9 * 15e12
    seconds = flops / (H100_BF16 * 0.4)
    assert result.flops.central == pytest.approx(flops)
    assert result.gpu_hours.central == pytest.approx(seconds / 3600)
    assert result.wall_days is not None
    assert result.wall_days.central == pytest.approx(seconds / 16384 / 86400)
    assert result.num_batches is not None and result.num_batches.central == 937_500
    assert result.seconds_per_batch is not None
    assert result.seconds_per_batch.central == pytest.approx(
        6 * 405e9 * 16e6 / (16384 * H100_BF16 * 0.4)
    )
    assert result.cost_usd is not None and result.cost_usd.central == pytest.approx(
        2 * seconds / 3600
    )
    assert result.implied_mfu is None  # no catalog model, no reported hours


def test_json_has_documented_keys() -> None:
    data = estimate_train(params="405B", tokens="15T", gpus="16k", accelerator="h100-sxm").to_dict()
    for key in ("flops", "gpu_hours", "wall_days", "seconds_per_batch", "num_batches", "cost_usd"):
        assert key in data
    assert data["seconds_per_batch"] is None  # no --batch-tokens


def test_llama31_405b_card_implies_33_to_35_percent() -> None:
    result = estimate_train(model="llama-3.1-405b")
    assert result.implied_mfu is not None
    # 6 x 405e9 x (15 to 15.6)e12 / (30.84e6 h x 3600 x 989.4e12)
    assert result.implied_mfu.low == pytest.approx(6 * 405e9 * 15e12 / (30.84e6 * 3600 * H100_BF16))
    assert 0.33 <= result.implied_mfu.low <= result.implied_mfu.high <= 0.35


def test_deepseek_v3_implies_about_17_percent_of_fp8_peak() -> None:
    result = estimate_train(model="deepseek-v3")
    assert result.implied_mfu is not None
    expected = 6 * 37e9 * 14.8e12 / (2.788e6 * 3600 * H100_FP8)
    assert result.implied_mfu.central == pytest.approx(expected)
    assert 0.16 <= result.implied_mfu.central <= 0.18


def test_llama2_70b_implies_about_43_percent_of_a100_bf16() -> None:
    result = estimate_train(model="llama-2-70b")
    assert result.implied_mfu is not None
    assert result.implied_mfu.central == pytest.approx(
        6 * 70e9 * 2e12 / (1_720_320 * 3600 * A100_BF16)
    )
    assert round(result.implied_mfu.central, 2) == 0.43


def test_bloom_reported_hours_are_about_118_days_on_384_gpus() -> None:
    result = estimate_train(model="bloom-176b")
    assert result.reported_wall_days is not None
    assert result.reported_wall_days.central == pytest.approx(1_082_990 / 384 / 24)
    assert round(result.reported_wall_days.central) == 118


def test_ranges_go_the_right_way() -> None:
    result = estimate_train(
        params="405B", tokens="10T:20T", gpus=16384, accelerator="h100", mfu="0.3:0.5"
    )
    # Fewest hours: fewest tokens at the highest MFU; most hours: the opposite.
    assert result.gpu_hours.low == pytest.approx(6 * 405e9 * 10e12 / (H100_BF16 * 0.5) / 3600)
    assert result.gpu_hours.high == pytest.approx(6 * 405e9 * 20e12 / (H100_BF16 * 0.3) / 3600)


def test_fp8_halves_the_hours() -> None:
    bf16 = estimate_train(params="17B", tokens="40T", accelerator="h100-sxm")
    fp8 = estimate_train(params="17B", tokens="40T", accelerator="h100-sxm", precision="fp8")
    assert fp8.gpu_hours.central == pytest.approx(bf16.gpu_hours.central * H100_BF16 / H100_FP8)


def test_explicit_arguments_override_the_catalog() -> None:
    result = estimate_train(model="llama-3.1-405b", tokens="15T", gpus=8192)
    assert result.flops.is_point and result.flops.central == pytest.approx(6 * 405e9 * 15e12)
    assert result.worksheet.step("num_gpus").value.central == 8192


def test_missing_inputs_are_named() -> None:
    with pytest.raises(FieldError, match=r"^estimate\.tokens is missing$"):
        estimate_train(params="405B", accelerator="h100-sxm")
    with pytest.raises(
        FieldError, match=r"^estimate\.params is missing, and so is estimate\.tokens"
    ):
        estimate_train(accelerator="h100-sxm")


def test_bad_mfu_and_unknown_model() -> None:
    with pytest.raises(FieldError, match=r"^estimate\.mfu must be a fraction"):
        estimate_train(params="405B", tokens="15T", accelerator="h100-sxm", mfu="40")
    with pytest.raises(UnknownIdError):
        estimate_train(model="llama-5")
    with pytest.raises(FieldError, match=r"^estimate\.gpus must be > 0"):
        estimate_train(params="405B", tokens="15T", accelerator="h100-sxm", gpus=0)


def test_llama1_65b_card_hours_agree_with_its_stated_throughput() -> None:
    # The paper: ~380 tokens/s/GPU on 2,048 A100 and ~21 days for 1.4T tokens. Both follow from
    # its Table 15 hours independently of the code: 6 * 65.2e9 * 380 / 312e12 = 47.6% MFU.
    result = estimate_train(model="llama-1-65b")
    assert result.implied_mfu is not None and result.reported_wall_days is not None
    assert result.implied_mfu.central == pytest.approx(6 * 65.2e9 * 380 / A100_BF16, rel=0.01)
    assert round(result.reported_wall_days.central) == 21
