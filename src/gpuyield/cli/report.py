"""`gpuyield report`: where the GPU-seconds went, as a table, JSON or a self-contained HTML page."""

from __future__ import annotations

import sys
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from gpuyield.cli._common import (
    as_flag,
    cell,
    console,
    err_console,
    errors_mapped,
    shown,
    waiting_for_store,
)
from gpuyield.cli._grammar import (
    DEFAULT_DB,
    DEFAULT_WAIT_S,
    DEFAULT_ZONE,
    count_option,
    db_option,
    epoch_s,
    instant_option,
    usage_error,
    wait_option,
    zone_option,
)
from gpuyield.cli._weights import (
    check_weight,
    print_gpu_types,
    print_waste_line,
    print_weighted,
    require_weight,
)
from gpuyield.errors import GpuyieldError

if TYPE_CHECKING:
    from gpuyield.report.source import ReportSource

_BY_HELP = (
    "Break down by account, user, partition, run, job (with the input line of each), day, hour "
    "or cluster (each cluster of the store as a report of its own)."
)
_WEIGHT_HELP = (
    "Count in gpu-seconds (default), h100-equiv (dense BF16 peak over the H100 SXM's), flops "
    "(FLOPs paid for) or dollars (the manifest's [prices]): the table and --by (account, user, "
    "partition, run). --json always carries every weight (by_gpu_type, weighted)."
)
_TOP_HELP = (
    "With --by: the N largest groups, the rest as one row (job, run: 20 unless told; 0: all)."
)


def report_command(
    db: Annotated[Path, db_option()] = DEFAULT_DB,
    lake: Annotated[
        Path | None,
        typer.Option(
            "--lake",
            help="Report on a lake (`gpuyield lake export`, `ingest --lake`) instead of a store.",
        ),
    ] = None,
    engine: Annotated[
        str | None,
        typer.Option(
            "--engine",
            help="With --lake: duckdb (in this process) or spark [default: duckdb].",
        ),
    ] = None,
    spark_master: Annotated[
        str | None,
        typer.Option(
            "--spark-master",
            help="With --engine spark: the master, spark://HOST:PORT [default: local[*]].",
        ),
    ] = None,
    by: Annotated[str | None, typer.Option("--by", help=_BY_HELP)] = None,
    top: Annotated[int | None, count_option("--top", help=_TOP_HELP, example="10")] = None,
    weight: Annotated[str, typer.Option("--weight", help=_WEIGHT_HELP)] = "gpu-seconds",
    since: Annotated[
        datetime | None, instant_option(help="Window start. Default: cluster registration.")
    ] = None,
    until: Annotated[
        datetime | None, instant_option(help="Window end. Default: the data's capture time.")
    ] = None,
    tz: Annotated[str, zone_option()] = DEFAULT_ZONE,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print JSON (docs/contracts.md shape).")
    ] = False,
    html: Annotated[
        Path | None, typer.Option("--html", help="Write a self-contained HTML report to this file.")
    ] = None,
    png: Annotated[
        Path | None, typer.Option("--png", help="With --html: also write each chart as a PNG here.")
    ] = None,
    allow_gaps: Annotated[
        bool,
        typer.Option(
            "--allow-gaps",
            help="A window reaching outside the captured time shows the gaps as not captured "
            "(out of installed, never idle) instead of failing.",
        ),
    ] = False,
    wait: Annotated[int, wait_option()] = DEFAULT_WAIT_S,
) -> None:
    """Yield report: installed GPU-hours by category, over the captured time, beside the essay's typical lab."""
    from gpuyield.report.source import describe

    check_flags(html=html, png=png, by=by, top=top)
    unit = _weight_unit(weight, html=html, as_json=as_json, by=by)
    with errors_mapped():
        source = report_source(db=db, lake=lake, engine=engine, spark_master=spark_master)
        since_s = epoch_s(since, tz, "--since")
        until_s = epoch_s(until, tz, "--until")
        if html is not None:
            window = (since_s, until_s)
            _write_html(source, html, png, window=window, allow_gaps=allow_gaps, wait=wait)
            return
        # A spinner on stderr (none when it is not a terminal): 10M jobs take seconds.
        with (
            waiting_for_store(wait),
            err_console.status(f"computing the ledger of {shown(describe(source))}"),
        ):
            from gpuyield.report.summary import build_report_with_breakdown

            result = build_report_with_breakdown(
                source,
                since_s=since_s,
                until_s=until_s,
                by=by,
                top=top,
                allow_gaps=allow_gaps,
                weight=weight,
            )
    if as_json:
        from gpuyield.report.document import report_json_text

        # One writer for this and `gpuyield serve`'s /api/report, so the two never differ.
        sys.stdout.write(report_json_text(result.report, result.breakdown) + "\n")
        return
    with errors_mapped():
        require_weight(result.report, unit)
        print_waste_line(result.report)
        _print_report(result.report, unit)
    if result.breakdown is not None:
        _print_breakdown(result.breakdown)


def _write_html(
    source: ReportSource,
    html: Path,
    png: Path | None,
    *,
    window: tuple[int | None, int | None],
    allow_gaps: bool,
    wait: int,
) -> None:
    """``--html``: the page (and ``--png``'s slides), one progress bar per phase on stderr."""
    from gpuyield.cli._progress import RichProgress
    from gpuyield.report.html import write_html_report

    # One bar per phase on stderr (nothing when it is not a terminal).
    with waiting_for_store(wait), RichProgress(counts=True) as progress:
        written = write_html_report(
            source,
            html,
            since_s=window[0],
            until_s=window[1],
            png_dir=png,
            allow_gaps=allow_gaps,
            progress=progress,
        )
    console.print(f"HTML report written to {shown(written)}", highlight=False)


def _weight_unit(weight: str, *, html: Path | None, as_json: bool, by: str | None) -> str:
    """``--weight``'s unit; an unknown weight, or one that would change nothing with the other
    flags, is a usage error (exit 2) like every flag that does not go with another."""
    try:
        return check_weight(weight, html=html, as_json=as_json, by=by)
    except GpuyieldError as error:
        said = as_flag(error)  # the library's report.weight as the --weight typed
        usage_error(said.message, hint=said.hint)


def report_source(
    *, db: Path, lake: Path | None, engine: str | None, spark_master: str | None
) -> Any:
    """The store or the lake (with its engine) the flags name; flags that do not go together are
    usage errors (exit 2)."""
    from gpuyield.lake import LakeSource

    if lake is None:
        if engine is not None or spark_master is not None:
            flag = "--engine" if engine is not None else "--spark-master"
            usage_error(f"{flag} works only with --lake", hint="add --lake DIR, or drop it")
        return db
    if _given("db"):
        usage_error("give --db or --lake, not both", hint="a report reads one of them")
    if spark_master is not None and engine not in (None, "spark"):
        usage_error("--spark-master works only with --engine spark", hint="add --engine spark")
    chosen = "spark" if spark_master is not None and engine is None else engine or "duckdb"
    return LakeSource(path=lake, engine=chosen, spark_master=spark_master)


def _given(parameter: str) -> bool:
    """Whether the command line set ``parameter`` (not its default)."""
    from typer._click.core import ParameterSource
    from typer._click.globals import get_current_context

    context = get_current_context(silent=True)
    return context is not None and (
        context.get_parameter_source(parameter) is ParameterSource.COMMANDLINE
    )


def check_flags(*, html: Path | None, png: Path | None, by: str | None, top: int | None) -> None:
    """Flags that would do nothing together are usage errors (exit 2), not silently ignored."""
    if png is not None and html is None:
        usage_error("--png works only with --html", hint="add --html FILE, or drop --png")
    if by is not None and html is not None:
        usage_error(
            "--by does not apply to --html (the page has its own breakdowns)",
            hint="run --by without --html for the table or JSON",
        )
    if top is not None and by is None:
        usage_error("--top works only with --by", hint="add --by, e.g. --by user")


def _hours(gpu_seconds: float) -> str:
    return f"{gpu_seconds / 3600:,.1f}"


def _share(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.1%}"


def _print_report(report: Any, unit: str = "gpu_seconds") -> None:
    from rich.table import Table

    from gpuyield.report.summary import iso
    from gpuyield.report.weights import yield_phrase

    installed = report.installed_gpu_seconds
    console.print(
        f"[bold]{yield_phrase(report.yield_, report.fleet)}[/]  window {iso(report.window_start_s)} .. "
        f"{iso(report.window_end_s)}  installed {_hours(installed)} GPU-hours  "
        f"utilization {_share(report.utilization)}  goodput {_share(report.goodput)}"
    )
    if unit == "gpu_seconds":
        console.print(_category_table(report))
    else:
        print_weighted(report, unit)
    print_gpu_types(report)
    essay = Table(title="beside the essay's typical lab", title_justify="left")
    for column in ("essay bucket", "this cluster", "typical lab"):
        essay.add_column(column, justify="left" if column == "essay bucket" else "right")
    for row in report.essay_comparison():
        essay.add_row(row.bucket, _share(row.share), _share(row.typical_share))
    console.print(essay)
    for name, how in report.figures.items():
        console.print(f"[dim]{name}: {how}[/]")
    quality = (
        f"rejected rows: {report.rejected_rows}; jobs without GPU count: "
        f"{report.jobs_without_gpu_count}"
    )
    console.print(f"[dim]{quality}[/]")
    if report.activity is not None:
        _print_activity(report)
    for event in report.divergence_evidence:
        console.print(
            f"divergence watch: run {shown(event['run'])} step {event['step']}: "
            f"{shown(event['kind'])} ({shown(event['metric'])}={event['value']}, "
            f"threshold {event['threshold']})",
            highlight=False,
        )
    if report.waste_in_skipped_rungs is not None:
        _print_skipped_rungs(report.waste_in_skipped_rungs)
    for warning in report.warnings:
        console.print(f"[yellow]warning:[/] {shown(warning)}", highlight=False)
    for gap in report.not_captured:
        console.print(
            f"[yellow]not captured:[/] {shown(gap.describe())} ({gap.duration_s / 3600:,.1f} h): "
            "out of installed, not idle"
        )


def _category_table(report: Any) -> Any:
    """Categories in GPU-hours and GPU-seconds, with their subcategories' shares."""
    from rich.table import Table

    installed = report.installed_gpu_seconds
    table = Table(show_footer=True)
    table.add_column("category", footer="installed")
    table.add_column("GPU-hours", justify="right", footer=_hours(installed))
    table.add_column("GPU-seconds", justify="right", footer=f"{installed:,.0f}")
    table.add_column("share", justify="right", footer="100.0%" if installed else "n/a")
    for category, value in report.categories.items():
        subs = [
            (k.split(".", 1)[1], v)
            for k, v in report.subcategories.items()
            if k.startswith(category + ".")
        ]
        note = ", ".join(f"{s} {v / installed:.1%}" for s, v in sorted(subs) if installed)
        label = category + (f" [dim]({note})[/]" if note else "")
        table.add_row(
            label, _hours(value), f"{value:,.0f}", _share(value / installed if installed else None)
        )
    return table


def _print_skipped_rungs(waste: Any) -> None:
    """The ladder's evidence: waste of runs that skipped a rung beside the runs that did not."""
    for name, side in (("skipped a rung", waste.skipped), ("climbed the ladder", waste.climbed)):
        console.print(
            f"runs that {name}: {side.runs}, {_hours(side.gpu_seconds)} GPU-hours, "
            f"{_hours(side.wasted_gpu_seconds)} failed/cancelled/diverged "
            f"({_share(side.waste_share)})"
        )
    console.print("[dim]waste_in_skipped_rungs: `gpuyield report ladder` lists the runs[/]")


def _print_activity(report: Any) -> None:
    """What the utilization samples measured: activity per category, and who was not attributed."""
    util = report.activity
    console.print(
        f"allocated but idle (below {util.threshold:.0%} activity): "
        f"{_hours(util.idle_allocated_gpu_seconds)} GPU-hours moved to idle.allocated"
    )
    for category, a in util.activity.items():
        held = report.category_before_idle(category)
        tensor = "" if a.tensor_share is None else f", tensor pipes {a.tensor_share:.0%}"
        console.print(
            f"  {category}: {_share(a.active_share)} graphics-engine activity{tensor}; "
            f"{_share(a.measured_gpu_seconds / held if held else None)} of its GPU-seconds measured"
        )
    s = util.samples
    console.print(
        f"[dim]utilization samples: {s.total:,}; by job label {s.by_job_label:,}, by GPU index "
        f"{s.by_gpu_index:,}, by whole node {s.by_whole_node:,}, on unallocated GPUs "
        f"{s.unallocated:,}, unattributed {s.unattributed:,} (not guessed: no job label or GPU "
        "index on a shared node, or no such job)[/]"
    )


def _print_breakdown(cut: Any) -> None:
    from rich.table import Table

    from gpuyield.categories import Category
    from gpuyield.report.weights import in_unit, unit_label

    largest = f" (the {cut.top} largest of {cut.groups:,})" if cut.top is not None else ""
    fmt = lambda v: in_unit(v, cut.unit)  # noqa: E731
    table = Table(title=f"{unit_label(cut.unit)} by {cut.by}{largest}", title_justify="left")
    table.add_column(cut.by)
    extra = sorted({k for r in cut.rows for k in r.attributes}, key=_ATTRIBUTE_ORDER.index)
    for name in extra:
        table.add_column(name)
    for category in Category:
        table.add_column(category.value, justify="right")
    table.add_column("total", justify="right")
    for row in cut.rows:
        # Text, not markup: keys are job comments, users, accounts, written by users.
        table.add_row(
            cell(row.key),
            *[cell(row.attributes.get(name) or "") for name in extra],
            *[fmt(row.categories[c.value]) for c in Category],
            fmt(row.total_gpu_seconds),
        )
    console.print(table)


# Columns a breakdown row may add (a job's), in the order they are printed.
_ATTRIBUTE_ORDER = ("run", "state", "source")
