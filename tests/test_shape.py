"""The code's shape, enforced over src/gpuyield (docs/architecture.md, "Shapes every part follows"):
modules of at most 500 lines, function bodies of at most 50, no ``# fmt: skip`` (it packed code
under the old caps), and no result handed to a caller as ``dict[str, Any]`` or as a bare tuple
(JSON serializers such as ``to_dict`` aside). The caps are ceilings nobody approaches (issue 27):
code split by concept sits well under them, and a module that nears one is split by what it owns,
never into a "part two"."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "gpuyield"
MAX_MODULE_LINES = 500
MAX_FUNCTION_LINES = 50
# ruff format's escape hatch, which once held 66 lines of packed code; formatted code has no need.
FMT_SKIP = "# fmt: " + "skip"
# Serializers and deserializers speak JSON/TOML by design.
SERIALIZERS = frozenset({"to_dict", "from_dict", "to_row"})

# Known exceptions, each with why it is not fixed yet. Shrink this list; never grow it silently.
ALLOWED: dict[str, str] = {}


@dataclass(frozen=True, kw_only=True, slots=True)
class Finding:
    where: str
    what: str
    detail: str


def _modules() -> list[Path]:
    return sorted(SRC.rglob("*.py"))


def _name(path: Path) -> str:
    return str(path.relative_to(SRC))


def _body_lines(node: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    body = node.body
    first = body[1] if len(body) > 1 and isinstance(body[0], ast.Expr) else body[0]
    return (node.end_lineno or first.lineno) - first.lineno + 1


def _is_bare_tuple(annotation: ast.expr) -> bool:
    """``tuple[A, B]`` (a fixed shape) but not ``tuple[A, ...]`` (a sequence)."""
    if isinstance(annotation, ast.BinOp):  # X | Y
        return _is_bare_tuple(annotation.left) or _is_bare_tuple(annotation.right)
    if not (isinstance(annotation, ast.Subscript) and ast.unparse(annotation.value) == "tuple"):
        return False
    items = annotation.slice.elts if isinstance(annotation.slice, ast.Tuple) else [annotation.slice]
    return not (len(items) == 2 and isinstance(items[1], ast.Constant) and items[1].value is ...)


def _is_any_dict(annotation: ast.expr) -> bool:
    return "dict[str, Any]" in ast.unparse(annotation)


def _public_functions(tree: ast.Module) -> Iterator[ast.FunctionDef | ast.AsyncFunctionDef]:
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            yield node
        elif isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
            yield from (n for n in node.body if isinstance(n, ast.FunctionDef))


def _long_functions(tree: ast.Module) -> Iterator[ast.FunctionDef | ast.AsyncFunctionDef]:
    """Every function over the length limit: public or private, a method or nested in another."""
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
            and _body_lines(node) > MAX_FUNCTION_LINES
        ):
            yield node


def _findings() -> Iterator[Finding]:
    for path in _modules():
        text = path.read_text(encoding="utf-8")
        name = _name(path)
        if text.count("\n") > MAX_MODULE_LINES:
            yield Finding(where=name, what="module lines", detail=str(text.count("\n")))
        for number, line in enumerate(text.splitlines(), 1):
            if FMT_SKIP in line:
                yield Finding(where=f"{name}:{number}", what="fmt skip", detail=line.strip())
        tree = ast.parse(text)
        for node in _long_functions(tree):
            yield Finding(
                where=f"{name}:{node.name}", what="function lines", detail=str(_body_lines(node))
            )
        private_module = any(part.startswith("_") for part in path.relative_to(SRC).parts[:-1])
        if private_module or (path.name.startswith("_") and path.name != "__init__.py"):
            continue
        for fn in _public_functions(tree):
            if fn.name.startswith("_") or fn.name in SERIALIZERS:
                continue
            params = [a.annotation for a in (*fn.args.args, *fn.args.kwonlyargs) if a.annotation]
            for annotation in [*params, *([fn.returns] if fn.returns else [])]:
                if _is_bare_tuple(annotation):
                    yield Finding(
                        where=f"{name}:{fn.name}", what="bare tuple", detail=ast.unparse(annotation)
                    )
            if fn.returns is not None and _is_any_dict(fn.returns):
                yield Finding(
                    where=f"{name}:{fn.name}", what="dict[str, Any]", detail=ast.unparse(fn.returns)
                )


def test_the_code_keeps_its_shape() -> None:
    found = [f for f in _findings() if ALLOWED.get(f.where) != f.what]
    assert not found, "\n".join(f"{f.where}: {f.what} ({f.detail})" for f in found)


def test_every_allowed_exception_still_exists() -> None:
    """An exception fixed must leave the list, so the list only shrinks."""
    present = {(f.where, f.what) for f in _findings()}
    stale = sorted(k for k, v in ALLOWED.items() if (k, v) not in present)
    assert not stale, f"fixed, remove from ALLOWED: {stale}"


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("def f() -> tuple[int, str]: ...", "bare tuple"),
        ("def f(x: tuple[int, int]) -> None: ...", "bare tuple"),
        ("def f() -> dict[str, Any]: ...", "dict[str, Any]"),
        ("def f() -> tuple[int, ...]: ...", None),
        ("def to_dict() -> dict[str, Any]: ...", None),
        ("def _f() -> tuple[int, str]: ...", None),
    ],
)
def test_the_checks_see_what_they_should(tmp_path: Path, source: str, expected: str | None) -> None:
    tree = ast.parse(source)
    (fn,) = _public_functions(tree)
    skip = fn.name.startswith("_") or fn.name in SERIALIZERS
    annotations = [a.annotation for a in fn.args.args if a.annotation] + [fn.returns]
    kinds = set()
    if not skip:
        kinds |= {"bare tuple" for a in annotations if a is not None and _is_bare_tuple(a)}
        kinds |= {"dict[str, Any]" for a in [fn.returns] if a is not None and _is_any_dict(a)}
    assert kinds == ({expected} if expected else set())


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("def f():\n" + "    x = 1\n" * 51, ["f"]),
        ("def _helper():\n" + "    x = 1\n" * 51, ["_helper"]),
        ("def f():\n    def _inner():\n" + "        x = 1\n" * 51, ["f", "_inner"]),
        ("class _C:\n    def _m(self):\n" + "        x = 1\n" * 51, ["_m"]),
        ("def _helper():\n" + "    x = 1\n" * 50, []),
    ],
)
def test_the_length_check_sees_every_function(source: str, expected: list[str]) -> None:
    assert [fn.name for fn in _long_functions(ast.parse(source))] == expected
