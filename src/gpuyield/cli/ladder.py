"""`gpuyield ladder` and `gpuyield preflight`: test small before big (docs/ladder.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from gpuyield.cli._common import DEFAULT_WAIT, WAIT_HELP

# Exit status of a launch the ladder refuses (1 stays "error", 2 is typer's usage error).
EXIT_REFUSED = 3
_DB_HELP = "DuckDB file written by `gpuyield ingest`."


def ladder_command(
    db: Annotated[Path, typer.Option("--db", help=_DB_HELP)] = Path("gpuyield.duckdb"),
    since: Annotated[
        str | None, typer.Option(help="Window of the GPU-seconds shown (ISO time).")
    ] = None,
    until: Annotated[str | None, typer.Option(help="Window end (ISO time).")] = None,
    tz: Annotated[
        str, typer.Option(help="Time zone of --since/--until without an offset.")
    ] = "UTC",
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON (docs/ladder.md).")] = False,
    wait: Annotated[str, typer.Option("--wait", help=WAIT_HELP)] = DEFAULT_WAIT,
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
    from gpuyield.cli.ingest import parse_instant
    from gpuyield.report.ladder import build_ladder

    with errors_mapped():
        since_s = parse_instant(since, tz, "--since")
        until_s = parse_instant(until, tz, "--until")
        with waiting_for_store(wait), err_console.status(f"computing the ledger of {shown(db)}"):
            report = build_ladder(db, since_s=since_s, until_s=until_s)
    if as_json:
        print_json(report.to_dict())
        return
    _print_ladder(report)


def _print_ladder(report: Any) -> None:
    from rich.table import Table

    from gpuyield.cli._common import cell, console, shown
    from gpuyield.report.ladder import skip_text
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
                f"[red]skipped {skip_text(run)}[/]" if run.skipped else "ok",
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
        int, typer.Option("--gpus", min=1, help="GPUs the run asks for.", show_default=False)
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
    db: Annotated[Path, typer.Option("--db", help=_DB_HELP)] = Path("gpuyield.duckdb"),
    at: Annotated[
        str | None, typer.Option(help="Check as of this instant (ISO time). Default: now.")
    ] = None,
    tz: Annotated[str, typer.Option(help="Time zone of --at without an offset.")] = "UTC",
    as_json: Annotated[bool, typer.Option("--json", help="Print the verdict as JSON.")] = False,
) -> None:
    """Exit 0 if the scaling ladder allows the launch, 3 naming the missing rung if not.

    For a Slurm job_submit/prolog hook or a CI step (examples/ladder/); 1 is an error.
    """
    from gpuyield import rungs, store
    from gpuyield.cli._common import console, errors_mapped, print_json, shown
    from gpuyield.cli.ingest import parse_instant
    from gpuyield.errors import InputError

    with errors_mapped():
        if (family is None) == (run is None):
            raise InputError("give --family or --run (not both)", hint="e.g. --family llama-v3")
        at_s = parse_instant(at, tz, "--at")
        con = store.connect(db, read_only=True)
        try:
            family = family if family is not None else rungs.family_of_run(con, run or "")
            if family is None:
                console.print(
                    f"ok: run {shown(run)} belongs to no family: the ladder does not apply",
                    highlight=False,
                    soft_wrap=True,
                )
                return
            result = rungs.preflight(con, family=family, gpus=gpus, at_s=at_s)
        finally:
            con.close()
    if as_json:
        print_json(_verdict_dict(result))
    else:
        _print_verdict(result)
    if not result.allowed:
        raise typer.Exit(code=EXIT_REFUSED)


def _verdict_dict(result: Any) -> dict[str, Any]:
    from gpuyield.times import iso_utc as iso

    evidence = result.evidence
    return {
        "family": result.family,
        "gpus": result.gpus,
        "at": iso(result.at_s),
        "allowed": result.allowed,
        "required_gpus": result.required_gpus,
        "missing_rungs": list(result.missing_rungs),
        "evidence": None
        if evidence is None
        else {"run": evidence.run, "gpus": evidence.gpus, "completed": iso(evidence.end_s)},
        "known_family": result.known_family,
        "ladder": {"rungs": list(result.policy.rungs), "within_days": result.policy.within_days},
        "from_summary": result.from_summary,
    }


def _print_verdict(result: Any) -> None:
    from gpuyield.cli._common import console, err_console, plain
    from gpuyield.times import iso_utc as iso

    days = f"{result.policy.within_days:g} days"
    family = plain(result.family)
    evidence = result.evidence
    if result.allowed:
        why = (
            "the first rung needs nothing before it"
            if result.required_gpus is None
            else f"run {plain(evidence.run)} completed on {evidence.gpus} GPUs at "
            f"{iso(evidence.end_s)}"
        )
        console.print(
            f"ok: family {family} may launch on {result.gpus} GPUs: {why}",
            highlight=False,
            markup=False,
            soft_wrap=True,
        )
        return
    best = (
        "nothing completed then"
        if evidence is None
        else f"the largest completed is {evidence.gpus} GPUs (run {plain(evidence.run)})"
    )
    err_console.print(
        f"refused: family {family} on {result.gpus} GPUs needs a completed run on "
        f"{result.required_gpus} GPUs within {days}; {best}; missing rung(s) "
        f"{', '.join(map(str, result.missing_rungs))}",
        highlight=False,
        markup=False,
        soft_wrap=True,  # one line per verdict: hooks pass it on to logs and terminals
    )
    if not result.known_family:
        err_console.print(
            f"note: no job and no [[families]] entry names family {plain(repr(result.family))}: "
            "a typo?",
            highlight=False,
            markup=False,
            soft_wrap=True,
        )


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
    from gpuyield.simulate.ladder import ladder_sweep_dict, ladder_sweep_from_options

    sweep = call(
        ladder_sweep_from_options,
        out=out, values=values, seeds=seeds, days=days, gpus=gpus, multiplier=multiplier,
    )  # fmt: skip
    if as_json:
        print_json(ladder_sweep_dict(sweep))
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
