"""`estimate lab` in H100-equivalents and dollars: the essay's units, with the catalog's peaks."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from gpuyield.errors import ParseError
from gpuyield.estimate import estimate_lab

CATALOG = Path(__file__).resolve().parents[2] / "src/gpuyield/data/catalog/accelerators.toml"


def _peak(accelerator: str) -> float:
    table = tomllib.loads(CATALOG.read_text())["accelerator"]
    return float(next(a for a in table if a["id"] == accelerator)["peak_tflops_bf16"])


def test_meta_in_h100_equivalents_and_dollars_at_two_dollars_an_h100_hour() -> None:
    result = estimate_lab("meta-2025-h100e")
    # 350k H100 equivalents for 181 days, the essay's presumption, at $2 per H100-hour.
    fleet = 350_000 * 181 * 24
    released = 5.0e6 + 2.38e6  # the Llama 4 model card: Scout, Maverick (H100-80GB hours)
    assert result.fleet_h100_equiv_hours is not None and result.fleet_dollars is not None
    assert result.fleet_h100_equiv_hours.central == pytest.approx(fleet)
    assert result.fleet_h100_equiv_hours.high == pytest.approx(600_000 * 181 * 24)
    assert result.released_dollars is not None
    assert result.released_dollars.central == pytest.approx(2 * released)
    assert result.wasted_dollars is not None
    assert result.wasted_dollars.central == pytest.approx(2 * (fleet - released))
    assert result.yield_h100_equiv is not None
    assert result.yield_h100_equiv.central == pytest.approx(released / fleet)
    sheet = result.worksheet.to_dict()
    assert any("$2 a H100 hour" in str(step.get("source")) for step in sheet["steps"])


def test_a_mixed_fleet_weighs_its_gpus_by_their_peaks(tmp_path: Path) -> None:
    path = tmp_path / "mixed.toml"
    path.write_text(
        'title = "mixed"\nprice_per_h100_hour = "2"\n'
        '[[fleet]]\nlabel = "H100s"\nnum_gpus = "1000"\ndays = "10"\n'
        '[[fleet]]\nlabel = "A100s"\nnum_gpus = "3000"\ndays = "10"\naccelerator = "a100-sxm"\n'
        '[[released]]\nlabel = "run on A100s"\ngpu_hours = "240000"\naccelerator = "a100-sxm"\n'
    )
    result = estimate_lab(path)
    weight = _peak("a100-sxm") / _peak("h100-sxm")
    fleet_h100 = 1000 * 240 + 3000 * 240 * weight
    assert result.fleet_gpu_hours.central == pytest.approx(4000 * 240)
    assert result.fleet_h100_equiv_hours is not None
    assert result.fleet_h100_equiv_hours.central == pytest.approx(fleet_h100)
    assert result.yield_h100_equiv is not None
    assert result.yield_h100_equiv.central == pytest.approx(240000 * weight / fleet_h100)
    # The released run used the slower GPUs: its share of FLOPs is below its share of GPU-hours.
    assert result.yield_h100_equiv.central < result.yield_fraction.central
    assert result.fleet_dollars is not None
    assert result.fleet_dollars.central == pytest.approx(2 * fleet_h100)
    sheet = result.worksheet.to_dict()
    weights = [s for s in sheet["steps"] if s["name"].endswith(".h100_equiv")]
    assert weights and "A100" in str(weights[0]["source"])


def test_without_a_price_there_are_no_dollars() -> None:
    result = estimate_lab("meta-2025")
    assert result.fleet_dollars is None and result.wasted_dollars is None
    assert result.yield_h100_equiv == result.yield_fraction  # an all-H100 fleet


def test_an_unknown_accelerator_names_the_entry(tmp_path: Path) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(
        '[[fleet]]\nnum_gpus = "10"\ndays = "1"\naccelerator = "h1000"\n'
        '[[released]]\ngpu_hours = "1"\n'
    )
    with pytest.raises(ParseError, match=r"fleet\[0\]"):
        estimate_lab(path)
