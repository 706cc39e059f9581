"""The CLI's grammar as text: every command, option, type and default (tests/golden/cli-grammar.txt).

One line per command and per parameter, so a diff of the golden file reads as what changed:
an option added, renamed, retyped or given another default. Help texts are left out (they change
for wording); the rules in test_grammar.py check the ones that must agree.
"""

from __future__ import annotations

import types
import typing
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import typer

from gpuyield.cli import app

_TYPE_NAMES = {str: "TEXT", int: "INTEGER", float: "FLOAT", Path: "PATH", bool: "FLAG"}


@dataclass(frozen=True, kw_only=True, slots=True)
class Param:
    """One option or argument of a command, as the grammar sees it."""

    command: str
    names: tuple[str, ...]
    kind: str
    type: str
    default: str | None
    required: bool
    multiple: bool
    hidden: bool
    help: str

    def line(self) -> str:
        words = [", ".join(self.names), self.type]
        if self.kind == "argument":
            words.append("(argument)")
        if self.required:
            words.append("required")
        if self.multiple:
            words.append("multiple")
        if self.default is not None:
            words.append(f"[default: {self.default}]")
        if self.hidden:
            words.append(f"hidden ({self.help})")
        return "  " + " ".join(words)


@dataclass(frozen=True, kw_only=True, slots=True)
class Command:
    """One command (a leaf or a group) and its parameters."""

    path: str
    group: bool
    #: A group's command for a first word that names none (``report`` -> ``summary``).
    default: str | None
    hidden: bool
    help: str
    params: tuple[Param, ...]

    def lines(self) -> Iterator[str]:
        marks = (" (group)" if self.group else "") + (
            f" [default command: {self.default}]" if self.default else ""
        )
        marks += f" hidden ({self.help})" if self.hidden else ""
        yield self.path + marks
        for param in self.params:
            yield param.line()


def _annotation(param: Any) -> Any:
    descriptor = getattr(param, "type_descriptor", None)
    annotation = getattr(descriptor, "annotation", str)
    if isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is typing.Union:
        annotation = next(a for a in typing.get_args(annotation) if a is not type(None))
    if typing.get_origin(annotation) is list:
        annotation = typing.get_args(annotation)[0]
    return annotation


def _type(param: Any) -> str:
    if param.metavar:
        return str(param.metavar)
    annotation = _annotation(param)
    return _TYPE_NAMES.get(annotation, getattr(annotation, "__name__", str(annotation)))


def _default(param: Any) -> str | None:
    if isinstance(param.show_default, str):
        return param.show_default
    value = param.default
    if value is None or (getattr(param, "is_flag", False) and value is False):
        return None
    if isinstance(value, list | tuple):
        return ",".join(map(str, value)) or None
    return str(value)


def _param(command: str, param: Any) -> Param:
    argument = not getattr(param, "opts", [""])[0].startswith("-")
    names = (str(param.name).upper(),) if argument else (*param.opts, *param.secondary_opts)
    return Param(
        command=command,
        names=tuple(names),
        kind="argument" if argument else "option",
        type=_type(param),
        default=_default(param),
        required=bool(param.required),
        multiple=bool(param.multiple or param.nargs == -1),
        hidden=bool(getattr(param, "hidden", False)),
        help=param.help or "",
    )


def commands() -> list[Command]:
    """Every command of ``gpuyield``, groups included, depth first in name order."""
    found: list[Command] = []

    def walk(cmd: Any, path: str, hidden: bool) -> None:
        sub = getattr(cmd, "commands", None)
        params = tuple(_param(path, p) for p in cmd.params)
        found.append(
            Command(
                path=path,
                group=sub is not None,
                default=getattr(cmd, "default_command", None),
                hidden=hidden,
                help=(cmd.help or "").strip(),
                params=params,
            )
        )
        for name in sorted(sub or {}):
            child = sub[name]
            walk(child, f"{path} {name}", hidden or bool(getattr(child, "hidden", False)))

    walk(typer.main.get_command(app), "gpuyield", False)
    return found


def grammar_text() -> str:
    """The snapshot: one line per command and per parameter."""
    return "\n".join(line for command in commands() for line in command.lines()) + "\n"
