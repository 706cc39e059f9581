"""One safe terminal printer (issue 26): every command that prints names, on a store whose every
name is hostile, exits as it should, prints no control character and shows the markup as text.

A job comment ``[/x]`` made `gpuyield ladder` raise Rich's MarkupError for everyone; `ladder`,
`preflight` and `idle-now` printed raw escape sequences from run names, users and accounts. Here the
users, accounts, partitions, job names, runs and families of the utilization fixture's jobs are
all written with Rich markup, terminal escapes (CSI, OSC with BEL, C1) and a bidirectional
override, and so are the file and store paths.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.hostile.inputs import run_cli
from tests.ledger.test_utilization import FIXTURE, UNTIL_S

# Markup that closes a tag never opened, a CSI colour, an OSC title ended by BEL, a C1 CSI, and
# the right-to-left override: each must reach the terminal as visible text.
MARK = "[/x][bold]"
HOSTILE = MARK + "\x1b[31mred\x1b]0;pwned\x07\x9b2J\u202e"
RAW = ("\x1b", "\x07", "\x9b", "\u202e")
# A file name cannot hold "/": paths carry an unknown tag and the same escapes.
PATH_MARK = "[bold][x]"
PATH_HOSTILE = PATH_MARK + "\x1b[31mred\x1b]0;pwned\x07\x9b2J\u202e"


def _name(base: str) -> str:
    return base + HOSTILE


def _path_name(base: str) -> str:
    return base + PATH_HOSTILE


def _hostile_sacct() -> str:
    lines = (FIXTURE / "sacct.psv").read_text().splitlines()
    out = [lines[0]]
    for number, line in enumerate(lines[1:]):
        f = line.split("|")
        f[2], f[3], f[4], f[5] = _name("job"), _name("user"), _name("acct"), _name("part")
        f[14] = f"run={_name(f'run{number}')},family={_name('fam')}"
        out.append("|".join(f))
    return "\n".join(out) + "\n"


MANIFEST = """
[runs]
match = "comment:run=(?P<run>[^,\\\\s]+)"

[[families]]
name = "plain"
runs = "run*"

[ladder]
rungs = [1, 4, 8]
"""


@pytest.fixture(scope="module")
def hostile_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("printing")
    folder = root / _path_name("in")
    folder.mkdir()
    sacct = folder / f"{_path_name('sacct')}.psv"
    sacct.write_text(_hostile_sacct(), encoding="utf-8")
    manifest = folder / "manifest.toml"
    manifest.write_text(MANIFEST, encoding="utf-8")
    db = root / f"{_path_name('store')}.duckdb"
    outcome = run_cli(
        ["ingest", "slurm", "--db", str(db), "--sacct", str(sacct), "--events",
         str(FIXTURE / "events.psv"), "--nodes", str(FIXTURE / "nodes.txt"), "--manifest",
         str(manifest), "--until", "2026-01-01T02:00:00"]
    )  # fmt: skip
    _assert_safe(outcome.output, outcome.traceback, outcome.exit_code, 0)
    assert PATH_MARK in outcome.output  # the file's path, shown as text
    utilization = run_cli(
        ["ingest", "utilization", "--db", str(db), "--prom-json",
         str(FIXTURE / "dcgm_query_range.json"), "--step", "60s"]
    )  # fmt: skip
    _assert_safe(utilization.output, utilization.traceback, utilization.exit_code, 0)
    assert UNTIL_S  # the fixture's window ends at 02:00, as --until says
    return db


def _assert_safe(output: str, traceback: str | None, code: int, expected: int) -> None:
    assert traceback is None, traceback
    assert code == expected, output
    for raw in RAW:
        assert raw not in output, f"{raw!r} reached the terminal:\n{output!r}"


@pytest.mark.parametrize(
    ("args", "code", "shows"),
    [
        (["report"], 0, None),
        (["report", "--by", "user"], 0, MARK),
        (["report", "--by", "account"], 0, MARK),
        (["report", "--by", "partition"], 0, MARK),
        (["report", "--by", "run"], 0, MARK),
        (["report", "--by", "job"], 0, MARK),
        (["report", "ladder"], 0, MARK),
        (["report", "idle-now", "--window", "2h", "--top", "0"], 0, MARK),
        # run0... is in the manifest's family "plain", which nothing completed yet.
        (["preflight", "--gpus", "8", "--run", _name("run0")], 3, None),
        # The comments' family completed on 8 GPUs (job 101, a hostile run name) at 01:30.
        (
            ["preflight", "--gpus", "8", "--family", _name("fam"), "--at", "2026-01-01T02:00:00"],
            0,
            MARK,
        ),
        (["preflight", "--gpus", "8", "--family", _name("fam")], 3, MARK),
        (["preflight", "--gpus", "8", "--run", "nobody" + HOSTILE], 0, MARK),
        (["report", "ft-loss", "--run", _name("run0")], 1, MARK),
    ],
)
def test_every_command_that_prints_names_prints_them_safely(
    hostile_store: Path, args: list[str], code: int, shows: str | None
) -> None:
    outcome = run_cli([*args, "--db", str(hostile_store)])
    _assert_safe(outcome.output, outcome.traceback, outcome.exit_code, code)
    if shows is not None:
        assert shows in outcome.output, outcome.output
    assert "\\x1b" in outcome.output or shows is None


def test_the_html_report_and_json_carry_the_names_unchanged(
    hostile_store: Path, tmp_path: Path
) -> None:
    """Only what a terminal shows is escaped: JSON keeps the stored text exactly."""
    import json

    outcome = run_cli(["report", "--db", str(hostile_store), "--by", "user", "--json"])
    assert outcome.exit_code == 0, outcome.output
    users = {row["key"] for row in json.loads(outcome.stdout)["breakdown"]["rows"]}
    assert _name("user") in users


def test_errors_quoting_hostile_text_are_one_safe_line(tmp_path: Path) -> None:
    missing = tmp_path / f"{_path_name('nothing')}.duckdb"
    for args in (
        ["report", "--db", str(missing)],
        ["report", "ladder", "--db", str(missing)],
        ["preflight", "--gpus", "8", "--run", "x", "--db", str(missing)],
        ["report", "idle-now", "--db", str(missing)],
        ["ingest", "slurm", "--db", str(tmp_path / "s.duckdb"), "--sacct", str(missing)],
    ):
        outcome = run_cli(args)
        _assert_safe(outcome.output, outcome.traceback, outcome.exit_code, 1)
        assert PATH_MARK in outcome.output and "hint:" in outcome.output, outcome.output
