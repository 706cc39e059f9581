"""`gpuyield idle-now`: the jobs holding GPUs measured idle at the end of the covered time."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from gpuyield.cli._grammar import (
    DEFAULT_DB,
    DEFAULT_WAIT_S,
    count_option,
    db_option,
    seconds_option,
    wait_option,
)

if TYPE_CHECKING:
    from gpuyield.report.idle_now import IdleNow


def idle_now_command(
    db: Annotated[Path, db_option()] = DEFAULT_DB,
    window: Annotated[
        int,
        seconds_option(
            "--window",
            help="How much of the end of the covered time to look at (1s, 15m, 1h). The default "
            "is the instant `gpuyield serve`'s gauges show.",
            example="15m",
            show_default="1s",
        ),
    ] = 1,
    top: Annotated[
        int | None,
        count_option(
            "--top", help="Show the N jobs with the most idle GPUs (0: all).", example="10"
        ),
    ] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print JSON (the body of serve's /api/idle-now).")
    ] = False,
    wait: Annotated[int, wait_option()] = DEFAULT_WAIT_S,
) -> None:
    """Who holds idle GPUs now: jobs whose allocated GPUs utilization samples measured idle.

    Needs `gpuyield ingest utilization`; without samples it says utilization is not measured
    (docs/ledger.md, "Allocated but idle").
    """
    from gpuyield.cli._common import err_console, errors_mapped, shown, waiting_for_store
    from gpuyield.report.idle_now import build_idle_now, idle_now_json_text

    with (
        errors_mapped(),
        waiting_for_store(wait),
        err_console.status(f"computing the ledger of {shown(db)}"),
    ):
        result = build_idle_now(db, window_s=window, top=top)
    if as_json:
        typer.echo(idle_now_json_text(result))
        return
    _print(result)


def _print(result: IdleNow) -> None:
    from rich.table import Table

    from gpuyield.cli._common import cell, console, shown
    from gpuyield.times import iso_utc as iso

    start_s, end_s = result.window_start_s, result.window_end_s
    if not result.measured or start_s is None or end_s is None:  # a measured list has its window
        console.print(shown(result.note or "utilization is not measured"))
        return
    console.print(
        f"[bold]{result.idle_gpus:,.2f}[/] allocated GPUs measured idle "
        f"({result.job_count} jobs) from {iso(start_s)} to {iso(end_s)}"
    )
    if not result.jobs:
        return
    table = Table()
    for column in ("job", "user", "account", "partition", "nodes", "idle GPUs", "of", "idle"):
        right = column in ("idle GPUs", "of", "idle")
        table.add_column(column, justify="right" if right else "left")
    for job in result.jobs:
        table.add_row(
            *(cell(v or "") for v in (job.job_id, job.user, job.account, job.partition, job.nodes)),
            f"{job.idle_gpus:,.2f}",
            f"{job.allocated_gpus:,.2f}",
            f"{job.idle_share:.0%}",
        )
    console.print(table)
    if result.top is not None and result.job_count > len(result.jobs):
        console.print(f"{result.job_count - len(result.jobs)} more jobs: --top 0 shows all")
