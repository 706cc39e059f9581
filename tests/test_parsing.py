"""The one grammar of typed values (gpuyield.parsing): durations, instants, counts, zones."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpuyield import parsing
from gpuyield.errors import FieldError


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("30s", 30),
        ("5m", 300),
        ("1h", 3600),
        ("2d", 172_800),
        ("1h30m", 5400),
        ("1d12h", 129_600),
        ("1d2h3m4s", 93_784),
        ("1.5h", 5400),
        ("0.5s", 0.5),
        ("90", 90),  # a bare number is seconds, as sleep(1) reads it
        ("0", 0),
        (" 15m ", 900),
    ],
)
def test_durations(text: str, seconds: float) -> None:
    assert parsing.duration_s(text) == seconds
    assert parsing.parse_duration(text, field="x.y") == seconds


@pytest.mark.parametrize(
    "text",
    ["", "soon", "m", "30", "-5m", "5 m", "30m1h", "1h1h", "5M", "1w", "1e3s", "１s", "5m" * 40],
)
def test_what_is_not_a_duration(text: str) -> None:
    if text == "30":  # the one in the list that is a duration: 30 seconds
        assert parsing.duration_s(text) == 30
        return
    assert parsing.duration_s(text) is None
    with pytest.raises(FieldError) as caught:
        parsing.parse_duration(text, field="collect.overlap", example="1h")
    error = caught.value
    assert error.field == "collect.overlap" and error.example == "1h"
    assert str(error).startswith("collect.overlap is not a duration (30s, 5m, 1h, 2d or 1h30m)")


def test_duration_bounds_and_whole_seconds() -> None:
    with pytest.raises(FieldError, match=r"must be from 1s to 1d, not '2d'"):
        parsing.parse_duration("2d", field="f", at_least_s=1, at_most_s=86_400)
    with pytest.raises(FieldError, match="must be whole seconds"):
        parsing.parse_seconds("0.5s", field="f")
    assert parsing.parse_seconds("1.5m", field="f") == 90
    assert isinstance(parsing.parse_seconds("1.5m", field="f"), int)


@given(st.integers(min_value=0, max_value=parsing.MAX_DURATION_S))
def test_every_duration_reads_back_from_how_it_is_written(seconds: int) -> None:
    text = parsing.format_duration(seconds)
    assert parsing.parse_seconds(text, field="f") == seconds
    assert parsing.format_duration(parsing.parse_seconds(text, field="f")) == text


@pytest.mark.parametrize(
    ("text", "tz", "epoch"),
    [
        ("2026-11-30T11:00:00", "UTC", 1_796_036_400),
        ("2026-11-30T11:00:00Z", "Europe/Berlin", 1_796_036_400),  # an offset wins over --tz
        ("2026-11-30T12:00:00+01:00", "UTC", 1_796_036_400),
        ("2026-11-30T12:00:00", "Europe/Berlin", 1_796_036_400),  # CET in November
        ("2026-11-30 11:00", "UTC", 1_796_036_400),
        ("2026-11-30", "UTC", 1_795_996_800),
    ],
)
def test_instants(text: str, tz: str, epoch: int) -> None:
    assert parsing.parse_instant(text, tz=tz, field="report.since") == epoch


@pytest.mark.parametrize(
    "text", ["yesterday", "30/11/2026", "1999-12-31T23:00:00", "2100-01-01", "２０２６-11-30"]
)
def test_what_is_not_an_instant(text: str) -> None:
    with pytest.raises(FieldError) as caught:
        parsing.parse_instant(text, field="report.since")
    assert caught.value.field == "report.since" and caught.value.example


def test_a_time_zone_is_checked() -> None:
    assert parsing.check_zone("Europe/Berlin") == "Europe/Berlin"
    for bad in ("Mars/Base", "../../etc/passwd", "", "x" * 100):
        with pytest.raises(FieldError, match="is not a time zone"):
            parsing.check_zone(bad, field="report.tz")
    with pytest.raises(FieldError, match=r"^--tz is not a time zone"):
        parsing.parse_instant("2026-11-30T11:00:00", tz="Nowhere", field="--tz")


@given(st.datetimes(min_value=datetime(2000, 1, 2), max_value=datetime(2099, 12, 30)))
def test_an_instant_written_in_utc_reads_back(value: datetime) -> None:
    value = value.replace(microsecond=0)
    epoch = int(value.replace(tzinfo=UTC).timestamp())
    assert parsing.parse_instant(value.isoformat(), field="f") == epoch
    assert parsing.parse_instant(value.isoformat() + "Z", tz="Asia/Tokyo", field="f") == epoch


@pytest.mark.parametrize(
    ("text", "count"),
    [("16", 16), ("16k", 16_000), ("16K", 16_000), ("1.5M", 1_500_000), ("1.5m", 1_500_000),
     ("2B", 2_000_000_000), ("2G", 2_000_000_000), ("16,384", 16_384), ("16_384", 16_384),
     ("2^14", 16_384), ("1e3", 1000), ("0", 0)],
)  # fmt: skip
def test_counts(text: str, count: int) -> None:
    assert parsing.parse_count(text, field="sweep.gpus") == count


@pytest.mark.parametrize(
    "text", ["", "x", "-1", "1.2345k", "0.5", "$5", "40%", "１", "1e999", "10^400"]
)
def test_what_is_not_a_count(text: str) -> None:
    with pytest.raises(
        FieldError, match=r"^sweep\.gpus is not a whole number \(16, 16k or 1\.5M\)"
    ):
        parsing.parse_count(text, field="sweep.gpus")


def test_count_bounds() -> None:
    with pytest.raises(FieldError, match=r"must be from 1 to 10, not '11'"):
        parsing.parse_count("11", field="f", at_least=1, at_most=10)
    with pytest.raises(FieldError, match=r"must be >= 1, not '0'"):
        parsing.parse_count("0", field="f", at_least=1)


def test_the_estimators_numbers_are_this_grammar() -> None:
    from gpuyield.estimate.numbers import parse_number

    for text in ("405B", "15T", "2^24", "$30M", "40%", "1.5e12", "16,384"):
        assert parse_number(text, field="--x") == parsing.number(text)
    assert parsing.number("1e999") == float("inf")
    assert parsing.number("10^400") == float("inf")


@pytest.mark.parametrize(
    ("text", "size"),
    [
        ("4G", 4 << 30),
        ("512M", 512 << 20),
        ("512MiB", 512 << 20),
        ("100k", 102_400),
        ("1.5k", 1536),
        ("1048576", 1 << 20),
        ("2gb", 2 << 30),
        (" 1T ", 1 << 40),
    ],
)
def test_sizes_are_binary(text: str, size: int) -> None:
    assert parsing.parse_size(text, field="collect.max_output_bytes") == size


@pytest.mark.parametrize("text", ["", "4X", "-1G", "4 G", "G", "1e3", "４G", "9" * 80])
def test_what_is_not_a_size(text: str) -> None:
    with pytest.raises(FieldError, match="is not a size") as caught:
        parsing.parse_size(text, field="collect.max_output_bytes")
    assert caught.value.field == "collect.max_output_bytes" and caught.value.example == "4G"


def test_size_bounds() -> None:
    with pytest.raises(FieldError, match="must be from 1 to"):
        parsing.parse_size("0", field="f")
    with pytest.raises(FieldError, match="must be from 1 to"):
        parsing.parse_size("99999T", field="f")


def test_the_manifests_times_are_this_grammar() -> None:
    """``[[diverged]] after`` is read as the CLI's TIME (it had an ISO parser of its own)."""
    from pathlib import Path

    from gpuyield.errors import ManifestError
    from gpuyield.manifest import parse_manifest

    def after_s(value: object, tz: str = "UTC") -> int | None:
        doc = {"diverged": [{"run": "b", "after": value}]}
        return parse_manifest(doc, Path("m.toml"), tz=tz).diverged[0].after_s

    written = "2026-11-30T10:10:00"
    assert after_s(written, tz="Europe/Berlin") == parsing.parse_instant(
        written, tz="Europe/Berlin", field="f"
    )
    assert after_s(datetime(2026, 11, 30, 10, 10)) == parsing.parse_instant(written, field="f")
    with pytest.raises(ManifestError, match=r"m\.toml: diverged\[0\]\.after is not an ISO 8601"):
        after_s("soon")
    with pytest.raises(ManifestError, match=r"diverged\[0\]\.after is outside 2000\.\.2100"):
        after_s("1999-01-01")
    with pytest.raises(ManifestError, match="must be a time like"):
        after_s(5)


def test_a_scenarios_start_is_this_grammar() -> None:
    from gpuyield.errors import InputError
    from gpuyield.simulate.scenario import _parse_start

    assert _parse_start("2026-01-01T02:00:00+02:00") == datetime(2026, 1, 1, tzinfo=UTC)
    assert _parse_start("2026-01-01") == datetime(2026, 1, 1, tzinfo=UTC)  # naive is UTC
    with pytest.raises(InputError, match=r"scenario\.start is not an ISO 8601 time"):
        _parse_start("next monday")
    with pytest.raises(InputError, match=r"scenario\.start is outside 2000\.\.2100"):
        _parse_start("1970-01-01")


@pytest.mark.parametrize(
    ("text", "value"), [("0.4", 0.4), ("40%", 0.4), ("1.5e12", 1.5e12), ("70B", 7e10)]
)
def test_numbers(text: str, value: float) -> None:
    assert parsing.parse_number(text, field="plan.mfu") == pytest.approx(value)


@pytest.mark.parametrize("text", ["", "lots", "1e999", "0.4.1", "nan"])
def test_what_is_not_a_number(text: str) -> None:
    with pytest.raises(FieldError, match="is not a number"):
        parsing.parse_number(text, field="plan.mfu")
