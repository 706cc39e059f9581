"""Scenario files: bundled ones load, bad ones fail with the dotted field and a hint."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuyield.errors import InputError, ParseError, UnknownIdError
from gpuyield.simulate.scenario import bundled_names, load_scenario, scenario_from_dict

BASE = {"scenario": {"name": "t", "days": 1}, "fleet": {"num_nodes": 4}}


def test_bundled_scenarios_load():
    names = bundled_names()
    assert {"llama3-405b", "cluster-100k-year", "ledger-check"} <= set(names)
    big = load_scenario("cluster-100k-year")
    assert big.fleet.num_gpus == 100_000 and big.days == 365 and big.research.enabled
    llama = load_scenario("llama3-405b")
    assert llama.lineage[0].num_gpus == 16384 and llama.days == 54


def test_unknown_bundled_name_suggests_close_ones():
    with pytest.raises(UnknownIdError) as info:
        load_scenario("llama3-450b")
    assert "llama3-405b" in info.value.choices


@pytest.mark.parametrize(
    ("patch", "field"),
    [
        ({"fleet": {"num_nodes": 0}}, "fleet.num_nodes"),
        ({"failures": {"detection_s": -1}}, "failures.detection_s"),
        ({"lineage": [{"name": "x", "release": "r", "num_gpus": 12}]}, "lineage.x.num_gpus"),
        (
            {
                "lineage": [
                    {
                        "name": "x",
                        "release": "r",
                        "num_gpus": 8,
                        "checkpoint_interval_s": 100,
                        "startup_s": 100,
                    }
                ]
            },
            "lineage.x.checkpoint_interval_s",
        ),
        ({"research": {"load": -0.5}}, "research.load"),
    ],
)
def test_invalid_values_name_the_field(patch: dict, field: str):
    with pytest.raises(InputError) as info:
        scenario_from_dict({**BASE, **patch})
    assert field in str(info.value)
    assert info.value.hint


def test_unknown_cause_and_table_are_reported():
    with pytest.raises(UnknownIdError):
        scenario_from_dict({**BASE, "failures": {"rates_per_1000_node_days": {"gpuu": 1.0}}})
    with pytest.raises(ParseError, match="unknown table"):
        scenario_from_dict({**BASE, "fleat": {}})
    with pytest.raises(ParseError):
        scenario_from_dict({**BASE, "fleet": {"num_nodes": 4, "gpus": 8}})


def test_bad_toml_file_is_a_parse_error(tmp_path: Path):
    path = tmp_path / "bad.toml"
    path.write_text("[fleet\nnum_nodes = 3\n")
    with pytest.raises(ParseError) as info:
        load_scenario(path)
    assert info.value.path == str(path)


def test_lineage_must_fit_the_fleet():
    with pytest.raises(InputError, match=r"fleet\.num_nodes"):
        scenario_from_dict({**BASE, "lineage": [{"name": "x", "release": "r", "num_gpus": 64}]})


def test_tokens_set_the_work_with_the_catalog_peak():
    run = {
        "name": "pt",
        "release": "r",
        "num_gpus": 16384,
        "active_params_b": 405,
        "tokens": 15.6e12,
        "mfu": 0.4,
    }
    sc = scenario_from_dict(
        {"scenario": {"name": "t"}, "fleet": {"num_nodes": 2048}, "lineage": [run]}
    )
    # facts.md: H100 SXM dense BF16 peak 989.4 TFLOP/s; C = 6 N D.
    expected = 6 * 405e9 * 15.6e12 / (16384 * 989.4e12 * 0.4)
    assert sc.work_s(sc.lineage[0]) == round(expected)
    explicit = scenario_from_dict(
        {
            "scenario": {"name": "t"},
            "fleet": {"num_nodes": 2048},
            "lineage": [{**run, "peak_tflops": 500.0}],
        }
    )
    assert explicit.work_s(explicit.lineage[0]) == round(expected * 989.4 / 500.0)


def test_tokens_and_work_days_are_exclusive():
    with pytest.raises(InputError, match="not both"):
        scenario_from_dict(
            {
                **BASE,
                "lineage": [
                    {
                        "name": "x",
                        "release": "r",
                        "num_gpus": 8,
                        "work_days": 1,
                        "tokens": 1e9,
                        "active_params_b": 1,
                    }
                ],
            }
        )


@pytest.mark.parametrize(
    ("windows", "message"),
    [
        ([{"start_day": 0, "duration_h": 1, "first_node": 0, "num_nodes": 1}], "research nodes"),
        (
            [{"start_day": 0, "duration_h": 1, "first_node": 2, "num_nodes": 1, "reason": "fw"}],
            "mention maintenance",
        ),
        (
            [
                {"start_day": 0, "duration_h": 24, "first_node": 2, "num_nodes": 2},
                {"start_day": 0.5, "duration_h": 1, "first_node": 3, "num_nodes": 1},
            ],
            "overlap",
        ),
    ],
)
def test_bad_maintenance_windows_are_refused(windows: list, message: str):
    lineage = [{"name": "x", "release": "r", "num_gpus": 8}]
    with pytest.raises(InputError, match=message):
        scenario_from_dict({**BASE, "lineage": lineage, "maintenance": windows})
