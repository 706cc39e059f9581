"""Library errors name the library's fields; the CLI and serve say the same thing with the flag or
query parameter their user typed (one table each: ``cli/_fields.py``, ``serve/app.py``)."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import typer.main
from typer.testing import CliRunner

from gpuyield.cli import app
from gpuyield.cli._common import as_flag
from gpuyield.cli._fields import FLAGS, Flag
from gpuyield.errors import FieldError, GpuyieldError, InputError, ParseError, renamed
from gpuyield.simulate.api import run_scenario
from gpuyield.simulate.sweep import base_model, run_sweep

SRC = Path(__file__).resolve().parents[1] / "src" / "gpuyield"
# A long option as a CLI spells it; "---" rules and "x--y" ranges are not options.
_FLAG = re.compile(r"(?<![\w-])--[a-z][a-z0-9-]*")
# A flag in a command line the message tells its reader to run (gpuyield's own, or Slurm's
# tools, as `sacct -P (--parsable2)`) is part of a command, not a field of the failed call.
_COMMAND = re.compile(r"\b(gpuyield|sacct|sacctmgr|scontrol|sinfo|sbatch|srun)\b(?:(?!\.\s|;).)*$")
# A library field as messages write it: area.parameter (``simulate.days``); not a file name.
_FIELD = re.compile(
    r"(?<![\w.])([a-z][a-z_]*\.(?!(?:md|json|jsonl|toml|psv|txt|gz|zst)\b)[a-z][a-z0-9_]*)(?![\w.(])"
)
# Fields no CLI flag sets: the keys of files (a lab's or a catalog's TOML) and values only a
# Python caller can give. Each is named as the library names it, on the CLI too.
LIBRARY_ONLY = frozenset(
    {
        "range.low",
        "range.central",
        "range.high",
        "train.n_head",
        "train.block",
        "train.restart_delay_s",
    }
)


def _library_modules() -> Iterator[Path]:
    for path in sorted(SRC.rglob("*.py")):
        if path.relative_to(SRC).parts[0] != "cli" and path.name != "__main__.py":
            yield path


def _error_classes() -> set[str]:
    """Every GpuyieldError subclass defined in the package, by name (found in the source)."""
    bases: dict[str, set[str]] = {}
    for path in SRC.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef):
                bases[node.name] = {ast.unparse(b).rsplit(".", 1)[-1] for b in node.bases}
    found = {"GpuyieldError"}
    while grown := {c for c, b in bases.items() if b & found} - found:
        found |= grown
    return found


def _text(node: ast.AST, constants: dict[str, ast.AST]) -> Iterator[tuple[int, str]]:
    """The message text in ``node``: its strings (an f-string with ``{}`` for its values) and
    the module constants it names (a shared hint)."""
    for sub in ast.walk(node):
        if isinstance(sub, ast.Constant) and isinstance(sub.value, str):
            yield sub.lineno, sub.value
        elif isinstance(sub, ast.JoinedStr):
            parts = [v.value if isinstance(v, ast.Constant) else "{}" for v in sub.values]
            yield sub.lineno, "".join(str(p) for p in parts)
        elif isinstance(sub, ast.Name) and sub.id in constants:
            yield from _text(constants.pop(sub.id), constants)


def _error_texts() -> Iterator[tuple[str, str]]:
    """(where, text) of every message and hint a library error is raised or built with."""
    errors = _error_classes()
    for path in _library_modules():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        constants = {
            t.id: node.value
            for node in tree.body
            if isinstance(node, ast.Assign)
            for t in node.targets
            if isinstance(t, ast.Name)
        }
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and ast.unparse(node.func).rsplit(".", 1)[-1] in errors:
                for line, text in _text(node, dict(constants)):
                    yield f"{path.relative_to(SRC)}:{line}", text


def _flags_named(text: str) -> list[str]:
    return [m.group() for m in _FLAG.finditer(text) if not _COMMAND.search(text[: m.start()])]


def test_no_library_error_names_a_cli_flag() -> None:
    named = sorted({f"{where}: {flag}" for where, t in _error_texts() for flag in _flags_named(t)})
    assert not named, "library errors naming CLI flags (name the library field):\n" + "\n".join(
        named
    )


def test_the_flag_rule_tells_commands_from_fields() -> None:
    assert _flags_named("--top must be 0 or more") == ["--top"]
    assert _flags_named("check --since and --until") == ["--since", "--until"]
    assert _flags_named("run gpuyield ingest slurm --sacct FILE first") == []
    assert _flags_named("run sacct with -P (--parsable2); pass --fields") == ["--fields"]


def test_every_field_a_library_error_names_has_a_flag() -> None:
    fields = {
        (where, m.group(1))
        for where, text in _error_texts()
        for m in _FIELD.finditer(text)
        if m.group(1).split(".")[0] in {k.split(".")[0] for k in FLAGS} | {"range"}
    }
    unknown = sorted(f"{w}: {f}" for w, f in fields if f not in FLAGS and f not in LIBRARY_ONLY)
    assert not unknown, "fields with no flag in cli/_fields.py:\n" + "\n".join(unknown)


def test_every_flag_in_the_table_is_an_option() -> None:
    options: set[str] = set()

    def walk(command: Any) -> None:
        for param in command.params:
            options.update(o for o in param.opts if o.startswith("--"))
        for sub in getattr(command, "commands", {}).values():
            walk(sub)

    walk(typer.main.get_command(app))
    # A flag with a key (``--remedy checkpoint=``) is its option's; a Flag carries a unit too.
    names = {(f.name if isinstance(f, Flag) else f).split()[0] for f in FLAGS.values()}
    assert sorted(names - options) == []


def test_every_field_in_the_table_is_one_the_library_names() -> None:
    source = "\n".join(p.read_text(encoding="utf-8") for p in _library_modules())
    # A field may be composed (f"train.{name}" for each size the config checks).
    stale = [f for f in FLAGS if f not in source and f'f"{f.split(".")[0]}.{{' not in source]
    assert not stale, f"fields no library module names any more: {stale}"


def test_renamed_keeps_the_error_and_says_it_in_other_words() -> None:
    error = ParseError(
        "the window (window.since/window.until) is odd",
        path="a.psv",
        line=3,
        hint="pick window.since. ok; window.sinces is another word",
    )
    said = renamed(error, {"window.since": "--since", "window.until": "--until"}, example_hint=str)
    assert isinstance(said, ParseError) and (said.path, said.line) == ("a.psv", 3)
    assert str(said) == "a.psv:3: the window (--since/--until) is odd"
    assert said.hint == "pick --since. ok; window.sinces is another word"
    assert error.message.startswith("a.psv:3: the window (window.since")  # the original is kept
    field = as_flag(FieldError("report.top", "must be >= 0", example="10"))
    assert (str(field), field.hint) == ("--top must be >= 0", "pass e.g. --top 10")
    assert isinstance(field, FieldError) and field.field == "report.top"
    plain = GpuyieldError("nothing here names a field", hint="report.topper")
    assert as_flag(plain) is plain


@pytest.mark.parametrize(
    ("call", "field"),
    [
        (lambda tmp: run_scenario("ledger-check", tmp, days=0), "simulate.days"),
        (lambda tmp: run_scenario("ledger-check", tmp, seed=-1), "simulate.seed"),
        (lambda tmp: base_model(days=-1, gpus=8, interval_s=600, write_s=30), "sweep.days"),
    ],
)
def test_library_errors_name_fields(tmp_path: Path, call, field: str) -> None:
    with pytest.raises(FieldError) as caught:
        call(tmp_path)
    assert caught.value.field == field
    assert str(caught.value).startswith(f"{field} must be")
    assert "--" not in str(caught.value) and "--" not in (caught.value.hint or "")
    assert isinstance(caught.value, InputError)


def test_sweep_jobs_is_a_field() -> None:
    from gpuyield.simulate.sweep import SweepParam, SweepSpec

    with pytest.raises(FieldError, match=r"^sweep\.jobs must be >= 1"):
        run_sweep(SweepSpec(param=SweepParam.CLUSTER_GPUS, values=(1024.0,)), jobs=0)


@pytest.mark.parametrize(
    ("args", "message", "hint"),
    [
        (
            ["simulate", "run", "ledger-check", "--duration", "0s"],
            "--duration must be > 0",
            "--duration 7d",
        ),
        (
            ["simulate", "run", "ledger-check", "--days", "0"],
            "--duration must be > 0",
            "--duration 7d",
        ),
        (["simulate", "run", "ledger-check", "--seed", "-1"], "--seed must be >= 0", "--seed 7"),
        (["simulate", "sweep", "--duration", "0s"], "--duration must be > 0", "--duration 30d"),
        (["simulate", "sweep", "--seeds", "0"], "--seeds must be >= 1", "--seeds 3"),
        (["simulate", "sweep", "--jobs", "0"], "--jobs must be >= 1", "--jobs 1"),
    ],
)
def test_the_cli_maps_fields_to_flags(tmp_path: Path, args: list[str], message: str, hint: str):
    result = CliRunner().invoke(app, [*args, "--out", str(tmp_path / "out")])
    assert result.exit_code == 1
    assert f"error: {message}" in result.output
    assert f"hint: pass e.g. {hint}" in result.output


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["estimate", "train", "--accelerator", "h100-sxm"], "--params is missing, and so is --tokens"),
        (["estimate", "params-from-speed", "--tokens-per-s", "68"], "--accelerator or --bandwidth-tbps"),
        (["estimate", "train", "--params", "4O5B", "--tokens", "1T", "--accelerator", "h100-sxm"], "--params: cannot read '4O5B'"),
        (["train-ft", "--mode", "drop", "--replicas", "1"], "--replicas must be >= 2"),
    ],
)  # fmt: skip
def test_the_cli_says_library_errors_with_its_flags(
    tmp_path: Path, args: list[str], message: str
) -> None:
    result = CliRunner().invoke(
        app, [*args, "--out", str(tmp_path)] if "train-ft" in args else args
    )
    assert result.exit_code == 1, result.output
    assert f"error: {message}" in result.output
    assert "estimate." not in result.output and "train." not in result.output
