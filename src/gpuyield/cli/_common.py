"""What every command shares: error mapping, JSON output, the console."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any, NoReturn, TypeVar

import typer
from rich.console import Console
from rich.markup import escape
from rich.text import Text
from typer.core import TyperGroup

from gpuyield.cli._fields import FLAGS, Flag
from gpuyield.errors import FieldError, GpuyieldError, renamed
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


class ViewByDefault(TyperGroup):
    """A group with a default command: ``gpuyield report --by user`` is ``report summary --by
    user``. A first word that names no view (an option, or nothing) goes to the first command;
    ``--help`` alone is the group's help, listing the views."""

    #: What a first word that names no view runs (the CLI snapshot shows it).
    default_command = "summary"

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        # ctx is typed loosely: typer vendors its own click.
        if args[:1] != ["--help"] and (not args or args[0] not in self.commands):
            args = [self.default_command, *args]
        return super().parse_args(ctx, args)


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


def as_flag(error: GpuyieldError, flags: Mapping[str, str | Flag] = FLAGS) -> GpuyieldError:
    """The same error in the user's words: every library field it names replaced by the flag
    typed (``FLAGS``), its example hint as ``pass e.g. --duration 7d`` (the flag's unit added).

    A field spelled as a flag (``--now``: a value only the CLI has) is its own flag.
    """
    names = {field: flag.name if isinstance(flag, Flag) else flag for field, flag in flags.items()}
    unit = ""
    if isinstance(error, FieldError):
        if error.field.startswith("--"):
            names[error.field] = error.field
        found = flags.get(error.field)
        unit = found.unit if isinstance(found, Flag) else ""
    return renamed(
        error, names, example_hint=lambda flag, example: f"pass e.g. {flag} {example}{unit}"
    )


@contextmanager
def errors_mapped() -> Iterator[None]:
    """Map ``GpuyieldError`` to a clean CLI message in the user's words (library field names
    replaced by flags, ``FLAGS``); anything else is a bug and keeps its traceback."""
    try:
        yield
    except GpuyieldError as error:
        fail(as_flag(error))


@contextmanager
def waiting_for_store(wait_s: int) -> Iterator[None]:
    """Opening the store inside the block waits up to ``--wait`` for a writer to finish."""
    from gpuyield.store import waiting_for_writer

    with waiting_for_writer(wait_s):
        yield


def call(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """Call one library function with errors mapped."""
    with errors_mapped():
        return fn(*args, **kwargs)


def print_json(data: Any) -> None:
    """Write JSON to stdout without Rich markup, so it can be piped."""
    sys.stdout.write(json.dumps(data, indent=2, sort_keys=False, default=str))
    sys.stdout.write("\n")
