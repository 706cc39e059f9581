"""`gpuyield report ladder` and `gpuyield preflight`: test small before big (docs/ladder.md)."""

from __future__ import annotations

import sys
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any

import typer

from gpuyield.cli._grammar import (
    DEFAULT_DB,
    DEFAULT_WAIT_S,
    DEFAULT_ZONE,
    count_option,
    db_option,
    epoch_s,
    exit_check_failed,
    instant_option,
    usage_error,
    wait_option,
    zone_option,
)


def ladder_command(
    db: Annotated[Path, db_option()] = DEFAULT_DB,
    since: Annotated[
        datetime | None, instant_option(help="Window of the GPU-seconds shown: its start.")
    ] = None,
    until: Annotated[datetime | None, instant_option(help="Window end.")] = None,
    tz: Annotated[str, zone_option()] = DEFAULT_ZONE,
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON (docs/ladder.md).")] = False,
    wait: Annotated[int, wait_option()] = DEFAULT_WAIT_S,
) -> None:
    """Per run family: rungs climbed, and runs launched without their lower rung.

    Each run that skipped ("skipped 8 -> 512") comes with the GPU-seconds it spent and how it ended
    (docs/ladder.md).
    """
    from gpuyield.cli._common import (
        err_console,
        errors_mapped,
        print_json,
        shown,
        waiting_for_store,
    )
    from gpuyield.report.ladder import build_ladder

    with errors_mapped():
        since_s = epoch_s(since, tz, "--since")
        until_s = epoch_s(until, tz, "--until")
        with waiting_for_store(wait), err_console.status(f"computing the ledger of {shown(db)}"):
            report = build_ladder(db, since_s=since_s, until_s=until_s)
    if as_json:
        print_json(report.to_dict())
        return
    _print_ladder(report)


def _print_ladder(report: Any) -> None:
    from rich.table import Table

    from gpuyield.cli._common import cell, console, shown
    from gpuyield.times import iso_utc as iso

    policy = report.analysis.policy
    console.print(
        f"[bold]ladder[/] {' -> '.join(map(str, policy.rungs))} GPUs; a lower rung counts for "
        f"{policy.within_days:g} days"
    )
    for family in report.analysis.families:
        climbed = ", ".join(f"{c.rung} ({iso(c.end_s)}, {shown(c.run)})" for c in family.climbed)
        console.print(f"\n[bold]{shown(family.name)}[/]: climbed {climbed or 'nothing yet'}")
        table = Table()
        for column in ("run", "GPUs", "launched", "ladder", "outcome", "GPU-hours", "wasted"):
            right = column in ("GPUs", "GPU-hours", "wasted")
            table.add_column(column, justify="right" if right else "left", no_wrap=not right)
        for run in family.runs:
            table.add_row(
                cell(run.run),
                str(run.gpus),
                iso(run.launch_s),
                f"[red]skipped {run.skip_text}[/]" if run.skipped else "ok",
                cell(run.outcome),
                f"{run.gpu_seconds / 3600:,.2f}",
                f"{run.wasted_gpu_seconds / 3600:,.2f}",
            )
        console.print(table)
    waste = report.analysis.waste
    for name, side in (("skipped a rung", waste.skipped), ("climbed", waste.climbed)):
        share = "n/a" if side.waste_share is None else f"{side.waste_share:.1%}"
        console.print(
            f"runs that {name}: {side.runs}, {side.gpu_seconds / 3600:,.2f} GPU-hours, "
            f"{side.wasted_gpu_seconds / 3600:,.2f} failed/cancelled/diverged ({share})"
        )


def preflight_command(
    gpus: Annotated[
        int, count_option("--gpus", at_least=1, help="GPUs the run asks for.", example="64")
    ],
    family: Annotated[
        str | None, typer.Option("--family", help="The run's family.", show_default=False)
    ] = None,
    run: Annotated[
        str | None,
        typer.Option(
            "--run",
            help="Without --family: the run's name; the manifest's family patterns give its "
            "family (none: nothing to check, exit 0).",
            show_default=False,
        ),
    ] = None,
    db: Annotated[Path, db_option()] = DEFAULT_DB,
    at: Annotated[
        datetime | None, instant_option(help="Check as of this instant. Default: now.")
    ] = None,
    tz: Annotated[str, zone_option()] = DEFAULT_ZONE,
    as_json: Annotated[bool, typer.Option("--json", help="Print the verdict as JSON.")] = False,
) -> None:
    """Exit 0 if the scaling ladder allows the launch, 3 naming the missing rung if not.

    For a Slurm job_submit/prolog hook or a CI step (examples/ladder/); 1 is an error.
    """
    from gpuyield.cli._common import errors_mapped
    from gpuyield.launch import check_launch

    if (family is None) == (run is None):
        usage_error("give --family or --run (not both)", hint="e.g. --family llama-v3")
    with errors_mapped():
        at_s = epoch_s(at, tz, "--at")
        answer = check_launch(db, family=family, run=run, gpus=gpus, at_s=at_s)
    printed = answer.printed(as_json=as_json)  # gpuyield.__main__'s fast path prints the same
    sys.stdout.write(printed.stdout)
    sys.stderr.write(printed.stderr)
    if not answer.allowed:
        exit_check_failed()


def ladder_sweep_command(
    out: Path,
    values: str | None,
    seeds: int,
    days: float,
    gpus: int,
    multiplier: float,
    as_json: bool,
) -> None:
    """``simulate sweep --param ladder-skip-share``: what enforcing the ladder is worth."""
    from rich.table import Table

    from gpuyield.cli._common import call, console, plain, print_json, shown
    from gpuyield.simulate.ladder import ladder_sweep_from_options

    sweep = call(
        ladder_sweep_from_options,
        out=out,
        values=values,
        seeds=seeds,
        days=days,
        gpus=gpus,
        multiplier=multiplier,
    )
    if as_json:
        print_json(sweep.to_dict())
        return
    for line in sweep.assumption_lines():
        console.print(plain(line), markup=False, highlight=False)
    table = Table(
        title=f"research waste by rung-skipping share, {gpus:,} GPUs, {days:g} days "
        f"(skippers fail x{multiplier:g}; {shown(out / 'ladder-sweep.json')})"
    )
    for column in (
        "skip share",
        "wasted share",
        "wasted M GPU-h",
        "climb M GPU-h",
        "saved M GPU-h",
    ):
        table.add_column(column, justify="right")
    for p in (sweep.enforced, *sweep.points):
        table.add_row(
            "0 (enforced)" if p is sweep.enforced else f"{p.skip_share:g}",
            f"{p.wasted_share:.1%}",
            f"{p.wasted_gpu_s / 3.6e9:,.2f}",
            f"{p.climb_gpu_s / 3.6e9:,.2f}",
            f"{p.saved_gpu_s / 3.6e9:,.2f}",
        )
    console.print(table)
