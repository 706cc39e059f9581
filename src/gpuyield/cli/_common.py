"""What every command shares: error mapping, JSON output, the console."""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any, NoReturn, TypeVar

import typer
from rich.console import Console
from rich.markup import escape
from rich.text import Text
from typer.core import TyperGroup

from gpuyield.errors import FieldError, GpuyieldError, InputError
from gpuyield.safetext import visible

T = TypeVar("T")


class _Console(Console):
    """Rich's console, except that a message is never re-wrapped off a terminal.

    Off a terminal (cron mail, logs, a test's pipe) Rich hard-wraps text at 80 columns and splits
    a path mid-word; a message printed as a string stays one line there (on a terminal the terminal
    wraps it). Tables and other renderables keep Rich's layout: cropping them would lose data.
    """

    def print(self, *objects: Any, soft_wrap: bool | None = None, **kwargs: Any) -> None:
        if soft_wrap is None and all(isinstance(o, str) for o in objects):
            soft_wrap = not self.is_terminal
        super().print(*objects, soft_wrap=soft_wrap, **kwargs)


class PlainUsageErrors(TyperGroup):
    """The root command: off a terminal a usage error (exit 2) is click's plain lines.

    Typer draws usage errors in a box 80 columns wide, re-wrapping the message inside it; cron
    mail, logs and tests get ``Error: ...`` on one line instead. On a terminal, the box.
    """

    def main(self, *args: Any, **kwargs: Any) -> Any:
        # typer.core._main is what TyperGroup.main calls; its rich_markup_mode only chooses how
        # a click error is printed (help keeps this group's own mode). tests/test_cli_messages.py
        # fails if a typer upgrade changes that.
        from typer.core import _main

        boxed = sys.stderr.isatty()
        names = ("args", "prog_name", "complete_var", "standalone_mode", "windows_expand_args")
        kwargs.update(zip(names, args, strict=False))
        mode = self.rich_markup_mode if boxed else None
        return _main(self, rich_markup_mode=mode, **kwargs)


console = _Console()
err_console = _Console(stderr=True)


def shown(value: object) -> str:
    """User-controlled text (a run, user, account, family, path, a value quoted in a warning)
    as it may go into a Rich markup string: control characters written out (``\\x1b``) and
    markup escaped (a job comment ``[/x]`` made ``ladder`` raise for everyone).

    The one way such text reaches the terminal: ``cell`` for table cells, ``plain`` where
    markup is off; tests/hostile/test_printing.py runs every command on a hostile store.
    """
    return escape(visible(str(value)))


def plain(value: object) -> str:
    """User-controlled text for a print with ``markup=False``: control characters written out."""
    return visible(str(value))


def cell(value: object) -> Text:
    """A table cell of user-controlled text: a ``Text`` (never read as markup), made visible."""
    return Text(visible(str(value)))


def fail(error: GpuyieldError) -> NoReturn:
    """Print a library error as one line plus its hint, and exit 1 (no traceback)."""
    # Escaped: messages and hints quote user text and pip lines like 'gpuyield[html]'.
    # Control characters too: messages quote input lines, which may carry terminal escapes.
    err_console.print(f"[bold red]error:[/] {shown(error.message)}", highlight=False)
    if error.hint:
        err_console.print(f"[bold]hint:[/] {shown(error.hint)}", highlight=False)
    raise typer.Exit(code=1)


def as_flag(error: FieldError, flags: Mapping[str, str]) -> GpuyieldError:
    """The same error in the user's words: the library's field name replaced by the flag typed."""
    flag = flags.get(error.field)
    if flag is None:
        return error
    hint = f"pass e.g. {flag} {error.example}" if error.example is not None else error.hint
    return GpuyieldError(f"{flag} {error.problem}", hint=hint)


@contextmanager
def errors_mapped(flags: Mapping[str, str] | None = None) -> Iterator[None]:
    """Map ``GpuyieldError`` to a clean CLI message; anything else is a bug and keeps its traceback.

    ``flags`` maps library field names (``simulate.days``) to the command's flags (``--days``).
    """
    try:
        yield
    except FieldError as error:
        fail(as_flag(error, flags or {}))
    except GpuyieldError as error:
        fail(error)


_UNITS_S = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_duration(text: str, option: str) -> int:
    """``90``, ``90s``, ``30m``, ``1h``, ``2d`` as seconds."""
    match = re.fullmatch(r"\s*(\d+)\s*([smhd]?)\s*", text)
    if match is None:
        raise InputError(f"{option}: not a duration: {text!r}", hint="write it like 1h, 30m or 90s")
    return int(match.group(1)) * _UNITS_S[match.group(2) or "s"]


#: ``--wait`` of the commands that read the store (report, ladder, idle-now).
WAIT_HELP = (
    "When another process is writing the store (a collection: seconds), wait up to this long "
    "for it instead of failing (30s, 2m; 0: do not wait). Default: 5s."
)
DEFAULT_WAIT = "5s"


@contextmanager
def waiting_for_store(wait: str) -> Iterator[None]:
    """Opening the store inside the block waits up to ``--wait`` for a writer to finish."""
    from gpuyield.store import waiting_for_writer

    with waiting_for_writer(parse_duration(wait, "--wait")):
        yield


def call(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """Call one library function with errors mapped."""
    with errors_mapped():
        return fn(*args, **kwargs)


def print_json(data: Any) -> None:
    """Write JSON to stdout without Rich markup, so it can be piped."""
    sys.stdout.write(json.dumps(data, indent=2, sort_keys=False, default=str))
    sys.stdout.write("\n")
