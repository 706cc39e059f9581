"""`gpuyield divergence`: find loss spikes, divergence, grad-norm explosions in run telemetry."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from gpuyield.cli._grammar import exit_check_failed

app = typer.Typer(
    help="Find loss spikes, divergence, NaNs, grad-norm explosions and loss-scale collapse.",
    no_args_is_help=True,
)

_FORMATS = "jsonl, tensorboard, wandb, mlflow, megatron, csv"


@app.callback()
def divergence() -> None:
    """Find loss spikes, divergence, NaNs, grad-norm explosions and loss-scale collapse in runs."""


@app.command("scan")
def scan_command(
    file: Annotated[
        Path,
        typer.Argument(
            help="Telemetry file or directory: gpuyield JSONL, TensorBoard log dir or event file, "
            "W&B history export, MLflow run dir, Megatron-LM log, or a CSV with step and loss.",
            show_default=False,
        ),
    ],
    format: Annotated[
        str | None,
        typer.Option(
            "--format",
            "-f",
            help=f"Input format ({_FORMATS}); detected from the content if omitted.",
        ),
    ] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help='Print {"events": [{"step": N, "kind": ...}]} as JSON.')
    ] = False,
) -> None:
    """List the divergence events in FILE, with evidence and the checkpoint to roll back to.

    Exit 0 when the run shows none, 3 when it shows divergence events, 1 on an error.
    """
    from gpuyield.cli._common import call, print_json
    from gpuyield.ingest.telemetry import scan

    result = call(scan, file, format)
    if as_json:
        print_json(result.to_dict())
    else:
        _print_scan(result)
    if result.events:
        exit_check_failed()


def _print_scan(result: Any) -> None:
    from rich.table import Column, Table

    from gpuyield.cli._common import cell, console, shown

    console.print(
        f"{shown(result.path)}: {result.num_steps} steps read as {result.format}"
        + (f", {result.torn_lines} torn line(s) skipped" if result.torn_lines else "")
    )
    if not result.events:
        console.print("no divergence events found")
        return
    # The kind names the event (loss_spike, nonfinite, ...): never wrapped mid-word on a narrow
    # terminal, where the numeric columns give way instead.
    table = Table(
        "step",
        Column("kind", no_wrap=True),
        "metric",
        "value",
        "threshold",
        "baseline",
        "reported at",
        "roll back to",
    )
    for e in result.events:
        table.add_row(
            str(e.step),
            e.kind.value,
            cell(e.metric),
            f"{e.value:.6g}",
            f"{e.threshold:.6g}",
            "" if e.baseline is None else f"{e.baseline:.6g}",
            str(e.reported_step or e.step),
            "" if e.rollback_step is None else str(e.rollback_step),
        )
    console.print(table)
