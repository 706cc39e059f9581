"""The error tree drawn in errors.py's docstring is the package's: every GpuyieldError subclass,
under its own parent, with the module it lives in when that is not errors.py."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import gpuyield.errors

SRC = Path(__file__).resolve().parents[1] / "src" / "gpuyield"
# A line of the drawing: the branch characters, the class name, and what follows it.
_LINE = re.compile(r"^(?P<indent>[│├└─ ]*)(?P<name>[A-Z]\w+)\b(?P<rest>.*)$")


def _classes() -> dict[str, tuple[str, str]]:
    """Every GpuyieldError subclass in the source: name -> (parent, module), found by walking
    the class definitions from the root (so one defined anywhere in the package is found)."""
    defined: dict[str, tuple[list[str], str]] = {}
    for path in sorted(SRC.rglob("*.py")):
        module = ".".join(path.relative_to(SRC).with_suffix("").parts)
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef):
                bases = [ast.unparse(b).rsplit(".", 1)[-1] for b in node.bases]
                assert node.name not in defined or node.name not in _family(defined), node.name
                defined[node.name] = (bases, module)
    family = _family(defined)
    return {
        name: (next(b for b in bases if b in family), module)
        for name, (bases, module) in defined.items()
        if name in family and name != "GpuyieldError"
    }


def _family(defined: dict[str, tuple[list[str], str]]) -> set[str]:
    found = {"GpuyieldError"}
    while grown := {c for c, (b, _) in defined.items() if set(b) & found} - found:
        found |= grown
    return found


def _drawn() -> dict[str, tuple[str, str]]:
    """The docstring's tree: name -> (parent, the rest of its line)."""
    doc = gpuyield.errors.__doc__ or ""
    block = doc.split("::\n", 1)[1].strip("\n").split("\n\n")[0]
    parents: list[str] = []
    drawn: dict[str, tuple[str, str]] = {}
    for line in block.splitlines():
        match = _LINE.match(line[4:])
        assert match, line
        depth = len(match["indent"]) // 4
        del parents[depth:]
        if parents:
            drawn[match["name"]] = (parents[-1], match["rest"])
        parents.append(match["name"])
    return drawn


def test_every_error_class_is_drawn_under_its_parent() -> None:
    classes, drawn = _classes(), _drawn()
    assert {n: p for n, (p, _) in classes.items()} == {n: p for n, (p, _) in drawn.items()}
    assert len(classes) >= 14  # the tree as of this test: a walk that finds nothing fails


def test_a_class_outside_errors_py_says_where_it_lives() -> None:
    drawn = _drawn()
    for name, (_, module) in _classes().items():
        if module != "errors":
            assert f"({module})" in drawn[name][1], f"{name}: say ({module}) in its line"


def test_the_drawing_parser_reads_depth() -> None:
    assert _drawn()["UnknownFormat"][0] == "ParseError"
    assert _drawn()["MissingExtraError"][0] == "GpuyieldError"
