"""`gpuyield lake ...`: a store's tables as a Parquet lake, and the check that it is sound."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from gpuyield.cli._common import console, err_console, errors_mapped, print_json
from gpuyield.cli._grammar import (
    DEFAULT_DB,
    count_option,
    db_option,
    exit_check_failed,
    number_option,
    seconds_option,
)

if TYPE_CHECKING:
    from gpuyield.lake import LakeSync
    from gpuyield.lake.synced import Serializable

app = typer.Typer(
    help="The store's tables as Parquet partitioned by cluster and day, for `report --lake` on "
    "DuckDB or Spark.",
    no_args_is_help=True,
)

LakeOption = Annotated[
    Path, typer.Option("--lake", help="Lake directory (created if missing).", show_default=False)
]


#: ``--lake`` of the commands that write a store (ingest, collect).
SyncOption = Annotated[
    Path | None,
    typer.Option(
        "--lake",
        help="Then bring this lake up to date with the store (Parquet partitions for "
        "`gpuyield report --lake`).",
    ),
]


def sync_after(db: Path, lake: Path | None) -> LakeSync | None:
    """With ``--lake``: sync the store just written into the lake (None without it)."""
    if lake is None:
        return None
    from gpuyield.lake import sync_store

    with errors_mapped(), err_console.status(f"bringing the lake {lake} up to date"):
        return sync_store(db, lake)


def print_json_with_sync(result: Serializable, synced: LakeSync | None) -> None:
    """Print a command's ``--json`` record, with what ``--lake`` wrote under ``lake``."""
    from gpuyield.lake.synced import Synced

    print_json(Synced(result=result, lake=synced).to_dict())


@app.command("export")
def export_command(
    lake: LakeOption,
    db: Annotated[Path, db_option()] = DEFAULT_DB,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print what was written as JSON.")
    ] = False,
) -> None:
    """Write a store into a lake: every partition whose rows changed (none, the second time)."""
    from gpuyield.lake import export_lake

    with errors_mapped(), err_console.status(f"exporting {db} into {lake}"):
        synced = export_lake(db, lake)
    if as_json:
        print_json(synced.to_dict())
        return
    print_sync(synced)


def print_sync(synced: Any, *, to_stderr: bool = False) -> None:
    """One line: what a sync wrote (shared by ingest and collect with --lake); on stderr where
    stdout holds a JSON record of another shape."""
    (err_console if to_stderr else console).print(
        f"lake {synced.lake}: {synced.files_written} files written ({synced.rows_written:,} rows), "
        f"{synced.files_unchanged} unchanged, {synced.files_retired} replaced "
        f"(generation {synced.generation})",
        highlight=False,
    )


@app.command("check")
def check_command(
    lake: Annotated[Path, typer.Option("--lake", help="Lake directory.", show_default=False)],
    as_json: Annotated[bool, typer.Option("--json", help="Print the findings as JSON.")] = False,
) -> None:
    """Check every file against its manifest (bytes, rows, columns, partition); exit 3 if not sound."""
    from gpuyield.lake.check import check_lake

    with errors_mapped(), err_console.status(f"checking {lake}"):
        result = check_lake(lake)
    if as_json:
        print_json(result.to_dict())
    else:
        _print_check(result)
    if not result.ok:
        exit_check_failed()


def _print_check(result: Any) -> None:
    from rich.markup import escape

    from gpuyield.safetext import visible

    state = "[green]ok[/]" if result.ok else "[bold red]failed[/]"
    console.print(
        f"{state}  {result.lake}: {result.writers} writing stores, {result.files} files, "
        f"{result.rows:,} rows, {result.size_bytes / 1e6:,.1f} MB; clusters "
        f"{', '.join(result.clusters) or '(none)'}",
        highlight=False,
    )
    for problem in result.problems:
        style = "bold red" if problem.severity == "error" else "yellow"
        console.print(
            f"[{style}]{problem.severity}:[/] {escape(visible(problem.where))} "
            f"{escape(visible(problem.message))}",
            highlight=False,
        )


@app.command("size")
def size_command(
    gpus: Annotated[
        str, typer.Option("--gpus", help="Fleet sizes in GPUs, comma-separated (1k,10k,100k).")
    ] = "1k,10k,100k",
    within_s: Annotated[
        int,
        seconds_option(
            "--within",
            help="The report's time budget.",
            at_least_s=1,
            example="10m",
            show_default="10m",
        ),
    ] = 600,
    sample_every_s: Annotated[
        int,
        seconds_option(
            "--sample-every",
            help="Utilization sample interval per GPU.",
            at_least_s=1,
            example="60s",
            show_default="60s",
        ),
    ] = 60,
    jobs_per_gpu_year: Annotated[
        int,
        count_option(
            "--jobs-per-gpu-year",
            help="Jobs a GPU runs in a year (the benchmark's 100k-GPU cluster: 122).",
            at_least=1,
            example="122",
        ),
    ] = 122,
    machine_cores: Annotated[
        int,
        count_option(
            "--machine-cores",
            help="Cores of the one large machine for DuckDB.",
            at_least=1,
            example="64",
        ),
    ] = 64,
    machine_memory: Annotated[
        float, number_option("--machine-memory-gb", help="Its memory in GB.", example="512")
    ] = 512.0,
    markdown: Annotated[bool, typer.Option("--markdown", help="Print a Markdown table.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print the sizing as JSON.")] = False,
) -> None:
    """Cores a year of a fleet's jobs and samples needs to report in time, on Spark and on DuckDB (from `python -m bench lake`)."""
    from gpuyield import parsing
    from gpuyield.lake.sizing import size_fleets

    with errors_mapped():
        fleets = [
            parsing.parse_count(g.strip(), field="lake_size.gpus", at_least=1, example="10k")
            for g in gpus.split(",")
            if g.strip()
        ]
        sizing = size_fleets(
            fleets,
            minutes=within_s / 60,
            sample_every_s=sample_every_s,
            jobs_per_gpu_year=jobs_per_gpu_year,
            machine_cores=machine_cores,
            machine_memory_gb=machine_memory,
        )
    if as_json:
        print_json(sizing.to_dict())
        return
    _print_sizing(sizing, markdown=markdown)


def _print_sizing(sizing: Any, *, markdown: bool) -> None:
    """What each fleet size needs to be reported within the minutes asked."""

    def cores(value: int | None) -> str:
        return "over the fixed part" if value is None else f"{value:,}"

    machine = f"one {sizing.machine_cores}-core {sizing.machine_memory_gb:,.0f} GB machine"
    head = (
        "GPUs",
        "jobs / year",
        "samples / year",
        "Spark executor cores",
        "DuckDB cores",
        "DuckDB memory",
        machine,
    )
    rows = [
        (
            f"{f.gpus:,}",
            f"{f.jobs / 1e6:,.1f}M",
            f"{f.samples / 1e9:,.2f}B",
            cores(f.spark_cores),
            cores(f.duckdb_cores),
            f"{f.duckdb_memory_gb:,.0f} GB",
            "yes" if f.one_machine else "no",
        )
        for f in sizing.fleets
    ]
    _table(f"reported within {sizing.minutes:g} min", head, rows, markdown=markdown)
    _print_costs(sizing, markdown=markdown)


def _print_costs(sizing: Any, *, markdown: bool) -> None:
    """The measured cost lines the sizing rests on, and how to read them."""
    costs = sizing.costs
    lines = [
        (
            kind,
            engine,
            f"{line.fixed_s:,.1f}",
            f"{line.s_per_million_per_core:,.2f}",
            f"{line.peak_mb_per_million:,.0f}",
        )
        for kind, by_engine in (("jobs", costs.jobs), ("samples", costs.samples))
        for engine, line in by_engine.items()
    ]
    console.print("")
    _table(
        "measured",
        ("rows", "engine", "fixed s", "s per million rows per core", "peak MB per million rows"),
        lines,
        markdown=markdown,
    )
    console.print(
        f"\nFrom `python -m bench lake` ({costs.measured_on}, {costs.machine}): a report's time "
        "is a fixed part plus seconds per million rows per core, the line through two sizes per "
        "engine; work per row is taken to divide evenly over cores, the fixed part not at all (a report pays "
        "the larger of its two lines' fixed parts once). "
        f"A year: {sizing.jobs_per_gpu_year} jobs per GPU, one sample per GPU every "
        f"{sizing.sample_every_s} s. DuckDB: reading the lake in one process (store: the "
        "same on a store).",
        highlight=False,
    )


def _table(
    title: str, head: Sequence[str], rows: Sequence[Sequence[str]], *, markdown: bool
) -> None:
    if markdown:
        console.print("| " + " | ".join(head) + " |", highlight=False)
        console.print(
            "|" + "|".join("---" if i < 2 else "---:" for i in range(len(head))) + "|",
            highlight=False,
        )
        for row in rows:
            console.print("| " + " | ".join(row) + " |", highlight=False)
        return
    from rich.table import Table

    table = Table(title=title, title_justify="left")
    for i, name in enumerate(head):
        table.add_column(name, justify="left" if i < 2 else "right")
    for row in rows:
        table.add_row(*row)
    console.print(table)
