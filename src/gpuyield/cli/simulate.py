"""`gpuyield simulate`: placeholder group, filled in by its issue."""

from __future__ import annotations

import typer

app = typer.Typer(help="(not yet built)", no_args_is_help=True)
