"""One loader for "a bundled name or a TOML path": its errors name the file, the line and the key."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

import pytest

from gpuyield import tomlfile
from gpuyield.errors import InputError, ParseError, UnknownIdError
from gpuyield.estimate.lab import estimate_lab
from gpuyield.simulate.scenario import load_scenario


def test_a_bundled_name_and_a_path_load_the_same(tmp_path: Path) -> None:
    bundled = tomlfile.load("ledger-check", folder="scenarios/sim", kind="scenario")
    copy = tmp_path / "mine.toml"
    copy.write_text(
        resources.files("gpuyield").joinpath("data/scenarios/sim/ledger-check.toml").read_text()
    )
    mine = tomlfile.load(copy, folder="scenarios/sim", kind="scenario")
    assert mine.data == bundled.data
    assert (bundled.origin, mine.origin) == ("ledger-check.toml", str(copy))


def test_a_syntax_error_names_the_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "bad.toml"
    path.write_text('[fleet]\nnum_gpus = 8\nname = "unclosed\n')
    with pytest.raises(ParseError) as caught:
        load_scenario(path)
    assert (caught.value.path, caught.value.line) == (str(path), 3)
    assert str(caught.value).startswith(f"{path}:3: ")


def test_an_unknown_name_suggests_the_closest() -> None:
    with pytest.raises(UnknownIdError) as caught:
        load_scenario("ledger-chek")
    assert caught.value.choices[0] == "ledger-check"
    with pytest.raises(UnknownIdError):
        estimate_lab("meta-2042")


def test_a_missing_path_says_so(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"lab scenario file .* does not exist"):
        estimate_lab(tmp_path / "nope.toml")


def test_an_unknown_key_is_named(tmp_path: Path) -> None:
    path = tmp_path / "lab.toml"
    path.write_text('title = "x"\ncolour = "red"\n')
    with pytest.raises(ParseError) as caught:
        estimate_lab(path)
    assert caught.value.field == "colour"
    assert "unknown key 'colour'" in str(caught.value) and "title" in (caught.value.hint or "")
