"""Library errors name the library's fields; the CLI says the same thing with the flag the user typed."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpuyield.cli import app
from gpuyield.errors import FieldError, InputError
from gpuyield.simulate.api import run_scenario
from gpuyield.simulate.sweep import base_model, run_sweep


@pytest.mark.parametrize(
    ("call", "field"),
    [
        (lambda tmp: run_scenario("ledger-check", tmp, days=0), "simulate.days"),
        (lambda tmp: run_scenario("ledger-check", tmp, seed=-1), "simulate.seed"),
        (lambda tmp: base_model(days=-1, gpus=8, interval_s=600, write_s=30), "sweep.days"),
    ],
)
def test_library_errors_name_fields(tmp_path: Path, call, field: str) -> None:
    with pytest.raises(FieldError) as caught:
        call(tmp_path)
    assert caught.value.field == field
    assert str(caught.value).startswith(f"{field} must be")
    assert "--" not in str(caught.value) and "--" not in (caught.value.hint or "")
    assert isinstance(caught.value, InputError)


def test_sweep_jobs_is_a_field() -> None:
    from gpuyield.simulate.sweep import SweepParam, SweepSpec

    with pytest.raises(FieldError, match=r"^sweep\.jobs must be >= 1"):
        run_sweep(SweepSpec(param=SweepParam.CLUSTER_GPUS, values=(1024.0,)), jobs=0)


@pytest.mark.parametrize(
    ("args", "message", "hint"),
    [
        (
            ["simulate", "run", "ledger-check", "--duration", "0s"],
            "--duration must be > 0",
            "--duration 7d",
        ),
        (
            ["simulate", "run", "ledger-check", "--days", "0"],
            "--duration must be > 0",
            "--duration 7d",
        ),
        (["simulate", "run", "ledger-check", "--seed", "-1"], "--seed must be >= 0", "--seed 7"),
        (["simulate", "sweep", "--duration", "0s"], "--duration must be > 0", "--duration 30d"),
        (["simulate", "sweep", "--seeds", "0"], "--seeds must be >= 1", "--seeds 3"),
        (["simulate", "sweep", "--jobs", "0"], "--jobs must be >= 1", "--jobs 1"),
    ],
)
def test_the_cli_maps_fields_to_flags(tmp_path: Path, args: list[str], message: str, hint: str):
    result = CliRunner().invoke(app, [*args, "--out", str(tmp_path / "out")])
    assert result.exit_code == 1
    assert f"error: {message}" in result.output
    assert f"hint: pass e.g. {hint}" in result.output
