"""Errors raised by gpuyield.

Every error the library raises on purpose derives from one root, so the CLI can catch exactly these,
print the message and the hint, and exit with status 1 (no traceback). The whole tree, with the
module of each class defined outside this one (tests/test_errors.py finds every subclass in the
package here, under its own parent)::

    GpuyieldError                 root; carries a one-line ``hint`` saying how to fix it
    ├── InputError (ValueError)   the user's input is wrong: a value, a file, a config value
    │   ├── FieldError            a library value is invalid: carries ``field`` (``simulate.days``)
    │   ├── ParseError            a malformed file: carries ``path``, ``line`` and ``field``
    │   │   └── UnknownFormat     a file whose format cannot be recognised
    │   ├── ManifestError         the release manifest is inconsistent (unknown run, bad regex)
    │   ├── UnknownIdError        an id not in a catalog or scenario list; carries close matches
    │   ├── EmptyDataError        a command needs data that is not in the database yet
    │   ├── CoverageGapError      a window reaches outside the captured time (ledger.coverage)
    │   └── CollectError          a Slurm command failed; carries ``command`` (ingest.collect_commands)
    ├── ConservationError         the ledger's categories do not add up to installed GPU-seconds
    ├── DataConsistencyError      inputs contradict each other (a job on a node with no capacity)
    ├── DivergenceError           the watch, told to raise, saw training diverge (guard.watch_types)
    ├── TrainRunError             a train-ft run did not finish (train.launch)
    ├── ProjectionRefused         a what-if fit too far from its replay to project (whatif.api)
    └── MissingExtraError         an optional dependency is not installed; the hint is the pip line

Library errors name what a Python caller passed (``FieldError("simulate.days", ...)``), never a
CLI flag; ``renamed`` lets a front end say the same with its own names (the CLI's ``--duration``,
serve's ``until``). ``assert`` is used only for internal invariants, never for user input.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path


class GpuyieldError(Exception):
    """Root of every error gpuyield raises on purpose."""

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return self.message


class InputError(GpuyieldError, ValueError):
    """The user's input (a flag, a value, a config file) is invalid."""


class FieldError(InputError):
    """A value given to the library is invalid; ``field`` names it as the library does.

    The message is ``"<field> <problem>"`` (``simulate.days must be > 0``), or ``"<field><problem>"``
    when the problem starts with a colon (``estimate.tokens: cannot read 'x' as a number``).
    Library field names are ``area.parameter`` (the parameter as a Python caller passes it), so
    a front end can say the same in its own words: ``renamed`` puts the CLI's flag (``--duration``)
    or serve's query parameter (``until``) in place of every field it knows. ``example`` is a
    valid value, for a hint in either spelling.
    """

    def __init__(
        self, field: str, problem: str, *, example: str | None = None, hint: str | None = None
    ) -> None:
        # A front end writes its own hint from the example (``pass e.g. --duration 7d``) unless the
        # library wrote one: so it remembers which it was.
        self.hint_is_example = hint is None and example is not None
        if self.hint_is_example:
            hint = f"set {field} to e.g. {example}"
        super().__init__(f"{field}{_joiner(problem)}{problem}", hint=hint)
        self.field = field
        self.problem = problem
        self.example = example


def _joiner(problem: str) -> str:
    return "" if problem.startswith(":") else " "


def renamed(
    error: GpuyieldError,
    names: Mapping[str, str],
    *,
    example_hint: Callable[[str, str], str],
) -> GpuyieldError:
    """``error`` in a front end's words: every library field in ``names`` replaced by its name.

    Fields appear in the message and hint of any error (a window's bounds in a coverage gap, a
    flag-free hint naming another field); a ``FieldError`` with an ``example`` gets the front
    end's own hint (``example_hint(name, example)``: ``pass e.g. --duration 7d``, ``e.g. top=7``).
    An error that names no known field is returned as it is.
    """
    if not names:
        return error
    pattern = re.compile(
        r"(?<![\w.])("
        + "|".join(re.escape(k) for k in sorted(names, key=len, reverse=True))
        + r")(?!\w)"
    )

    def words(text: str) -> str:
        return pattern.sub(lambda m: names[m.group(1)], text)

    message, hint = words(error.message), error.hint
    if isinstance(error, FieldError) and error.hint_is_example and error.field in names:
        hint = example_hint(names[error.field], error.example or "")
    elif hint is not None:
        hint = words(hint)
    if message == error.message and hint == error.hint:
        return error
    # The same error (its type and fields: a ParseError's path and line), in other words.
    # (Not copy.copy: an exception copies by calling its class with its args, which the
    # subclasses' own constructors do not take.)
    said = type(error).__new__(type(error), message)
    said.__dict__.update(vars(error))
    said.message, said.hint = message, hint
    return said


class ParseError(InputError):
    """A file could not be parsed; names the file, the 1-based line and the field."""

    def __init__(
        self,
        message: str,
        *,
        path: str | Path | None = None,
        line: int | None = None,
        field: str | None = None,
        hint: str | None = None,
    ) -> None:
        self.path = str(path) if path is not None else None
        self.line = line
        self.field = field
        where = ":".join(str(p) for p in (self.path, line) if p is not None)
        prefix = f"{where}: " if where else ""
        in_field = f" (field {field})" if field else ""
        super().__init__(f"{prefix}{message}{in_field}", hint=hint)
        self.reason = message


class UnknownFormat(ParseError):
    """A file whose format could not be recognised (a parse error of the whole file)."""


class ManifestError(InputError):
    """The release manifest is invalid or names something that does not exist."""

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        # Every manifest error says where the format is written down, at least.
        super().__init__(message, hint=hint or "see docs/manifest.md for the manifest's format")


class UnknownIdError(InputError):
    """An id that is not known; ``choices`` are the closest known ids."""

    def __init__(self, kind: str, value: str, known: Iterable[str]) -> None:
        known_list = sorted(known)
        self.choices = closest(value, known_list)
        hint = (
            f"did you mean {', '.join(repr(c) for c in self.choices)}?"
            if self.choices
            else f"known {kind}s: {', '.join(known_list[:12])}"
        )
        super().__init__(f"unknown {kind} {value!r}", hint=hint)
        self.kind = kind
        self.value = value


class EmptyDataError(InputError):
    """A command needs data that has not been ingested."""


class ConservationError(GpuyieldError):
    """Ledger categories do not sum to installed GPU-seconds. Always a bug or contradictory data."""


class DataConsistencyError(GpuyieldError):
    """Inputs contradict each other, e.g. a job allocated more GPUs than its nodes have."""


class MissingExtraError(GpuyieldError):
    """An optional dependency is missing; the hint is the install line."""

    def __init__(self, extra: str, module: str) -> None:
        super().__init__(
            f"this feature needs the optional dependency {module!r}",
            hint=f"pip install 'gpuyield[{extra}]'",
        )
        self.extra = extra
        self.module = module


def closest(value: str, known: Iterable[str], n: int = 3) -> list[str]:
    """The known names closest to ``value`` (for "did you mean" hints)."""
    import difflib  # only when a name is wrong: the submit-time check never needs it

    return difflib.get_close_matches(value, list(known), n=n, cutoff=0.5)
