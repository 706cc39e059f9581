"""SQL text never carries a value except through gpuyield.sqltext (issue 26).

A store named ``x'; DROP TABLE jobs; SET temp_directory='y`` once lost its jobs because the path
was pasted into a ``SET`` statement. The rule this file enforces over every module of
``src/gpuyield``: in SQL text built with an f-string (or ``%``, ``.format``, ``+``), each piece put
in is one of

- ``literal(...)`` or ``identifier(...)`` from ``gpuyield.sqltext`` (the one quoting helper);
- an SQL fragment the code built: a name, attribute or call whose name ends in ``_sql`` (every
  f-string inside a ``*_sql`` function and every one assigned to a ``*_sql`` name is checked by
  the same rule, so a fragment is made of checked pieces);
- a module constant (``ALL_CAPS``): the code's own text, never input;
- a literal in the code, or a choice between such (``'true' if x else 'false'``);
- a join of such pieces (``", ".join(literal(s) for s in STATES)``).

SQL text is recognised by its keywords (SELECT, FROM, SET...), by being the argument of
``execute``/``sql``/``query``, or by being built in or for a ``*_sql`` name. The checker is shown
to fail on the shapes it forbids (``test_the_rule_catches``).
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

import duckdb
import pytest

from gpuyield import sqltext
from gpuyield.errors import InputError

SRC = Path(__file__).resolve().parents[1] / "src" / "gpuyield"
_KEYWORDS = re.compile(
    r"\b(SELECT|INSERT|DELETE|UPDATE|CREATE|DROP|ALTER|SET|FROM|WHERE|VALUES|COPY|ATTACH|PRAGMA|"
    r"JOIN|UNION|CASE WHEN|read_csv|read_json|regexp_\w+)\b"
)
_RUNNERS = {"execute", "executemany", "sql", "query", "read_csv", "from_query"}
_HELPERS = {"literal", "identifier"}
_CONSTANT = re.compile(r"^_?[A-Z][A-Z0-9_]*$")


@dataclass(frozen=True, kw_only=True, slots=True)
class Violation:
    path: str
    line: int
    text: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.text} put into SQL text"


def _name_of(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Call):
        return _name_of(node.func)
    if isinstance(node, ast.Subscript):
        return _name_of(node.value)
    return None


def _allowed(node: ast.expr, safe: frozenset[str] = frozenset()) -> bool:
    """Whether ``node``, put into SQL text, is a checked piece (see the module's docstring);
    ``safe``: the function's local names assigned only checked pieces."""
    if isinstance(node, ast.Name) and node.id in safe:
        return True
    if isinstance(node, ast.Constant):
        return True
    if isinstance(node, ast.IfExp):
        return _allowed(node.body, safe) and _allowed(node.orelse, safe)
    if isinstance(node, ast.JoinedStr):  # a nested f-string: its pieces are checked in turn
        return all(
            _allowed(v.value, safe) for v in node.values if isinstance(v, ast.FormattedValue)
        )
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return _allowed(node.left, safe) and _allowed(node.right, safe)
    if isinstance(node, ast.Call):
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr == "join" and len(node.args) == 1:
            return _allowed(func.value, safe) and _joined_allowed(node.args[0], safe)
    name = _name_of(node)
    if name is None:
        return False
    if isinstance(node, ast.Call) and name in _HELPERS:
        return True
    return name.endswith("_sql") or bool(_CONSTANT.match(name))


def _joined_allowed(items: ast.expr, safe: frozenset[str]) -> bool:
    if isinstance(items, ast.GeneratorExp | ast.ListComp):
        return _allowed(items.elt, safe)
    if isinstance(items, ast.List | ast.Tuple):
        return all(_allowed(e, safe) for e in items.elts)
    return _allowed(items, safe)


def _safe_locals(function: ast.AST) -> frozenset[str]:
    """Local names every assignment of which (in ``function``'s own body) is a checked piece:
    ``tres = field_sql("alloctres")`` makes ``tres`` as safe as what it was given."""
    assigned: dict[str, list[ast.expr]] = {}
    unsafe: set[str] = set()
    for node in _own_nodes(function):
        if isinstance(node, ast.Assign | ast.AnnAssign) and node.value is not None:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                if isinstance(target, ast.Name):
                    assigned.setdefault(target.id, []).append(node.value)
                elif (  # a, b = x, y: each name gets its own value
                    isinstance(target, ast.Tuple)
                    and isinstance(node.value, ast.Tuple)
                    and len(target.elts) == len(node.value.elts)
                    and all(isinstance(t, ast.Name) for t in target.elts)
                ):
                    for name, value in zip(target.elts, node.value.elts, strict=True):
                        assert isinstance(name, ast.Name)
                        assigned.setdefault(name.id, []).append(value)
                else:  # other unpacking: not followed
                    unsafe.update(n.id for n in ast.walk(target) if isinstance(n, ast.Name))
        elif isinstance(node, ast.AugAssign | ast.For | ast.comprehension | ast.With):
            target = node.target if not isinstance(node, ast.With) else None
            if target is not None:
                unsafe.update(n.id for n in ast.walk(target) if isinstance(n, ast.Name))
        elif isinstance(node, ast.arg):
            unsafe.add(node.arg)
    safe: set[str] = set()
    changed = True
    while changed:  # a fixpoint: a name is safe once all it is assigned is
        changed = False
        for name, values in assigned.items():
            if name in safe or name in unsafe:
                continue
            if all(_allowed(v, frozenset(safe)) for v in values):
                safe.add(name)
                changed = True
    return frozenset(safe)


def _own_nodes(function: ast.AST) -> list[ast.AST]:
    """The nodes of ``function``'s body and arguments, not those of functions nested in it."""
    found: list[ast.AST] = []
    pending: list[ast.AST] = list(ast.iter_child_nodes(function))
    while pending:
        node = pending.pop()
        found.append(node)
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            pending.extend(ast.iter_child_nodes(node))
    return found


def _text_of(node: ast.JoinedStr) -> str:
    return "".join(v.value for v in node.values if isinstance(v, ast.Constant))


class _Checker(ast.NodeVisitor):
    def __init__(self, path: str) -> None:
        self.path = path
        self.violations: list[Violation] = []
        self._in_sql_function = 0
        self._sql_nodes: set[int] = set()  # f-strings known to be SQL by where they go
        self._safe: list[frozenset[str]] = [frozenset()]

    def _flag(self, node: ast.AST, piece: ast.expr) -> None:
        line = getattr(node, "lineno", 0)
        self.violations.append(Violation(path=self.path, line=line, text=ast.unparse(piece)))

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        sql = node.name.endswith("_sql")
        self._in_sql_function += sql
        self._safe.append(_safe_locals(node))
        self.generic_visit(node)
        self._safe.pop()
        self._in_sql_function -= sql

    visit_AsyncFunctionDef = visit_FunctionDef  # type: ignore[assignment]

    def visit_Module(self, node: ast.Module) -> None:
        self._safe = [_safe_locals(node)]
        self.generic_visit(node)

    def visit_Assign(self, node: ast.Assign) -> None:
        if any((_name_of(t) or "").endswith("_sql") for t in node.targets):
            self._mark(node.value)
        self.generic_visit(node)

    def visit_Return(self, node: ast.Return) -> None:
        if self._in_sql_function and node.value is not None:
            self._mark(node.value)
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        called = _name_of(node.func) or ""
        if called in _HELPERS:
            return  # what goes into a helper is a value, quoted whole: any text may build it
        if called in _RUNNERS and node.args:
            self._mark(node.args[0])
        if called.endswith("_sql"):  # a fragment builder's arguments are SQL text too
            for argument in node.args:
                self._mark(argument)
        func = node.func
        if (
            isinstance(func, ast.Attribute)
            and func.attr == "format"
            and isinstance(func.value, ast.Constant)
            and isinstance(func.value.value, str)
            and _KEYWORDS.search(func.value.value)
        ):
            self._flag(node, node)
        self.generic_visit(node)

    def _mark(self, node: ast.AST) -> None:
        """Mark the f-strings in ``node`` as SQL text, but not what goes into a helper: the
        argument of ``literal(f"...")`` is a value, quoted whole."""
        if isinstance(node, ast.Call) and _name_of(node.func) in _HELPERS:
            return
        if isinstance(node, ast.JoinedStr):
            self._sql_nodes.add(id(node))
        for child in ast.iter_child_nodes(node):
            self._mark(child)

    def visit_BinOp(self, node: ast.BinOp) -> None:
        left = node.left
        is_sql_text = (
            isinstance(left, ast.Constant)
            and isinstance(left.value, str)
            and bool(_KEYWORDS.search(left.value))
        )
        if is_sql_text and isinstance(node.op, ast.Mod):
            self._flag(node, node)
        elif (
            is_sql_text
            and isinstance(node.op, ast.Add)
            and not _allowed(node.right, self._safe[-1])
        ):
            self._flag(node, node.right)
        self.generic_visit(node)

    def visit_JoinedStr(self, node: ast.JoinedStr) -> None:
        sql = (
            id(node) in self._sql_nodes
            or self._in_sql_function
            or bool(_KEYWORDS.search(_text_of(node)))
        )
        if sql:
            for value in node.values:
                if isinstance(value, ast.FormattedValue) and not _allowed(
                    value.value, self._safe[-1]
                ):
                    self._flag(node, value.value)
        self.generic_visit(node)


def check_source(text: str, path: str = "<text>") -> list[Violation]:
    tree = ast.parse(text)
    checker = _Checker(path)
    # Two passes: the first marks f-strings by where they go (an execute's argument, a *_sql
    # name), the second checks every f-string with that knowledge.
    marker = _Checker(path)
    marker.visit(tree)
    checker._sql_nodes = marker._sql_nodes
    checker.visit(tree)
    return checker.violations


def test_no_value_is_pasted_into_sql_text() -> None:
    violations = []
    for path in sorted(SRC.rglob("*.py")):
        violations += check_source(path.read_text(encoding="utf-8"), str(path.relative_to(SRC)))
    assert not violations, "\n".join(str(v) for v in violations)


@pytest.mark.parametrize(
    "code",
    [
        "con.execute(f\"SET temp_directory = '{spill}'\")",
        "con.execute(f\"SET memory_limit = '{os.environ.get('X', '3GB')}'\")",
        "con.execute(\"SELECT * FROM jobs WHERE user_name = '%s'\" % user)",
        "con.execute(\"SELECT * FROM jobs WHERE user_name = '{}'\".format(user))",
        'con.execute("DELETE FROM jobs WHERE job_id = \'" + job_id + "\'")',
        "query = f'SELECT * FROM jobs LIMIT {top}'",
        "def where_sql(cluster):\n    return f'cluster = {cluster}'",
        "mine_sql = f'ingest_id = {ingest_id}'",
        "con.sql(f'INSERT INTO t VALUES ({\", \".join(values)})')",
    ],
)
def test_the_rule_catches(code: str) -> None:
    assert check_source(code), code


@pytest.mark.parametrize(
    "code",
    [
        "con.execute('SET temp_directory = ?', [str(spill)])",
        "con.execute(f'SELECT * FROM read_csv({literal(str(path))})')",
        "con.execute(f'DELETE FROM {identifier(table)} WHERE {where_sql}')",
        "con.execute(f'SELECT {\", \".join(literal(s) for s in STATES)} FROM {TABLE}')",
        "print(f'read {path} in {seconds} s')",
    ],
)
def test_the_rule_lets_checked_pieces_through(code: str) -> None:
    assert not check_source(code), code


# --- the helper itself, on hostile strings ---------------------------------------------------

HOSTILE = [
    "x'; DROP TABLE jobs; SET temp_directory='y",
    "'; DROP TABLE jobs; --",
    "it's",
    "back\\slash\\'",
    "''''",
    "\\x27",
    'double"quote',
    "line\nbreak\r\tend",
    "é\u202e✓",
    "$$dollar$$",
    "E'\\''",
]


@pytest.mark.parametrize("value", HOSTILE)
def test_literal_round_trips_hostile_strings(value: str) -> None:
    con = duckdb.connect()
    con.execute("CREATE TABLE jobs (a INT)")
    try:
        assert con.execute(f"SELECT {sqltext.literal(value)}").fetchall() == [(value,)]
        quoted = sqltext.identifier(value)
        assert con.execute(f"SELECT 1 AS {quoted}").description[0][0] == value
        assert con.execute("SELECT count(*) FROM jobs").fetchall() == [(0,)]  # still there
    finally:
        con.close()


@pytest.mark.parametrize(
    ("value", "text"), [(7, "7"), (-3, "(-3)"), (2**70, str(2**70)), (True, "true"), (None, "NULL"),
                        (0.5, "0.5"), (-0.5, "(-0.5)")],
)  # fmt: skip
def test_literal_of_numbers(value: int | float | bool | None, text: str) -> None:
    assert sqltext.literal(value) == text


@pytest.mark.parametrize("value", ["a\x00b", "bad\udcffbyte"])
def test_literal_refuses_what_the_engine_cannot_hold(value: str) -> None:
    with pytest.raises(InputError):
        sqltext.literal(value)


@pytest.mark.parametrize("value", [float("nan"), float("inf")])
def test_literal_refuses_non_finite_numbers(value: float) -> None:
    with pytest.raises(ValueError, match="finite"):
        sqltext.literal(value)


def test_a_negative_literal_after_a_minus_is_not_a_comment() -> None:
    con = duckdb.connect()
    try:
        assert con.execute(f"SELECT 5 - {sqltext.literal(-2)}").fetchall() == [(7,)]
        assert con.execute(f"SELECT 5 -{sqltext.literal(-2)}").fetchall() == [(7,)]
    finally:
        con.close()
