"""The CLI's grammar (docs/cli.md): the value types and the options every command shares.

A value that does not parse (a duration, count, number, size, time or zone) is a usage error,
exit 2, raised while the command line is read; what the library refuses afterwards is an error,
exit 1. Every such value goes through ``gpuyield.parsing``, as serve's query parameters do.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any, NoReturn, TypeVar

import typer

from gpuyield import parsing
from gpuyield.errors import FieldError

T = TypeVar("T")
V = TypeVar("V")

#: Exit statuses (docs/cli.md): 2 is click's usage error, 3 a check that ran and failed.
EXIT_OK, EXIT_ERROR, EXIT_USAGE, EXIT_CHECK_FAILED = 0, 1, 2, 3

DEFAULT_DB = Path("gpuyield.duckdb")
DEFAULT_ZONE = parsing.DEFAULT_ZONE
DB_HELP = (
    "The store: a DuckDB file, written (and created) by `gpuyield ingest` and `collect`, read by "
    "the reports."
)
TZ_HELP = (
    "Time zone (IANA name) of every time written without an offset: in this command's flags and "
    "in the files it reads."
)
SEED_HELP = "Random seed; with --seeds, the first of consecutive seeds."
SEEDS_HELP = "How many independent seeds (consecutive from --seed) to simulate."
TOP_HELP = "Show the N largest rows, the rest summed in one (0: all)."
JSON_HELP = "Print JSON instead of a table."


def _usage_error_class() -> type[Exception]:
    # typer >= 0.2x vendors click; its usage error is what typer's main loop prints and exits 2
    # for (tests/cli/test_grammar.py fails if an upgrade moves it).
    from typer._click.exceptions import UsageError

    return UsageError


def usage_error(message: str, hint: str | None = None) -> NoReturn:
    """Stop with a usage error (exit 2): options that do not go together, a missing one."""
    from typer._click.globals import get_current_context

    error = _usage_error_class()(message + (f" ({hint})" if hint else ""))
    error.ctx = get_current_context(silent=True)  # type: ignore[attr-defined]
    raise error


def _parser(parse: Callable[[str], Any]) -> Callable[[str], Any]:
    """A typer ``parser``: ``parse`` with its FieldError said as a bad value of the flag typed."""

    def parser(text: str) -> Any:
        if not isinstance(text, str):  # a default typer passes through already parsed
            return text
        try:
            return parse(text)
        except FieldError as error:
            raise typer.BadParameter(error.problem.removeprefix("is ")) from None

    return parser


def duration_option(
    *names: str,
    help: str,
    at_least_s: float = 0.0,
    at_most_s: float = parsing.MAX_DURATION_S,
    example: str = "30m",
    whole_seconds: bool = False,
    **kwargs: Any,
) -> Any:
    """An option whose value is a DURATION (30s, 5m, 1h, 2d); the command receives seconds, a
    float, or with ``whole_seconds`` an int (``1.5m`` is 90; ``0.5s`` is refused)."""

    def parse(text: str) -> float:
        if whole_seconds:
            # A whole number of seconds is at least a bound exactly when it is at least its ceiling.
            least, most = math.ceil(at_least_s), math.floor(at_most_s)
            return parsing.parse_seconds(
                text, field="value", at_least_s=least, at_most_s=most, example=example
            )
        return parsing.parse_duration(
            text, field="value", at_least_s=at_least_s, at_most_s=at_most_s, example=example
        )

    return typer.Option(*names, parser=_parser(parse), metavar="DURATION", help=help, **kwargs)


def seconds_option(*names: str, help: str, **kwargs: Any) -> Any:
    """A DURATION in whole seconds (``1.5m`` is 90; ``0.5s`` is refused); the command gets an int."""
    return duration_option(*names, help=help, whole_seconds=True, **kwargs)


WAIT_HELP = (
    "When another process is writing the store (a collection), wait up to this long for it "
    "instead of failing (0: do not wait)."
)


def wait_option() -> Any:
    """``--wait`` of the commands that read the store (report views, idle-now): seconds."""
    return seconds_option("--wait", help=WAIT_HELP, example="1m", show_default="5s")


DEFAULT_WAIT_S = 5


def count_option(
    *names: str,
    help: str,
    at_least: int = 0,
    at_most: int | None = None,
    example: str = "16k",
    **kwargs: Any,
) -> Any:
    """An option whose value is a COUNT (16, 16k, 1.5M); the command receives an int."""

    def parse(text: str) -> int:
        return parsing.parse_count(
            text, field="value", at_least=at_least, at_most=at_most, example=example
        )

    return typer.Option(*names, parser=_parser(parse), metavar="COUNT", help=help, **kwargs)


def number_option(*names: str, help: str, example: str = "0.4", **kwargs: Any) -> Any:
    """An option whose value is a NUMBER (0.4, 40%, 1.5e12); the command receives a float."""

    def parse(text: str) -> float:
        return parsing.parse_number(text, field="value", example=example)

    return typer.Option(*names, parser=_parser(parse), metavar="NUMBER", help=help, **kwargs)


def size_option(*names: str, help: str, example: str = "4G", **kwargs: Any) -> Any:
    """An option whose value is a SIZE in binary units (4G, 512M, 100k); the command gets bytes."""

    def parse(text: str) -> int:
        return parsing.parse_size(text, field="value", example=example)

    return typer.Option(*names, parser=_parser(parse), metavar="SIZE", help=help, **kwargs)


def instant_option(*names: str, help: str, **kwargs: Any) -> Any:
    """An option whose value is a TIME (ISO 8601); ``epoch_s`` applies --tz to it."""

    def parse(text: str) -> datetime:
        return parsing.read_instant(text, field="value")

    return typer.Option(*names, parser=_parser(parse), metavar="TIME", help=help, **kwargs)


def zone_option() -> Any:
    """``--tz``: one meaning everywhere (TZ_HELP)."""

    def parse(text: str) -> str:
        return parsing.check_zone(text, field="value")

    return typer.Option("--tz", parser=_parser(parse), metavar="ZONE", help=TZ_HELP)


def db_option(*, help: str = DB_HELP) -> Any:
    """``--db``: the store, with one help text."""
    return typer.Option("--db", help=help)


def epoch_s(value: datetime | None, tz: str, field: str) -> int | None:
    """A TIME option's value as epoch seconds (None stays None); ``field`` names it for errors."""
    return None if value is None else parsing.epoch_s(value, tz=tz, field=field)


def warn(message: str) -> None:
    """A warning on stderr, one line (never re-wrapped): stdout stays clean for --json."""
    from gpuyield.cli._common import err_console, shown

    err_console.print(f"[yellow]warning:[/] {shown(message)}", highlight=False)


def renamed(
    *,
    old: str,
    old_value: T | None,
    new: str,
    new_value: V,
    convert: Callable[[T], V],
    example: str,
) -> V:
    """The value of an option renamed in this release: ``new``'s, or the deprecated ``old``
    spelling's converted (with a warning). Both given is a usage error."""
    if old_value is None:
        return new_value
    from typer._click.globals import get_current_context

    ctx = get_current_context(silent=True)
    param = new.removeprefix("--").replace("-", "_")
    source = None if ctx is None else ctx.get_parameter_source(param)
    if source is not None and source.name != "DEFAULT":
        usage_error(f"give {new} or {old}, not both", hint=f"{old} is the old spelling of {new}")
    warn(
        f"{old} is deprecated and goes in the next release: write {new} {example} instead "
        "(docs/cli.md, 'Deprecated spellings')"
    )
    return convert(old_value)


def deprecated_command(old: str, new: str, command: Callable[..., Any]) -> Callable[..., Any]:
    """``command`` under its old name: the same options, a warning first (hidden from --help)."""
    import functools

    @functools.wraps(command)
    def alias(*args: Any, **kwargs: Any) -> Any:
        warn(
            f"`gpuyield {old}` is now `gpuyield {new}`; the old name goes in the next release "
            "(docs/cli.md, 'Deprecated spellings')"
        )
        return command(*args, **kwargs)

    return alias


def exit_check_failed() -> NoReturn:
    """The check ran and failed (doctor, preflight, divergence scan): exit 3."""
    sys.stdout.flush()
    raise typer.Exit(code=EXIT_CHECK_FAILED)
