"""One loader for "a bundled name or a TOML path": its errors name the file, the line and the key."""

from __future__ import annotations

import contextlib
import tomllib
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


# Every TOML file a command reads, by the command that reads it, with a valid example of each.
_COMMANDS = {
    "lab": (["estimate", "lab", "{f}"], "data/scenarios/labs/meta-2024.toml"),
    "scenario": (
        ["simulate", "run", "{f}", "--out", "{d}/out"],
        "data/scenarios/sim/ledger-check.toml",
    ),
    "calibration": (
        ["simulate", "sweep", "--out", "{d}/out", "--no-plots", "--ft-calibration", "{f}"],
        "data/calibration/ft-costs.toml",
    ),
    "manifest": (["ingest", "slurm", "--db", "{d}/db.duckdb", "--manifest", "{f}"], None),
}


@pytest.mark.parametrize("kind", sorted(_COMMANDS))
@pytest.mark.parametrize(
    "nested", ["a = " + "[" * 5000 + "]" * 5000, "a = " + "{b=" * 500 + "1" + "}" * 500]
)
def test_nesting_too_deep_is_one_error_in_every_command(
    tmp_path: Path, kind: str, nested: str
) -> None:
    from typer.testing import CliRunner

    from gpuyield.cli import app

    path = tmp_path / "nested.toml"
    path.write_text(nested + "\n")
    args = [a.format(f=path, d=tmp_path) for a in _COMMANDS[kind][0]]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 1, result.output
    assert "nested too deeply" in result.output and "Traceback" not in result.output


_NASTY = ([[1]], {"x": {"y": [1]}}, "text", True, -1)


def _loaders() -> dict[str, object]:
    from gpuyield.manifest import load_manifest
    from gpuyield.simulate.ft_costs import load_ft_calibration

    return {
        "lab": estimate_lab,
        "scenario": load_scenario,
        "calibration": load_ft_calibration,
        "manifest": load_manifest,
    }


@pytest.mark.parametrize("kind", sorted(_COMMANDS))
def test_a_value_of_the_wrong_shape_is_an_error_not_a_traceback(tmp_path: Path, kind: str) -> None:
    # Each top-level key and each key one table down replaced by an array, a nested table, a
    # string, a boolean or a negative number: the loader refuses it or reads it, never crashes.
    import tomli_w

    bundled = _COMMANDS[kind][1]
    source = (
        resources.files("gpuyield").joinpath(bundled).read_text()
        if bundled
        else (Path(__file__).parents[1] / "examples/slurm-lab/manifest.toml").read_text()
    )
    base = tomllib.loads(source)
    keys = [(k,) for k in base] + [
        (k, j) for k, v in base.items() if isinstance(v, dict) for j in v
    ]
    load = _loaders()[kind]
    for key in keys:
        for value in _NASTY:
            doc = tomllib.loads(source)
            table = doc
            for part in key[:-1]:
                table = table[part]
            table[key[-1]] = value
            path = tmp_path / f"{kind}.toml"
            path.write_text(tomli_w.dumps(doc))
            with contextlib.suppress(InputError):
                load(path)  # type: ignore[operator]
