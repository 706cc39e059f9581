"""One linear-time matcher for every pattern a manifest supplies (issue 26).

Family globs become anchored regexes and every pattern is matched by RE2 (through DuckDB), whose
time is linear in the name: Python's ``re`` took 88 s for `preflight` on a 41-character run name
against a glob with 12 ``*``. Patterns the engine cannot run are refused when the manifest is read,
naming the field, instead of failing in the middle of a report. bench/hostile.py measures the time.
"""

from __future__ import annotations

import fnmatch
from pathlib import Path

import pytest
from hypothesis import example, given
from hypothesis import strategies as st
from typer.testing import CliRunner

from gpuyield.cli import app
from gpuyield.errors import ManifestError
from gpuyield.families import first_match, glob_regex
from gpuyield.manifest import parse_manifest
from tests.ladder.conftest import LadderStore

PATH = Path("m.toml")
STARS_12 = "a*" * 12 + "b"  # a plain glob with 12 *: catastrophic for a backtracking engine
NAME_41 = "a" * 41  # never ends in b: a backtracking engine tries every split


def test_a_glob_with_many_stars_matches_as_a_glob() -> None:
    family = parse_manifest({"families": [{"name": "f", "runs": STARS_12}]}, PATH).families[0]
    assert not family.matches(NAME_41)
    assert family.matches("a" * 40 + "b")
    assert family.matches("a" * 12 + "b") and not family.matches("a" * 11 + "b")


@pytest.mark.parametrize(
    ("runs", "says", "hint"),
    [
        ("[z-a]", "the range z-a, which is reversed", "[a-z]"),
        ("run-[[:alpha:]]", "POSIX class", "[a-zA-Z]"),
        ("re:run-(?=x)", "lookahead", "lookarounds"),
        ("re:(?<=x)run", "lookbehind", "lookarounds"),
        ("re:(r)\\1", "backreference", "backreferences"),
        ("re:(?P<r>x)(?P=r)", "backreference", "backreferences"),
        ("re:(?>run)", "atomic group", "atomic groups"),
        ("re:run(", "missing )", "syntax"),
        ("re:" + "x" * 2000, "1 to 1000 characters", "llama3-*"),
    ],
)
def test_patterns_the_engine_cannot_run_are_refused_naming_the_field(
    runs: str, says: str, hint: str
) -> None:
    with pytest.raises(ManifestError) as caught:
        parse_manifest({"families": [{"name": "f", "runs": ["ok-*", runs]}]}, PATH)
    assert caught.value.message.startswith("m.toml: families[0].runs")
    assert says in caught.value.message
    assert caught.value.hint is not None and hint in caught.value.hint


def test_the_cli_says_so_in_one_line_with_a_hint(tmp_path: Path) -> None:
    manifest = tmp_path / "m.toml"
    manifest.write_text('[[families]]\nname = "f"\nruns = "re:a(?=b)"\n')
    result = CliRunner().invoke(
        app, ["ingest", "slurm", "--db", str(tmp_path / "s.duckdb"), "--manifest", str(manifest)]
    )
    assert result.exit_code == 1, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
    text = " ".join(result.output.split())
    assert "families[0].runs" in text and "lookahead" in text and "hint:" in text
    assert "Traceback" not in result.output and "duckdb" not in text.lower()


def test_preflight_with_a_hostile_pattern_and_name(
    ladder_store: LadderStore, tmp_path: Path
) -> None:
    """The family's glob has 12 *; the run name is 41 characters that never match it."""
    manifest = tmp_path / "hostile.toml"
    manifest.write_text(
        f'[[families]]\nname = "stars"\nruns = "{STARS_12}"\n\n[ladder]\nrungs = [1, 8, 16]\n'
    )
    runner = CliRunner()
    db = str(ladder_store.db)
    ingested = runner.invoke(app, ["ingest", "slurm", "--db", db, "--manifest", str(manifest)])
    assert ingested.exit_code == 0, ingested.output
    nobody = runner.invoke(app, ["preflight", "--db", db, "--gpus", "16", "--run", NAME_41])
    assert nobody.exit_code == 0 and "belongs to no family" in nobody.output
    member = runner.invoke(app, ["preflight", "--db", db, "--gpus", "16", "--run", "a" * 40 + "b"])
    # A family nothing has climbed: 16 GPUs need the lower rungs first.
    assert member.exit_code == 3, member.output
    assert "stars" in member.output


def test_first_match_is_the_first_pattern_in_order() -> None:
    patterns = [glob_regex("x*"), glob_regex("xy*"), "^(?:.*)$"]
    assert first_match(patterns, "xyz") == 0
    assert first_match(patterns[1:], "xyz") == 0
    assert first_match(patterns[1:2], "abc") is None
    assert first_match([], "abc") is None


_GLOB_CHARS = st.sampled_from(list("ab*?[]!-.^\\"))


@given(glob=st.text(_GLOB_CHARS, min_size=1, max_size=8), name=st.text("ab.^-[]!\\", max_size=8))
@example(glob="[^]", name="[^]")  # found by Hypothesis: a leading ^ is a member, not a negation
@example(glob="[^a]", name="b")
def test_globs_mean_what_fnmatch_means(glob: str, name: str) -> None:
    """Every glob the manifest accepts matches exactly the names fnmatch says it matches."""
    try:
        regex = glob_regex(glob, "runs")
    except ManifestError:
        return  # refused: a reversed range (fnmatch would read it as an empty set)
    assert (first_match([regex], name) is not None) == fnmatch.fnmatchcase(name, glob), regex


def test_too_many_families_or_patterns_too_large_together_are_refused() -> None:
    """The ledger tries every pattern at once (one RE2 automaton): bounded and compiled when the
    manifest is read, not a DuckDB error in the middle of an ingest (bench/hostile.py found it)."""
    many = [{"name": f"f{i}", "runs": f"r{i}-*"} for i in range(1001)]
    with pytest.raises(ManifestError, match="1,001 families, more than 1,000"):
        parse_manifest({"families": many}, PATH)
    large = [{"name": f"f{i}", "runs": f"re:(a|b){{1000}}{i}"} for i in range(300)]
    with pytest.raises(ManifestError) as caught:
        parse_manifest({"families": large}, PATH)
    assert "patterns together are more than the query engine (RE2) takes" in caught.value.message
    assert caught.value.hint is not None and "fewer or shorter" in caught.value.hint
