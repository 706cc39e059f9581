"""`gpuyield whatif` and `gpuyield whatif fit`: what each remedy would buy on this cluster
(docs/whatif.md)."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Annotated, Any

import typer

from gpuyield.cli._grammar import (
    DEFAULT_ZONE,
    count_option,
    db_option,
    epoch_s,
    instant_option,
    zone_option,
)

# Exit status when the check ran and failed (the CLI grammar's 3).
EXIT_CHECK_FAILED = 3
app = typer.Typer(
    help=(
        "What would each remedy buy on this cluster? Fits the simulator to the store's own "
        "ledger, checks the fit by replaying the window, and projects remedies (docs/whatif.md)."
    ),
    invoke_without_command=True,
    no_args_is_help=False,
)

Db = Annotated[Path, db_option()]
Since = Annotated[datetime | None, instant_option(help="Window start. Default: the store's.")]
Until = Annotated[datetime | None, instant_option(help="Window end. Default: the store's.")]
Tz = Annotated[str, zone_option()]
ReplaySeeds = Annotated[
    int,
    count_option(
        "--replay-seeds", help="Seeds of the replay that checks the fit.", at_least=1, example="6"
    ),
]
Tolerance = Annotated[
    float,
    typer.Option(
        "--tolerance",
        help="Points of installed GPU-time a category's replay may miss the real one by "
        "(plus the replay's own prediction interval over its seeds).",
    ),
]
Json = Annotated[bool, typer.Option("--json", help="Print JSON (docs/whatif.md).")]


Remedy = Annotated[
    list[str] | None,
    typer.Option(
        "--remedy",
        help="drop-replicas, checkpoint=20m|optimal, fill-idle, ladder, repair=12h, "
        "spares=N; join with + to combine (repeat the option for several). Default: "
        "drop-replicas, checkpoint=optimal, fill-idle, ladder.",
    ),
]
Horizon = Annotated[
    str | None, typer.Option(help="How far to project, e.g. 90d. Default: the window's length.")
]
Seeds = Annotated[
    int,
    count_option(
        "--seeds",
        help="How many independent seeds to draw (each a seed and parameters from their "
        "intervals).",
        example="5",
    ),
]
Price = Annotated[
    float | None,
    typer.Option(
        "--price-per-gpu-hour",
        help="Dollars per GPU-hour, to price the GPU-hours each remedy gains (stated). "
        "Default: the manifest's [prices] in the store, if any.",
    ),
]
Fixed = Annotated[
    bool,
    typer.Option("--fixed-parameters", help="Keep the fitted values in every draw (seeds only)."),
]
Force = Annotated[
    bool, typer.Option("--force", help="Project even when the fit's check fails (stated).")
]
Html = Annotated[
    Path | None, typer.Option("--html", help="Also write the HTML section to this file.")
]


@app.callback()
def whatif_command(
    ctx: typer.Context,
    db: Db = Path("gpuyield.duckdb"),
    remedy: Remedy = None,
    horizon: Horizon = None,
    seeds: Seeds = 5,
    price: Price = None,
    fixed: Fixed = False,
    force: Force = False,
    html: Html = None,
    since: Since = None,
    until: Until = None,
    tz: Tz = DEFAULT_ZONE,
    replay_seeds: ReplaySeeds = 6,
    tolerance: Tolerance = 2.0,
    as_json: Json = False,
) -> None:
    """Project remedies on this cluster: yield, GPU-hours and dollars each buys, ranked."""
    if ctx.invoked_subcommand is not None:
        return
    from gpuyield.cli._common import err_console, errors_mapped, print_json
    from gpuyield.whatif import ProjectionRefused, run_whatif

    with errors_mapped():
        since_s = epoch_s(since, tz, "--since")
        until_s = epoch_s(until, tz, "--until")
        try:
            with err_console.status(f"fitting, replaying and projecting {db}"):
                result = run_whatif(
                    db,
                    remedies=remedy,
                    since_s=since_s,
                    until_s=until_s,
                    horizon=horizon,
                    seeds=seeds,
                    replay_seeds=replay_seeds,
                    tolerance=tolerance / 100,
                    price_per_gpu_hour=price,
                    uncertainty=not fixed,
                    force=force,
                )
        except ProjectionRefused as refused:
            _refused(refused, as_json)
        if html is not None:
            from gpuyield.whatif.html import write_whatif_html

            write_whatif_html(result, html)
    if as_json:
        print_json(result.to_dict())
        return
    _print_projection(result)
    if html is not None:
        err_console.print(f"HTML written to {html}")


@app.command("fit")
def fit_command(
    db: Db = Path("gpuyield.duckdb"),
    out: Annotated[
        Path | None, typer.Option("--out", help="Write the fitted scenario (TOML) here.")
    ] = None,
    since: Since = None,
    until: Until = None,
    tz: Tz = DEFAULT_ZONE,
    replay_seeds: ReplaySeeds = 6,
    tolerance: Tolerance = 2.0,
    as_json: Json = False,
) -> None:
    """Fit the simulator to the store (intervals, evidence), replay the window to check it.

    Exits 3 when the replay misses a category by more than the tolerance or a parameter rests
    on too few events; the scenario file is written either way and says which.
    """
    from gpuyield.cli._common import err_console, errors_mapped, print_json
    from gpuyield.whatif import run_fit

    with errors_mapped():
        since_s = epoch_s(since, tz, "--since")
        until_s = epoch_s(until, tz, "--until")
        with err_console.status(f"fitting {db} and replaying the window"):
            report = run_fit(
                db,
                since_s=since_s,
                until_s=until_s,
                out=out,
                replay_seeds=replay_seeds,
                tolerance=tolerance / 100,
            )
    if as_json:
        print_json(report.to_dict())
    else:
        _print_fit(report)
    if not report.passed:
        raise typer.Exit(code=EXIT_CHECK_FAILED)


def _refused(refused: Any, as_json: bool) -> None:
    from gpuyield.cli._common import err_console, print_json

    if as_json:
        print_json({"refused": True, "check": refused.check.to_dict()})
    else:
        _print_check(refused.check)
        err_console.print(f"[bold red]refused:[/] {refused.message}")
        err_console.print(f"[bold]hint:[/] {refused.hint}")
    raise typer.Exit(code=EXIT_CHECK_FAILED)


def _print_fit(report: Any) -> None:
    from rich.markup import escape

    from gpuyield.cli._common import console
    from gpuyield.safetext import visible
    from gpuyield.times import iso_utc

    fit = report.fit
    console.print(
        f"[bold]fit of {escape(visible(fit.cluster))}[/] {iso_utc(fit.start_s)} .. "
        f"{iso_utc(fit.end_s)}: {fit.num_nodes:,} nodes x {fit.gpus_per_node} GPUs, "
        f"{len(fit.lineage)} lineage runs, {len(fit.research_classes)} research classes",
        soft_wrap=True,
    )
    # One line per parameter (no table: a key or an interval cut to fit a column says nothing).
    console.print("[bold]parameters[/] (value [95% interval] unit; from, events: evidence)")
    for p in fit.parameters:
        line = (
            f"  {p.key} = {p.value:.4g} [{p.low:.3g}, {p.high:.3g}] {p.unit}; "
            f"{p.status.value}, {p.events:,} events: {visible(p.evidence)}"
        )
        console.print(escape(line), soft_wrap=True, highlight=False)
    for note in fit.notes:
        console.print(f"note: {escape(visible(note))}", soft_wrap=True)
    _print_check(report.check)
    if report.scenario_path is not None:
        console.print(f"scenario written to {report.scenario_path}")


def _print_check(check: Any) -> None:
    from rich.table import Table

    from gpuyield.cli._common import console

    table = Table(title=f"replay check: {check.seeds} seeds, tolerance {check.tolerance:.0%}")
    for column in ("category", "real", "replay", "seed sd", "allowed", ""):
        table.add_column(column, justify="left" if column in ("category", "") else "right")
    for c in check.categories:
        table.add_row(
            c.category,
            f"{c.real:.1%}",
            f"{c.replay_mean:.1%}",
            f"{c.replay_sd:.1%}",
            f"+-{c.allowed:.1%}",
            "MISSED" if c.missed else "ok",
        )
    console.print(table)
    verdict = "passed" if check.passed else "FAILED: " + "; ".join(check.reasons)
    console.print(f"check {verdict}")


def _print_projection(result: Any) -> None:
    from rich.markup import escape

    from gpuyield.cli._common import console
    from gpuyield.safetext import visible

    base = result.baseline
    console.print(
        f"[bold]baseline[/] over {result.horizon_days:g} days: yield {base.yield_.mean:.1%} "
        f"({base.yield_.low:.1%} .. {base.yield_.high:.1%}), {result.seeds} draws"
        + ("" if result.uncertainty else ", fitted parameters fixed")
    )
    if result.forced:
        console.print("[bold red]the fit's check FAILED; projected anyway (--force)[/]")
    console.print(_remedy_table(result))
    # Each part once, though several combinations hold it.
    said = dict.fromkeys(line for r in result.remedies for line in r.remedy.assumptions)
    missing = dict.fromkeys(line for r in result.remedies for line in r.remedy.not_applicable)
    for line in said:
        console.print(f"assumes {escape(visible(line))}", soft_wrap=True)
    for line in missing:
        console.print(f"not applicable: {escape(visible(line))}", soft_wrap=True)
    if result.price_per_gpu_hour is not None:
        console.print(f"price: ${result.price_per_gpu_hour:g} per GPU-hour ({result.price_source})")
    elif result.price_source:  # the manifest has [prices], but they give no price: say why
        console.print(f"price: {escape(visible(result.price_source))}", soft_wrap=True)


def _remedy_table(result: Any) -> Any:
    from rich.markup import escape
    from rich.table import Table

    priced = result.price_per_gpu_hour is not None
    table = Table(title="what each remedy buys on this cluster (95% intervals over draws)")
    table.add_column("remedy", no_wrap=True)  # a remedy cut short names nothing
    columns = ["yield", "gain, points", "GPU-hours gained", "idle GPU-hours filled"]
    for column in columns + (["dollars gained"] if priced else []):
        table.add_column(column, justify="right")
    for r in result.remedies:
        g, h = r.yield_gain, r.gpu_hours_gained
        row = [
            escape(r.remedy.name),
            f"{r.outcome.yield_.mean:.1%}",
            f"{g.mean * 100:+.2f}\n{g.low * 100:+.2f} .. {g.high * 100:+.2f}",
            f"{_hours(h.mean)}\n{_hours(h.low)} .. {_hours(h.high)}",
            _hours(-r.outcome.gpu_hours["idle"].mean),
        ]
        if priced and r.dollars_gained is not None:
            d = r.dollars_gained
            row.append(f"{_dollars(d.mean)}\n{_dollars(d.low)} .. {_dollars(d.high)}")
        table.add_row(*row)
    return table


def _hours(value: float) -> str:
    """``+65.5k``: GPU-hours, signed, to three figures."""
    if abs(value) < 0.5:
        return "0"
    for scale, suffix in ((1e6, "M"), (1e3, "k")):
        if abs(value) >= scale:
            return f"{value / scale:+.3g}{suffix}"
    return f"{value:+.0f}"


def _dollars(value: float) -> str:
    """``+$131k``."""
    return ("-" if value < 0 else "+") + "$" + _hours(abs(value)).lstrip("+")
