"""The ``gpuyield`` command line: a thin layer that parses, calls one library function, formats.

Each command group lives in its own module here; heavy libraries are imported inside commands so that
``gpuyield --help`` stays fast.
"""

from __future__ import annotations

from typing import Annotated

import typer

from gpuyield.cli import (
    collect,
    divergence,
    doctor,
    estimate,
    idle_now,
    ingest,
    lake,
    plan,
    report,
    serve,
    simulate,
    train,
    whatif,
)
from gpuyield.cli import ladder as ladder_cli
from gpuyield.cli._common import PlainUsageErrors, ViewByDefault
from gpuyield.cli._grammar import deprecated_command

app = typer.Typer(
    cls=PlainUsageErrors,
    name="gpuyield",
    help=(
        "Yield of AI training clusters: of every GPU-second you paid for, how much ended up in a "
        "released model, and where did the rest go?"
    ),
    no_args_is_help=True,
    add_completion=True,
    pretty_exceptions_enable=False,
)

# The views of the store: `gpuyield report [OPTIONS]` is `gpuyield report summary [OPTIONS]`.
report_app = typer.Typer(
    cls=ViewByDefault,
    help="Views of the store: the yield summary (the default: `gpuyield report [OPTIONS]`), the "
    "ladder, who holds idle GPUs now, a fault-tolerant run's losses.",
)
report_app.command(name="summary")(report.report_command)
report_app.command(name="ladder")(ladder_cli.ladder_command)
report_app.command(name="idle-now")(idle_now.idle_now_command)
report_app.command(name="ft-loss")(train.ft_loss_command)

app.add_typer(ingest.app, name="ingest")
app.add_typer(report_app, name="report")
app.add_typer(lake.app, name="lake")
app.add_typer(estimate.app, name="estimate")
app.add_typer(simulate.app, name="simulate")
app.add_typer(divergence.app, name="divergence")
app.command(name="serve")(serve.serve_command)
app.command(name="preflight")(ladder_cli.preflight_command)
app.command(name="collect")(collect.collect_command)
app.command(name="doctor")(doctor.doctor_command)
app.command(name="plan")(plan.plan_command)
app.command(name="train-ft")(train.train_ft_command)
app.add_typer(whatif.app, name="whatif")

# The report views' old top-level names, for one release (docs/cli.md, "Deprecated spellings").
for _old, _command in (
    ("ladder", ladder_cli.ladder_command),
    ("idle-now", idle_now.idle_now_command),
    ("ft-loss", train.ft_loss_command),
):
    app.command(name=_old, hidden=True, help=f"Deprecated: gpuyield report {_old}.")(
        deprecated_command(_old, f"report {_old}", _command)
    )


def _version(value: bool) -> None:
    if value:
        from importlib.metadata import PackageNotFoundError, version

        try:
            typer.echo(f"gpuyield {version('gpuyield')}")
        except PackageNotFoundError:
            typer.echo("gpuyield (not installed: running from a source tree)")
        raise typer.Exit()


@app.callback()
def _root(
    show_version: Annotated[
        bool,
        typer.Option(
            "--version", help="Print the version and exit.", callback=_version, is_eager=True
        ),
    ] = False,
) -> None:
    """Yield of AI training clusters: of every GPU-second you paid for, how much ended up in a
    released model, and where did the rest go?"""


def main() -> None:
    """Entry point of the ``gpuyield`` console script."""
    app()
