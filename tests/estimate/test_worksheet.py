"""Range propagation is exact for monotonic formulas; worksheets render to Markdown."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpuyield.estimate import formulas as f
from gpuyield.estimate.numbers import Range
from gpuyield.estimate.worksheet import DOWN, UP, Step, Worksheet, compute, propagate, to_markdown

positive = st.floats(min_value=1e-3, max_value=1e6, allow_nan=False, allow_infinity=False)


@st.composite
def ranges(draw: st.DrawFn) -> Range:
    low, central, high = sorted(draw(st.lists(positive, min_size=3, max_size=3)))
    return Range(low=low, central=central, high=high)


@given(ranges(), ranges(), ranges())
def test_propagate_matches_brute_force_corners(c: Range, peak: Range, mfu: Range) -> None:
    # Independent derivation: evaluate every corner and take min and max.
    result = propagate(
        f.gpu_hours_for,
        {"flops": UP, "peak_tflops": DOWN, "mfu": DOWN},
        flops=c,
        peak_tflops=peak,
        mfu=mfu,
    )
    corners = [
        f.gpu_hours_for(a, b, m)
        for a, b, m in itertools.product(
            (c.low, c.high), (peak.low, peak.high), (mfu.low, mfu.high)
        )
    ]
    assert result.low == pytest.approx(min(corners))
    assert result.high == pytest.approx(max(corners))
    assert result.central == pytest.approx(f.gpu_hours_for(c.central, peak.central, mfu.central))


def test_wrong_direction_is_caught() -> None:
    with pytest.raises(AssertionError, match="not monotonic"):
        propagate(
            lambda a, b: a / b,
            {"a": UP, "b": UP},
            a=Range.point(1),
            b=Range(low=1, central=2, high=4),
        )


def test_compute_substitutes_numbers_into_template() -> None:
    step = compute(
        "flops",
        "training compute",
        "C = 6 * N * D",
        "6 * {n} * {d}",
        lambda n, d: 6 * n * d,
        {"n": UP, "d": UP},
        "FLOP",
        n=Range.point(405e9),
        d=Range(low=10e12, central=15e12, high=20e12),
    )
    assert step.substituted == "6 * 405B * [10T .. 15T .. 20T]"
    assert step.value.low == pytest.approx(6 * 405e9 * 10e12)


def test_markdown_has_a_row_per_step_and_escapes_pipes() -> None:
    sheet = Worksheet(
        title="t",
        steps=(
            Step(name="a", label="x | y", formula="input", substituted="1", value=Range.point(1)),
        ),
        notes=("a note",),
    )
    text = to_markdown(sheet)
    assert "| x \\| y | input | 1 | 1 |" in text
    assert text.splitlines()[0] == "### t"
    assert "- a note" in text
