"""No impossible figure: an implied MFU above 100% is an error or a bounded result with a warning."""

from __future__ import annotations

import dataclasses

import pytest
from typer.testing import CliRunner

from gpuyield.cli import app
from gpuyield.errors import InputError
from gpuyield.estimate import catalog, train_inputs
from gpuyield.estimate.catalog import list_models
from gpuyield.estimate.effective import step_to_effective_ratio
from gpuyield.estimate.numbers import Range
from gpuyield.estimate.train import estimate_train

WITH_HOURS = [m.id for m in list_models() if m.reported_hours() is not None and m.tokens]


@pytest.mark.parametrize("model_id", WITH_HOURS)
def test_no_catalog_run_implies_more_than_the_peak(model_id: str) -> None:
    result = estimate_train(model=model_id)
    assert result.implied_mfu is not None and result.implied_step_mfu is not None
    assert result.implied_mfu.high <= 1.0
    assert result.implied_step_mfu.high <= 1.0
    # A bounded range always says so, with the figure it would have been.
    bounded = result.implied_step_mfu.high == 1.0
    assert bool(result.warnings) == bounded
    assert all(w in result.worksheet.notes for w in result.warnings)


def test_a_step_mfu_past_the_peak_ends_at_100_percent_and_says_why() -> None:
    # phi-2's card hours imply an effective MFU that the lowest ratio would carry to 140%.
    result = estimate_train(model="phi-2")
    assert result.implied_step_mfu is not None and result.implied_mfu is not None
    ratio = step_to_effective_ratio()
    unbounded = result.implied_mfu.high / ratio.low
    assert unbounded > 1.0
    assert result.implied_step_mfu.high == 1.0
    assert result.implied_step_mfu.low == pytest.approx(result.implied_mfu.low / ratio.high)
    (warning,) = result.warnings
    assert f"{unbounded:.0%}" in warning and f"{ratio.low:.3g}" in warning
    assert result.to_dict()["warnings"] == [warning]
    step = result.worksheet.step("implied_step_mfu")
    assert "min(" in step.formula and step.shown.endswith("100%")


def test_a_run_within_the_peak_has_no_warning_and_no_key() -> None:
    result = estimate_train(model="deepseek-v3")
    assert result.implied_step_mfu is not None and result.implied_step_mfu.high < 1.0
    assert result.warnings == () and "warnings" not in result.to_dict()
    assert "min(" not in result.worksheet.step("implied_step_mfu").formula


def test_the_cli_prints_the_bound_as_a_warning_not_as_a_result() -> None:
    out = CliRunner().invoke(app, ["estimate", "train", "--model", "phi-2"]).output
    assert "140%" not in out.split("warning:")[0]  # not as a result in the table
    assert any(
        line.startswith("warning: the implied training-step MFU") for line in out.splitlines()
    )


def test_reported_hours_too_few_for_the_peak_are_refused() -> None:
    with pytest.raises(InputError, match=r"^estimate\.reported_gpu_hours .* MFU of up to 1023%"):
        estimate_train(params="405B", tokens="15T", accelerator="h100-sxm", reported_gpu_hours="1M")
    result = CliRunner().invoke(
        app,
        ["estimate", "train", "--params", "405B", "--tokens", "15T", "--accelerator", "h100-sxm",
         "--reported-gpu-hours", "1M"],
    )  # fmt: skip
    assert result.exit_code == 1 and "more than the chips' peak" in result.output


def test_a_catalog_entry_that_implies_more_than_the_peak_is_an_error_naming_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    real = catalog.get_model("llama-3.1-405b")
    broken = dataclasses.replace(real, reported_gpu_hours=Range.point(3e6))
    monkeypatch.setattr(train_inputs, "get_model", lambda _id: broken)
    with pytest.raises(InputError, match=r"catalog's reported_gpu_hours of llama-3\.1-405b"):
        estimate_train(model="llama-3.1-405b")
