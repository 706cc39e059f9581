"""Issue 18: the run catalog, effective MFU, `estimate validate` and the train range output."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from gpuyield.cli import app
from gpuyield.estimate import estimate_train, get_model
from gpuyield.estimate.effective import effective_mfu_for, effective_runs
from gpuyield.estimate.validate import validate_catalog, validation_markdown

H100_BF16 = 989.4e12
A100_BF16 = 312e12


def test_catalog_has_at_least_30_cited_runs() -> None:
    runs = effective_runs()
    assert len(runs) >= 30
    for run in runs:
        assert run.model.url.startswith("https://"), run.model.id
        assert run.model.states.strip(), run.model.id
        assert run.model.year is not None, run.model.id
    generations = {run.generation for run in runs}
    assert {"ampere", "hopper", "tpu"} <= generations
    assert any(run.model.is_moe for run in runs)


def test_effective_mfu_is_6nd_over_reported_hours_and_bf16_peak() -> None:
    by_id = {run.model.id: run for run in effective_runs()}
    llama = by_id["llama-2-70b"]
    assert llama.effective_mfu == pytest.approx(6 * 70e9 * 2e12 / (1_720_320 * 3600 * A100_BF16))
    # GPUs x days stands in for hours: phi-3-mini, 512 H100 for 7 days.
    phi = by_id["phi-3-mini"]
    assert phi.reported_gpu_hours == 512 * 7 * 24
    # FP8 runs are on the BF16 scale too (DeepSeek-V3: 33%, not the 17% of its FP8 peak).
    assert by_id["deepseek-v3"].effective_mfu == pytest.approx(
        6 * 37e9 * 14.8e12 / (2.788e6 * 3600 * H100_BF16)
    )


def test_duplicate_run_is_left_out() -> None:
    ids = {run.model.id for run in effective_runs()}
    assert "llama-3.1-70b" in ids and "llama-3.3-70b" not in ids


def test_validate_puts_at_least_85_percent_in_range_leave_one_out() -> None:
    report = validate_catalog()
    assert report.share_in_range >= 0.85
    assert report.share_in_range == sum(r.in_range for r in report.rows) / len(report.rows)
    for row in report.rows:
        inside = row.mfu_range.low <= row.effective_mfu <= row.mfu_range.high
        assert inside == row.in_range, row.id
    # Leave-one-out: the highest effective MFU of a generation is never inside its own range.
    top = max(report.rows, key=lambda r: r.effective_mfu)
    assert not top.in_range and top.mfu_range.high < top.effective_mfu


def test_validate_json_and_markdown() -> None:
    data = validate_catalog().to_dict()
    assert set(data) == {"runs", "share_in_range", "interval", "interval_by_group"}
    assert {"id", "reported_gpu_hours", "predicted_gpu_hours", "ratio", "in_range"} <= set(
        data["runs"][0]
    )
    table = validation_markdown(validate_catalog())
    assert "| llama-3.1-405b |" in table and "in range (" in table


def test_train_reports_effective_range_next_to_training_step() -> None:
    result = estimate_train(params="405B", tokens="15.6T", gpus=16384, accelerator="h100")
    hopper = effective_mfu_for("hopper")
    assert hopper.basis == "hopper runs"
    flops = 6 * 405e9 * 15.6e12
    assert result.gpu_hours_range.low == pytest.approx(
        flops / (H100_BF16 * hopper.value.high) / 3600
    )
    assert result.gpu_hours_range.high == pytest.approx(
        flops / (H100_BF16 * hopper.value.low) / 3600
    )
    # Llama 3.1 405B's reported 30.84M hours sit inside the effective range, not at 40% MFU.
    assert result.gpu_hours_range.low <= 30.84e6 <= result.gpu_hours_range.high
    assert result.gpu_hours.central < 30.84e6
    data = result.to_dict()
    assert data["gpu_hours_range"] == [result.gpu_hours_range.low, result.gpu_hours_range.high]
    assert data["wall_days_range"] is not None and len(data["wall_days_range"]) == 2
    assert "effective" in data["mfu_used"]["gpu_hours_range"]


def test_model_override_never_reuses_catalog_hours() -> None:
    result = estimate_train(model="bloom-176b", accelerator="h100")
    assert result.implied_mfu is None
    assert any("not used" in note for note in result.worksheet.notes)
    for changed in ({"params": "100B"}, {"tokens": "1T"}):
        assert estimate_train(model="llama-2-70b", **changed).implied_mfu is None
    # Unchanged (or the same accelerator by alias) keeps them.
    assert estimate_train(model="bloom-176b", accelerator="a100").implied_mfu is not None


def test_reported_gpu_hours_and_peak_tflops() -> None:
    result = estimate_train(params="70B", tokens="2T", peak_tflops=500, reported_gpu_hours="1M")
    assert result.implied_mfu is not None
    assert result.implied_mfu.central == pytest.approx(6 * 70e9 * 2e12 / (1e6 * 3600 * 500e12))
    assert result.implied_step_mfu is not None
    assert result.implied_step_mfu.low > result.implied_mfu.central  # step MFU sits higher
    assert result.effective_basis.startswith("all runs")  # no generation for custom hardware
    assert result.worksheet.step("peak_tflops").source == "given"


def test_bloom_trained_on_366b_tokens() -> None:
    tokens = get_model("bloom-176b").tokens
    assert tokens is not None and tokens.central == 366e9


def test_cli_validate_and_train_json() -> None:
    runner = CliRunner()
    out = runner.invoke(app, ["estimate", "validate", "--json"])
    assert out.exit_code == 0, out.output
    assert json.loads(out.output)["share_in_range"] >= 0.85
    out = runner.invoke(
        app, ["estimate", "train", "--model", "bloom-176b", "--accelerator", "h100", "--json"]
    )
    assert out.exit_code == 0, out.output
    data = json.loads(out.output)
    assert data["implied_mfu"] is None and len(data["gpu_hours_range"]) == 2
    out = runner.invoke(app, ["estimate", "train", "--params", "7B", "--tokens", "1T"])
    assert out.exit_code == 1 and "--peak-tflops" in out.output
