"""`gpuyield doctor`: check Slurm, the environment and the store before trusting the numbers."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from gpuyield.cli._common import console, errors_mapped, print_json, shown
from gpuyield.cli._grammar import DB_HELP, exit_check_failed

_STYLE = {"ok": "green", "warn": "yellow", "fail": "bold red", "skipped": "dim"}


def doctor_command(
    db: Annotated[
        Path | None,
        typer.Option("--db", help=DB_HELP + " Checked (coverage, manifest runs) when given."),
    ] = None,
    manifest: Annotated[
        Path | None,
        typer.Option(
            help="Check this manifest's runs against the store (default: the stored one)."
        ),
    ] = None,
    slurm_bin: Annotated[
        Path | None,
        typer.Option("--slurm-bin", help="Directory of sacct, sacctmgr, scontrol. Default: PATH."),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the checks as JSON.")] = False,
) -> None:
    """Check the Slurm setup and the store for what silently ruins the numbers; print the fix for each.

    Exit 0 when every check passes (warnings included), 3 when one fails, 1 on an error.
    """
    from gpuyield.ingest.doctor import run_doctor

    with errors_mapped():
        report = run_doctor(db=db, manifest=manifest, slurm_bin=slurm_bin)
    if as_json:
        print_json(report.to_dict())
    else:
        for check in report.checks:
            style = _STYLE[check.status.value]
            console.print(
                f"[{style}]{check.status.value:>7}[/]  {check.name}: {shown(check.detail)}",
                highlight=False,
            )
            if check.fix:
                console.print(f"         fix: {shown(check.fix)}", highlight=False)
    if report.failed:
        exit_check_failed()
