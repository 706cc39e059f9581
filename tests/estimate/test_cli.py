"""`gpuyield estimate ...` end to end through Typer: JSON keys, Markdown, errors, help, docs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpuyield.cli import app
from gpuyield.cli import estimate as estimate_cli

DOCS = Path(__file__).resolve().parents[2] / "docs" / "estimate.md"
runner = CliRunner()


def run(*args: str) -> tuple[int, str]:
    result = runner.invoke(app, ["estimate", *args])
    return result.exit_code, result.output


def test_train_json_keys_and_implied_mfu() -> None:
    code, out = run(
        "train",
        "--model",
        "llama-3.1-405b",
        "--batch-tokens",
        "16M",
        "--price-per-gpu-hour",
        "2",
        "--json",
    )
    assert code == 0, out
    data = json.loads(out)
    for key in (
        "flops",
        "gpu_hours",
        "wall_days",
        "seconds_per_batch",
        "num_batches",
        "cost_usd",
        "implied_mfu",
    ):
        assert data[key] is not None, key
    assert 0.33 <= data["implied_mfu"]["low"] <= data["implied_mfu"]["high"] <= 0.35


def test_train_table_shows_formula_and_numbers(monkeypatch: pytest.MonkeyPatch) -> None:
    # A wide console, so that no cell wraps across lines (``_width``, not the property: undoing a
    # patch of the property leaves the width fixed for later tests; see tests/hostile/conftest.py).
    monkeypatch.setattr(estimate_cli.console, "_width", 250)
    code, out = run(
        "train",
        "--params",
        "405B",
        "--tokens",
        "15T",
        "--gpus",
        "16384",
        "--accelerator",
        "h100-sxm",
        "--mfu",
        "0.4",
    )
    assert code == 0, out
    assert "6 * N * D" in out and "6 * 405B * 15T" in out
    assert "65.06 days" in out


def test_params_from_speed_range_json() -> None:
    code, out = run(
        "params-from-speed",
        "--tokens-per-s",
        "68",
        "--accelerator",
        "h100-sxm",
        "--num-chips",
        "8",
        "--bytes-per-param",
        "1",
        "--efficiency",
        "0.5:1.0",
        "--json",
    )
    assert code == 0, out
    bound = json.loads(out)["max_active_params"]
    assert bound["high"] == pytest.approx(8 * 3.35e12 / 68)
    assert bound["low"] == pytest.approx(bound["high"] / 2)


def test_params_from_speed_says_active_not_total() -> None:
    code, out = run("params-from-speed", "--tokens-per-s", "68", "--bandwidth-tbps", "25")
    assert code == 0, out
    assert "ACTIVE" in out


def test_params_from_budget_markdown() -> None:
    code, out = run(
        "params-from-budget",
        "--dollars",
        "$30M",
        "--price-per-gpu-hour",
        "2",
        "--tokens",
        "30T",
        "--accelerator",
        "h100-sxm",
        "--mfu",
        "0.4",
        "--markdown",
    )
    assert code == 0, out
    assert out.startswith("### ")
    assert "| active parameters | N = C / (6 \\* D) |" in out


def test_lab_json() -> None:
    code, out = run("lab", "anthropic-2025", "--json")
    assert code == 0, out
    assert json.loads(out)["yield"] == pytest.approx(150 / 2700)


def test_essay_check_json_shape() -> None:
    code, out = run("essay-check", "--json")
    assert code == 0, out
    claims = json.loads(out)
    assert isinstance(claims, list) and len(claims) > 20
    for claim in claims:
        assert {"claim", "recomputed", "verdict"} <= set(claim)
        assert claim["verdict"] in {"holds", "off", "not_reproducible", "sourced"}


def test_bad_number_is_a_clean_error_naming_the_option() -> None:
    code, out = run("train", "--params", "4O5B", "--tokens", "15T", "--accelerator", "h100-sxm")
    assert code == 1
    assert "--params" in out and "Traceback" not in out


def test_unknown_accelerator_suggests_close_ids() -> None:
    code, out = run("train", "--params", "405B", "--tokens", "15T", "--accelerator", "h10-sxm")
    assert code == 1
    assert "h100-sxm" in out


def test_catalog_listings() -> None:
    code, out = run("accelerators", "--json")
    assert code == 0 and any(c["id"] == "tpu-v6e" for c in json.loads(out))
    code, out = run("models", "--json")
    assert code == 0 and any(m["id"] == "deepseek-v3" for m in json.loads(out))
    code, out = run("labs")
    assert code == 0 and "meta-2025" in out


def test_every_command_and_option_has_help() -> None:
    import typer.main

    group = typer.main.get_command(estimate_cli.app)
    for name, command in group.commands.items():  # type: ignore[attr-defined]
        assert command.help, name
        for param in command.params:
            assert getattr(param, "help", None), f"{name} {param.name}"


def test_every_command_is_documented() -> None:
    import typer.main

    text = DOCS.read_text(encoding="utf-8")
    group = typer.main.get_command(estimate_cli.app)
    for name in group.commands:  # type: ignore[attr-defined]
        assert f"gpuyield estimate {name}" in text, name


def test_docs_scenario_table_matches_the_code() -> None:
    from gpuyield.estimate import estimate_lab, list_lab_scenarios
    from gpuyield.estimate.numbers import format_percent

    text = DOCS.read_text(encoding="utf-8")
    for scenario in list_lab_scenarios():
        result = estimate_lab(scenario)
        assert result.essay_yield is not None
        row = (
            f"| {scenario} | {format_percent(result.yield_fraction)} | "
            f"{format_percent(result.essay_yield)} |"
        )
        assert row in text, row
