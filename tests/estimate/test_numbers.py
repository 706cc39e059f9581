"""Numbers as people type them, ranges, and the rounding unit of a typed figure."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpuyield.errors import InputError
from gpuyield.estimate.numbers import (
    Range,
    as_range,
    format_number,
    last_digit_unit,
    parse_number,
    parse_range,
    require_fraction,
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("405B", 405e9),
        ("405G", 405e9),
        ("405b", 405e9),
        ("15T", 15e12),
        ("15.6T", 15.6e12),
        ("16k", 16_000),
        ("16K", 16_000),
        ("16M", 16_000_000),
        ("2^24", 16_777_216),
        ("2^-1", 0.5),
        ("1.5e12", 1.5e12),
        ("1.5E12", 1.5e12),
        ("$30M", 30e6),
        ("$2", 2),
        ("40%", 0.4),
        ("5.5%", 0.055),
        ("1,082,990", 1_082_990),
        ("16_384", 16_384),
        (".5", 0.5),
        ("0.4", 0.4),
        ("  8  ", 8),
        ("2.7B", 2.7e9),
    ],
)
def test_parse_number_accepts_typed_forms(text: str, expected: float) -> None:
    assert parse_number(text, field="--x") == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize(
    "text",
    ["", "abc", "4O5B", "1..2", "15X", "$", "%", "1,08", "B", "--3", "-5", "1e999", "nan", "2^"],
)
def test_parse_number_rejects_with_the_argument_named(text: str) -> None:
    with pytest.raises(InputError) as caught:
        parse_number(text, field="estimate.params")
    assert caught.value.message.startswith("estimate.params: ")
    assert caught.value.hint  # every error says how to fix it


def test_range_two_parts_takes_geometric_middle() -> None:
    value = parse_range("100B:400B", field="estimate.params")
    assert (value.low, value.high) == (100e9, 400e9)
    assert value.central == pytest.approx(200e9)  # sqrt(100 * 400) = 200


def test_range_three_parts_keeps_central() -> None:
    assert parse_range("1:2:10", field="--x") == Range(low=1, central=2, high=10)


@pytest.mark.parametrize("text", ["5:1", "1:10:5", "1:2:3:4", "1:", ":2"])
def test_bad_ranges_are_input_errors(text: str) -> None:
    with pytest.raises(InputError, match="--eta"):
        parse_range(text, field="--eta")


def test_point_range_serialises_as_plain_number() -> None:
    assert parse_range("40%", field="estimate.mfu").to_dict() == 0.4
    assert parse_range("1:4", field="--x").to_dict() == {"low": 1, "central": 2, "high": 4}


def test_as_range_accepts_numbers_and_rejects_other_types() -> None:
    assert as_range(3, field="--x") == Range.point(3.0)
    with pytest.raises(InputError, match="--x"):
        as_range(True, field="--x")  # a bool is not a count
    with pytest.raises(InputError, match="--x"):
        as_range(math.inf, field="--x")


def test_fraction_rejects_percent_typed_as_whole_number() -> None:
    with pytest.raises(InputError, match=r"^estimate\.mfu must be a fraction"):
        require_fraction(as_range("40", field="estimate.mfu"), field="estimate.mfu")


@pytest.mark.parametrize(
    ("text", "unit"),
    [
        ("940k", 1e4),
        ("65", 1),
        ("62", 1),
        ("40M", 1e7),
        ("2.4e15", 1e14),
        ("5.5%", 1e-3),
        ("10%", 0.1),
        ("3%", 0.01),
        ("0.5", 0.1),
        ("210M", 1e7),
        ("144M", 1e6),
    ],
)
def test_last_digit_unit(text: str, unit: float) -> None:
    assert last_digit_unit(text, field="x") == pytest.approx(unit)


@given(st.floats(min_value=0, max_value=1e30, allow_nan=False, allow_infinity=False))
def test_any_float_repr_round_trips(value: float) -> None:
    assert parse_number(repr(value), field="--x") == value


@given(st.integers(min_value=0, max_value=10**6), st.sampled_from(["k", "M", "B", "T"]))
def test_suffix_multiplies(count: int, suffix: str) -> None:
    scale = {"k": 1e3, "M": 1e6, "B": 1e9, "T": 1e12}[suffix]
    assert parse_number(f"{count}{suffix}", field="--x") == pytest.approx(count * scale)


def test_format_number_reads_back() -> None:
    # Display is for people, but it must not lie: each form parses back to the value shown.
    for value in (3.645e25, 30.84e6, 16_384, 65.06, 0.345, 1.775e6):
        shown = format_number(value).replace(",", "")
        assert parse_number(shown, field="x") == pytest.approx(value, rel=1e-3)
