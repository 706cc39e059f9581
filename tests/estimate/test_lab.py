"""Lab scenarios: bundled ones redo the essay's arithmetic; user files work and fail well."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuyield.errors import ParseError, UnknownIdError
from gpuyield.estimate import estimate_lab, list_lab_scenarios

BUNDLED = ("anthropic-2025", "meta-2024", "meta-2025", "openai-2025", "xai-grok3")


def test_bundled_scenarios_are_listed() -> None:
    assert set(BUNDLED) <= set(list_lab_scenarios())


@pytest.mark.parametrize("scenario", BUNDLED)
def test_every_bundled_scenario_runs_and_states_the_essay_yield(scenario: str) -> None:
    result = estimate_lab(scenario)
    assert 0 < result.yield_fraction.low <= result.yield_fraction.high < 1
    assert result.essay_yield is not None
    assert result.worksheet.step("yield").value == result.yield_fraction


def test_anthropic_is_150m_over_2_7b() -> None:
    result = estimate_lab("anthropic-2025")
    assert result.yield_fraction.central == pytest.approx(150e6 / 2.7e9)


def test_openai_is_5_percent_at_the_essay_reading() -> None:
    assert estimate_lab("openai-2025").yield_fraction.central == pytest.approx(0.05)


def test_meta_2024_uses_card_hours_against_the_fleet() -> None:
    released = 7.0e6 + 1.775e6 + 246e3
    fleet = 2 * 24_576 * 182 * 24 + 100_000 * 60 * 24
    result = estimate_lab("meta-2024")
    assert result.released_gpu_hours.central == pytest.approx(released)
    assert result.yield_fraction.central == pytest.approx(released / fleet)


def test_xai_range_follows_fleet_and_model_size() -> None:
    result = estimate_lab("xai-grok3")
    hours_200b = 6 * 200e9 * 40e12 / (989.4e12 * 0.4) / 3600
    assert result.yield_fraction.low == pytest.approx(hours_200b / (200e3 * 180 * 24))
    assert result.yield_fraction.high == pytest.approx(2 * hours_200b / (100e3 * 180 * 24))


def test_meta_2025_gpu_equivalents() -> None:
    result = estimate_lab("meta-2025")
    assert result.released_gpu_equivalents is not None
    assert result.released_gpu_equivalents.high == pytest.approx((5.0e6 + 2.38e6) / (94 * 24))


def test_user_scenario_file(tmp_path: Path) -> None:
    path = tmp_path / "mylab.toml"
    path.write_text(
        'title = "my lab"\nprice_per_gpu_hour = "2"\n'
        '[[fleet]]\nnum_gpus = "1k"\ndays = "30"\n'
        '[[released]]\ngpu_hours = "36k"\n'
        '[[released]]\ndollars = "$72k"\n'
        '[[released]]\nparams = "1B"\ntokens = "1T"\naccelerator = "h100-sxm"\nmfu = "0.4"\n',
        encoding="utf-8",
    )
    result = estimate_lab(path)
    trained = 6 * 1e9 * 1e12 / (989.4e12 * 0.4) / 3600
    assert result.released_gpu_hours.central == pytest.approx(36e3 + 36e3 + trained)
    assert result.yield_fraction.central == pytest.approx((72e3 + trained) / (1000 * 30 * 24))
    assert result.scenario == "mylab"


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ('[[fleet]]\ngpu_hours = "1M"\n', "released"),
        ('[[fleet]]\ngpu_hours = "1M"\n[[released]]\ngpu_hours = "lots"\n', "released[0]"),
        ('[[fleet]]\ngpu_hours = "1M"\n[[released]]\ngpu_hourz = "1"\n', "released[0]"),
        ('[[fleet]]\nnum_gpus = "1k"\n[[released]]\ngpu_hours = "1"\n', "fleet[0]"),
        ('[[fleet]]\ndollars = "1M"\n[[released]]\ngpu_hours = "1"\n', "fleet[0]"),
    ],
)
def test_bad_scenario_names_the_field(tmp_path: Path, body: str, field: str) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(body, encoding="utf-8")
    with pytest.raises(ParseError) as caught:
        estimate_lab(path)
    assert caught.value.field is not None and caught.value.field.startswith(field)
    assert caught.value.path == str(path)


def test_malformed_toml_and_unknown_id(tmp_path: Path) -> None:
    path = tmp_path / "broken.toml"
    path.write_text("[[fleet]\n", encoding="utf-8")
    with pytest.raises(ParseError):
        estimate_lab(path)
    with pytest.raises(UnknownIdError) as caught:
        estimate_lab("meta-2023")
    assert "meta-2024" in caught.value.choices
