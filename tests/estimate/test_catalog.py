"""The catalogs: every number cited, facts.md section 1 and 2 values, lookups by id."""

from __future__ import annotations

import pytest

from gpuyield.errors import InputError, UnknownIdError
from gpuyield.estimate.catalog import (
    SourceStatus,
    get_accelerator,
    get_model,
    list_accelerators,
    list_models,
)

# facts.md section 1, copied by hand: id -> (BF16, FP8, HBM GB, TB/s).
FACTS_ACCELERATORS = {
    "a100-sxm": (312, None, 80, 2.039),
    "h100-sxm": (989.4, 1978.9, 80, 3.35),
    "h200-sxm": (989.4, 1978.9, 141, 4.8),
    # Issue 18: B200 bandwidth is 8 TB/s per NVIDIA (DGX B200: 64 TB/s over 8 GPUs), not 7.7.
    "b200": (2250, 4500, 180, 8),
    "gb200": (2500, 5000, 186, 8),
    "mi300x": (1307.4, 2614.9, 192, 5.3),
    "mi325x": (1307.4, 2614.9, 256, 6.0),
    "tpu-v4": (275, None, 34.36, 1.2),  # 32 GiB
    # Added in issue 18, from the sources each entry cites.
    "a100-40gb": (312, None, 40, 1.555),
    "v100-sxm": (125, None, 32, 0.9),
    "tpu-v3": (123, None, 34.36, 0.9),
    "mi250x": (383, None, 128, 3.2768),
    "tpu-v5e": (197, None, 16, 0.819),
    "tpu-v5p": (459, None, 95, 2.765),
    "tpu-v6e": (918, None, 32, 1.638),
}


@pytest.mark.parametrize(("chip_id", "expected"), sorted(FACTS_ACCELERATORS.items()))
def test_accelerators_match_facts(chip_id: str, expected: tuple) -> None:
    bf16, fp8, hbm_gb, tbps = expected
    chip = get_accelerator(chip_id)
    assert chip.peak_tflops_bf16 == bf16
    assert chip.peak_tflops_fp8 == fp8
    assert chip.hbm_gb == pytest.approx(hbm_gb)
    assert chip.hbm_bandwidth_tbps == tbps


def test_h800_is_marked_unconfirmed() -> None:
    # facts.md: "H800 ... commonly taken to equal H100 SXM compute: unconfirmed".
    assert get_accelerator("h800").status is SourceStatus.UNCONFIRMED


def test_every_catalog_entry_has_a_source_and_status() -> None:
    entries = [*list_accelerators(), *list_models()]
    assert len(entries) >= 12 + 11
    for entry in entries:
        assert entry.source.strip(), entry.id
        assert isinstance(entry.status, SourceStatus), entry.id
    for model in list_models():
        for name, override in model.field_sources.items():
            assert override.source.strip(), f"{model.id}.{name}"


def test_model_figures_match_facts_section_2() -> None:
    hours = {
        m: get_model(m).reported_gpu_hours
        for m in (
            "llama-3.1-8b",
            "llama-3.1-70b",
            "llama-3.1-405b",
            "deepseek-v3",
            "llama-2-70b",
            "bloom-176b",
            "llama-4-scout",
            "llama-4-maverick",
        )
    }
    expected = {
        "llama-3.1-8b": 1.46e6,
        "llama-3.1-70b": 7.0e6,
        "llama-3.1-405b": 30.84e6,
        "deepseek-v3": 2.788e6,
        "llama-2-70b": 1_720_320,
        "bloom-176b": 1_082_990,
        "llama-4-scout": 5.0e6,
        "llama-4-maverick": 2.38e6,
    }
    for model_id, value in expected.items():
        found = hours[model_id]
        assert found is not None and found.central == pytest.approx(value), model_id
    deepseek = get_model("deepseek-v3")
    assert (deepseek.active_params.central, deepseek.total_params.central) == (37e9, 671e9)
    assert get_model("llama-4-behemoth").released is False


def test_models_name_known_accelerators() -> None:
    for model in list_models():
        assert get_accelerator(model.accelerator).id == model.accelerator


def test_lookup_by_alias_and_case() -> None:
    assert get_accelerator("H100").id == "h100-sxm"
    assert get_accelerator("trillium").id == "tpu-v6e"


def test_unknown_id_lists_closest() -> None:
    with pytest.raises(UnknownIdError) as caught:
        get_accelerator("h10-sxm")
    assert "h100-sxm" in caught.value.choices
    with pytest.raises(UnknownIdError) as caught_model:
        get_model("llama-3.1-450b")
    assert "llama-3.1-405b" in caught_model.value.choices


def test_fp8_on_a_chip_without_it_is_an_input_error() -> None:
    with pytest.raises(InputError, match="FP8"):
        get_accelerator("a100-sxm").peak_tflops("fp8")
    with pytest.raises(InputError, match="precision"):
        get_accelerator("h100-sxm").peak_tflops("fp4")
