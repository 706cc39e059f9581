"""Run families and the scaling-ladder policy: the manifest's ``[[families]]`` and ``[ladder]``.

The essay's remedy for runs that "realize they are bad ideas half way through": run the idea on one
GPU, then one 8-GPU machine, then bigger, before the big run. A *family* is the set of runs that try
one idea at different sizes; the *ladder* is the sequence of GPU counts (rungs) a family must climb::

    [[families]]
    name = "llama-arch-v3"
    runs = "llama3-*"              # a glob over run names, or "re:<regex>" (whole name), or a list

    [ladder]
    rungs = [1, 8, 64, 512]        # GPUs
    within_days = 30               # the lower rung's completed run must be this recent

A job may also name its family itself, beside its run: ``--comment=run=r7,family=llama-arch-v3``;
that wins over the manifest's patterns. Rules (docs/ladder.md): a run on ``g`` GPUs sits on the
first rung ``>= g`` (above the top rung: past the ladder); on rung ``k > 0`` it needs a COMPLETED job
of the same family on at least ``rungs[k-1]`` GPUs that ended within ``within_days`` before it started.
"""

from __future__ import annotations

import math
import re
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpuyield import duck
from gpuyield.errors import ManifestError

if TYPE_CHECKING:
    import duckdb

# The rungs the issue and the essay name (one GPU, one 8-GPU machine, then x8 each step).
DEFAULT_RUNGS = (1, 8, 64, 512)
DEFAULT_WITHIN_DAYS = 30.0
# Families in one manifest: a lab has tens; thousands of patterns are a generated file gone wrong.
MAX_FAMILIES = 1_000
MAX_WITHIN_DAYS = 36_500  # a century: longer than any cluster keeps accounting
MAX_RUNG_GPUS = 10_000_000  # more GPUs than any cluster has
# A job's own ``family=`` key in its comment, next to ``run=``.
COMMENT_FAMILY_PATTERN = r"family=([^,\s]+)"
_REGEX_PREFIX = "re:"
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:/+-]*$")


@dataclass(frozen=True, kw_only=True, slots=True)
class Family:
    """Runs that try one idea at different sizes."""

    name: str
    """Family name (what ``preflight --family`` takes)."""
    patterns: tuple[str, ...]
    """Anchored regexes over run names (globs translated), for Python and SQL engines alike."""
    written: tuple[str, ...]
    """The patterns as the manifest wrote them, for messages."""

    def matches(self, run: str) -> bool:
        """True when the run belongs to the family by its name (RE2: linear time)."""
        return first_match(self.patterns, run) is not None

    @classmethod
    def from_dict(cls, item: dict[str, Any]) -> Family:
        """A family from the manifest's stored JSON (``dataclasses.asdict`` of it)."""
        return cls(
            name=item["name"], patterns=tuple(item["patterns"]), written=tuple(item["written"])
        )


@dataclass(frozen=True, kw_only=True, slots=True)
class LadderPolicy:
    """The rungs (GPU counts) a family climbs and how recent the lower rung must be."""

    rungs: tuple[int, ...] = DEFAULT_RUNGS
    """Strictly increasing GPU counts."""
    within_days: float = DEFAULT_WITHIN_DAYS
    """The completed lower-rung run must have ended at most this many days before."""

    @property
    def within_s(self) -> int:
        """``within_days`` in seconds."""
        return round(self.within_days * 86400)

    def rung_index(self, gpus: int) -> int:
        """Index of the first rung ``>= gpus``; ``len(rungs)`` past the top rung."""
        return next((k for k, r in enumerate(self.rungs) if r >= gpus), len(self.rungs))

    def required_gpus(self, gpus: int) -> int | None:
        """GPUs of the completed run a run on ``gpus`` needs first (None on the first rung)."""
        k = self.rung_index(gpus)
        return None if k == 0 else self.rungs[k - 1]

    def missing_rungs(self, gpus: int, reached_gpus: int | None) -> tuple[int, ...]:
        """Rungs below a run on ``gpus`` that nothing completed reached (``reached_gpus``)."""
        below = self.rungs[: self.rung_index(gpus)]
        return tuple(r for r in below if reached_gpus is None or r > reached_gpus)

    def rung_label(self, gpus: int) -> str:
        """The rung a run on ``gpus`` sits on, as text (``16`` or ``past 512``)."""
        k = self.rung_index(gpus)
        return str(self.rungs[k]) if k < len(self.rungs) else f"past {self.rungs[-1]}"


def glob_regex(glob: str, where: str = "glob") -> str:
    """A glob over run names (``*``, ``?``, ``[...]``, ``[!...]``) as an anchored regex.

    Matched by RE2 (``first_match``, and DuckDB in the ledger), which runs in time linear in the
    name whatever the pattern: ``a*a*a*...`` cannot backtrack. A class must read the same to every
    engine, so a reversed range (``[z-a]``) and POSIX classes (``[[:alpha:]]``) are refused with
    ``where`` named, not passed on to fail later. An unclosed ``[`` is a literal, as in fnmatch.
    """
    parts = ["^"]
    i = 0
    while i < len(glob):
        char = glob[i]
        end = _class_end(glob, i) if char == "[" else -1
        if char == "*":
            parts.append(".*")
        elif char == "?":
            parts.append(".")
        elif end > 0:
            parts.append(_class_regex(glob[i + 1 : end], glob, where))
            i = end
        else:
            parts.append(re.escape(char))
        i += 1
    parts.append("$")
    return "".join(parts)


def _class_end(glob: str, start: int) -> int:
    """Index of the ``]`` closing the class opened at ``start`` (a ``]`` first in the class is
    a member, as in fnmatch), or -1 when it is not closed."""
    i = start + 1
    if i < len(glob) and glob[i] == "!":
        i += 1
    if i < len(glob) and glob[i] == "]":
        i += 1
    return glob.find("]", i)


def _class_regex(body: str, glob: str, where: str) -> str:
    # Only ``!`` negates, as in fnmatch: a leading ``^`` is a member there (``[^]`` is "^").
    negate = body[:1] == "!"
    members = body[1:] if negate else body
    if "[:" in members or "[=" in members or "[." in members:
        raise ManifestError(
            f"{where}: {glob!r} uses a POSIX class ([:alpha:] and the like), which globs here "
            "do not support",
            hint="list the characters instead, e.g. [a-zA-Z] or [0-9]",
        )
    out = []
    i = 0
    while i < len(members):
        if i + 2 < len(members) and members[i + 1] == "-":
            low, high = members[i], members[i + 2]
            if low > high:
                raise ManifestError(
                    f"{where}: {glob!r} has the range {low}-{high}, which is reversed",
                    hint=f"write it low to high: [{high}-{low}]",
                )
            out.append(f"{_class_char(low)}-{_class_char(high)}")
            i += 3
        else:
            out.append(_class_char(members[i]))
            i += 1
    return "[" + ("^" if negate else "") + "".join(out) + "]"


def _class_char(char: str) -> str:
    """A character inside a regex class, escaped where a class gives it meaning."""
    return "\\" + char if char in "\\]^-[" else char


# Constructs Python's re accepts and RE2 (the engine every pattern is matched with) does not.
RE2_UNSUPPORTED = (
    ("(?=", "lookahead (?=...)"),
    ("(?!", "negative lookahead (?!...)"),
    ("(?<=", "lookbehind (?<=...)"),
    ("(?<!", "negative lookbehind (?<!...)"),
    ("(?P=", "backreference (?P=name)"),
    ("(?>", "atomic group (?>...)"),
    ("\\Z", "\\Z (use \\z or $)"),
)
RE2_HINT = (
    "rewrite it without lookarounds, backreferences or atomic groups; "
    "e.g. run=(?P<run>[^,]+) instead of run=(?P<run>.+?)(?=,|$)"
)
_BACKREFERENCE = re.compile(r"\\[1-9]")
_SYNTAX_HINT = "check the regex's syntax (RE2's: Python's without lookarounds or backreferences)"


def re2_hint(problem: str) -> str:
    """The hint that fits ``re2_problem``'s answer: a construct RE2 lacks, or a syntax error."""
    named = any(problem == name for _, name in RE2_UNSUPPORTED) or "backreference" in problem
    return RE2_HINT if named else _SYNTAX_HINT


def re2_problem(pattern: str, con: duckdb.DuckDBPyConnection | None = None) -> str | None:
    """Why RE2 (DuckDB's regex engine) rejects ``pattern``, naming the construct; None when it
    takes it."""
    try:
        if con is None:
            with _ENGINE_LOCK:
                _engine().execute("SELECT regexp_matches('', ?)", [pattern]).fetchall()
        else:
            con.execute("SELECT regexp_matches('', ?)", [pattern]).fetchall()
    except duck.engine().Error as error:
        construct = next((name for text, name in RE2_UNSUPPORTED if text in pattern), None)
        if construct is None and _BACKREFERENCE.search(pattern):
            construct = "a backreference (\\1)"
        return construct or str(error).splitlines()[0]
    return None


def first_match(
    patterns: Sequence[str], text: str, con: duckdb.DuckDBPyConnection | None = None
) -> int | None:
    """The index of the first anchored pattern that matches ``text``, or None.

    RE2 through DuckDB: time linear in the text for any pattern (Python's ``re`` took 88 s on a
    41-character name against a glob with 12 ``*``). One statement for all the patterns; on
    ``con`` when given (a store already open: no second database to start)."""
    if not patterns:
        return None
    sql = """SELECT min(i) FROM (SELECT unnest(?) AS p, generate_subscripts(?, 1) AS i)
             WHERE regexp_matches(?, p)"""
    values = [list(patterns), list(patterns), text]
    if con is not None:
        row = con.execute(sql, values).fetchone()
    else:
        with _ENGINE_LOCK:
            row = _engine().execute(sql, values).fetchone()
    return None if row is None or row[0] is None else int(row[0]) - 1


_ENGINE_LOCK = threading.Lock()
_ENGINE: list[duckdb.DuckDBPyConnection] = []


def _engine() -> duckdb.DuckDBPyConnection:
    """A private in-memory DuckDB for matching (extensions never loaded, as store.py's): plain
    queries only, so DuckDB's engine alone (``gpuyield.duck``) serves."""
    if not _ENGINE:
        _ENGINE.append(
            duck.engine().connect(
                ":memory:",
                config={"autoinstall_known_extensions": False, "autoload_known_extensions": False},
            )
        )
    return _ENGINE[0]


def parse_families(items: Any, path: Path) -> tuple[Family, ...]:
    """Validate ``[[families]]``: unique names, at least one valid pattern each."""
    if not isinstance(items, list):
        raise ManifestError(
            f"{path}: families must be an array of tables", hint='write [[families]] name = "x"'
        )
    if len(items) > MAX_FAMILIES:
        raise ManifestError(
            f"{path}: families: {len(items):,} families, more than {MAX_FAMILIES:,}",
            hint="a family groups the runs of one idea; use a pattern for many runs",
        )
    families = tuple(_parse_family(item, path, i) for i, item in enumerate(items))
    # The ledger first tries every pattern at once (one RE2 automaton): it must compile too.
    problem = re2_problem(any_pattern(families)) if families else None
    if problem is not None:
        raise ManifestError(
            f"{path}: families: the patterns together are more than the query engine (RE2) "
            f"takes: {problem}",
            hint="use fewer or shorter patterns (a glob like llama3-* covers many runs)",
        )
    seen: set[str] = set()
    for family in families:
        if family.name in seen:
            raise ManifestError(f"{path}: families: name {family.name!r} is declared twice")
        seen.add(family.name)
    return families


def _parse_family(item: Any, path: Path, index: int) -> Family:
    where = f"families[{index}]"
    if not isinstance(item, dict):
        raise ManifestError(f"{path}: {where} must be a table with name and runs")
    unknown = set(item) - {"name", "runs"}
    if unknown:
        raise ManifestError(
            f"{path}: {where}: unknown key {sorted(unknown)[0]!r}", hint="known: name, runs"
        )
    name = item.get("name")
    if not isinstance(name, str) or not _NAME.match(name):
        raise ManifestError(
            f"{path}: {where}.name must be a name without spaces or commas, got {name!r}",
            hint='e.g. name = "llama-arch-v3"',
        )
    runs = item.get("runs")
    written = (runs,) if isinstance(runs, str) else runs
    if not isinstance(written, list | tuple) or not written:
        raise ManifestError(
            f"{path}: {where}.runs must be a glob, 're:<regex>' or a list of them",
            hint='e.g. runs = "llama3-*" or runs = "re:llama3-(small|big)-\\\\d+"',
        )
    patterns = tuple(_pattern(p, path, f"{where}.runs") for p in written)
    return Family(name=name, patterns=patterns, written=tuple(written))


# A pattern names run names: longer than this it is a mistake (and RE2 compiles it each query).
_MAX_PATTERN_CHARS = 1000


def _pattern(text: Any, path: Path, where: str) -> str:
    if not isinstance(text, str) or not text or len(text) > _MAX_PATTERN_CHARS:
        raise ManifestError(
            f"{path}: {where}: every pattern must be a string of 1 to {_MAX_PATTERN_CHARS} "
            "characters",
            hint='e.g. runs = "llama3-*"',
        )
    if not text.startswith(_REGEX_PREFIX):
        regex = glob_regex(text, f"{path}: {where}")
    else:
        # Anchored: a family's regex names whole run names, in every engine alike.
        regex = f"^(?:{text[len(_REGEX_PREFIX) :]})$"
    # Checked by the engine that will match it, now, with the field named: not a DuckDB error
    # in the middle of a report.
    problem = re2_problem(regex)
    if problem is not None:
        raise ManifestError(
            f"{path}: {where}: {text!r} is not a valid regex for the query engine (RE2): {problem}",
            hint=re2_hint(problem),
        )
    return regex


def parse_ladder(item: Any, path: Path) -> LadderPolicy:
    """Validate ``[ladder]``: increasing positive whole rungs, a positive ``within_days``."""
    if not isinstance(item, dict):
        raise ManifestError(f"{path}: ladder must be a table", hint="write [ladder] rungs = [1, 8]")
    unknown = set(item) - {"rungs", "within_days"}
    if unknown:
        raise ManifestError(
            f"{path}: ladder: unknown key {sorted(unknown)[0]!r}", hint="known: rungs, within_days"
        )
    rungs = item.get("rungs", list(DEFAULT_RUNGS))
    if (
        not isinstance(rungs, list)
        or not rungs
        or not all(
            isinstance(r, int) and not isinstance(r, bool) and 0 < r <= MAX_RUNG_GPUS for r in rungs
        )
        or any(b <= a for a, b in pairwise(rungs))
    ):
        raise ManifestError(
            f"{path}: ladder.rungs must be increasing positive GPU counts (at most "
            f"{MAX_RUNG_GPUS:,}), got {rungs!r}",
            hint="e.g. rungs = [1, 8, 64, 512]",
        )
    within = item.get("within_days", DEFAULT_WITHIN_DAYS)
    # Finite and at most a century: inf (or 1e300) days made every report's window arithmetic
    # overflow, and NaN compares false with everything.
    if (
        isinstance(within, bool)
        or not isinstance(within, int | float)
        or not math.isfinite(within)
        or not 0 < within <= MAX_WITHIN_DAYS
    ):
        raise ManifestError(
            f"{path}: ladder.within_days must be a number of days from 0 to {MAX_WITHIN_DAYS:,} "
            f"(not 0), got {within!r}",
            hint="e.g. within_days = 30",
        )
    return LadderPolicy(rungs=tuple(rungs), within_days=float(within))


def any_pattern(families: Sequence[Family]) -> str:
    """One regex matching a run name any family's pattern matches."""
    return "|".join(f"(?:{p})" for f in families for p in f.patterns)
