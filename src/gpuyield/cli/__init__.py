"""The ``gpuyield`` command line: a thin layer that parses, calls one library function, formats.

Each command group lives in its own module here; heavy libraries are imported inside commands so that
``gpuyield --help`` stays fast.
"""

from __future__ import annotations

import typer

from gpuyield.cli import divergence, estimate, ingest, report, simulate, train

app = typer.Typer(
    name="gpuyield",
    help=(
        "Yield of AI training clusters: of every GPU-second you paid for, how much ended up in a "
        "released model, and where did the rest go?"
    ),
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
app.add_typer(ingest.app, name="ingest")
app.command(name="report")(report.report_command)
app.add_typer(estimate.app, name="estimate")
app.add_typer(simulate.app, name="simulate")
app.add_typer(divergence.app, name="divergence")
app.command(name="train-ft")(train.train_ft_command)
app.command(name="ft-loss")(train.ft_loss_command)


def main() -> None:
    """Entry point of the ``gpuyield`` console script."""
    app()
