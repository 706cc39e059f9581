"""The CLI grammar (docs/cli.md): a snapshot of every command, option, type and default, and the
rules every command follows.

An engineer adding or changing an option regenerates the snapshot deliberately
(``pytest tests/cli --regen-golden``) and reviews its diff; the rules hold for whatever is added.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import pytest

from gpuyield.cli._grammar import DB_HELP, DEFAULT_ZONE, TZ_HELP
from tests.cli.snapshot import Command, Param, commands, grammar_text
from tests.conftest import REPO

ALL = commands()
VISIBLE = [c for c in ALL if not c.hidden]
OPTIONS = [p for c in ALL for p in c.params if p.kind == "option"]
SHOWN_OPTIONS = [p for c in VISIBLE for p in c.params if p.kind == "option" and not p.hidden]
# Values that are points in time, everywhere.
INSTANTS = frozenset({"--since", "--until", "--at", "--now"})
# Names that carry a time unit, which the DURATION type makes redundant. A rate (per second) or
# an amount of compute (GPU-hours) is not a duration.
UNIT_NAME = re.compile(r"(?<!-per)(?<!-gpu)-(s|secs?|seconds?|minutes?|hours?|days)$")


def _named(name: str) -> list[Param]:
    return [p for p in OPTIONS if name in p.names]


def test_the_grammar_snapshot(golden: Callable[[str, str], None]) -> None:
    golden("cli-grammar.txt", grammar_text())


def test_db_is_one_option() -> None:
    found = _named("--db")
    assert len(found) >= 10
    for p in found:
        assert p.type == "PATH", p.command
        assert p.help.startswith(DB_HELP), f"{p.command}: --db says {p.help!r}"
        assert p.default in ("gpuyield.duckdb", None), p.command


def test_tz_has_one_meaning() -> None:
    found = _named("--tz")
    assert found
    for p in found:
        assert (p.type, p.help, p.default) == ("ZONE", TZ_HELP, DEFAULT_ZONE), p.command
    with_times = {p.command for p in OPTIONS if set(p.names) & INSTANTS}
    assert with_times <= {p.command for p in found}, "a command reads times but has no --tz"


def test_times_durations_and_counts_have_their_types() -> None:
    for p in OPTIONS:
        if set(p.names) & INSTANTS:
            assert p.type == "TIME", (p.command, p.names)
        if "--top" in p.names or "--seeds" in p.names or "--jobs" in p.names:
            assert p.type == "COUNT", (p.command, p.names)
        if "--seed" in p.names:
            assert p.type == "INTEGER", (p.command, p.names)
        if "--json" in p.names:
            assert p.type == "FLAG", (p.command, p.names)


def test_seeds_top_and_json_say_the_same_everywhere() -> None:
    # docs/cli.md, "Options that mean the same everywhere": one meaning, said the same way.
    for p in OPTIONS:
        if "--seed" in p.names:
            assert p.help.startswith("Random seed"), (p.command, p.help)
        if "--seeds" in p.names:
            assert p.help.startswith("How many independent seeds"), (p.command, p.help)
            has_seed = any("--seed" in q.names for q in OPTIONS if q.command == p.command)
            assert ("from --seed" in p.help) == has_seed, (p.command, p.help)
        if "--top" in p.names:
            assert "0: all" in p.help, (p.command, p.help)
        if "--json" in p.names:
            assert p.help.startswith("Print"), (p.command, p.help)


def test_no_shown_option_spells_its_unit() -> None:
    # Durations are 30s/5m/1h/2d values; --timeout-s, --interval-s and --days stay only as
    # hidden deprecated spellings for one release.
    spelled = [(p.command, n) for p in SHOWN_OPTIONS for n in p.names if UNIT_NAME.search(n)]
    assert not spelled, spelled


def test_hidden_options_and_commands_are_deprecated_spellings() -> None:
    for p in OPTIONS:
        if p.hidden:
            assert p.help.startswith("Deprecated: "), (p.command, p.names)
    hidden: list[Command] = [c for c in ALL if c.hidden]
    assert {c.path for c in hidden} >= {"gpuyield ladder", "gpuyield idle-now", "gpuyield ft-loss"}
    for c in hidden:
        assert c.help.startswith("Deprecated: "), c.path


def test_report_views_are_grouped() -> None:
    paths = {c.path for c in VISIBLE}
    for view in ("summary", "ladder", "idle-now", "ft-loss"):
        assert f"gpuyield report {view}" in paths
    (report,) = [c for c in ALL if c.path == "gpuyield report"]
    assert report.default == "summary"


def test_docs_cli_md_names_every_command() -> None:
    text = (REPO / "docs" / "cli.md").read_text(encoding="utf-8")
    leaves = [c.path for c in VISIBLE if not c.group]
    missing = [path for path in leaves if f"`{path}" not in text]
    assert not missing, f"docs/cli.md does not name: {missing}"


@pytest.mark.parametrize("command", [c for c in VISIBLE if not c.group], ids=lambda c: c.path)
def test_every_command_says_what_it_does(command: Command) -> None:
    assert command.help, f"{command.path} has no help"
