"""`gpuyield lake ...`: a store's tables as a Parquet lake, and the check that it is sound."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from gpuyield.cli._common import console, err_console, errors_mapped, print_json

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


def sync_after(db: Path, lake: Path | None) -> Any:
    """With ``--lake``: sync the store just written into the lake (None without it)."""
    if lake is None:
        return None
    from gpuyield.lake import sync_store

    with errors_mapped(), err_console.status(f"bringing the lake {lake} up to date"):
        return sync_store(db, lake)


def with_sync(record: dict[str, Any], synced: Any) -> dict[str, Any]:
    """A command's ``--json`` record, with what ``--lake`` wrote under ``lake``."""
    return record if synced is None else {**record, "lake": synced.to_dict()}


@app.command("export")
def export_command(
    lake: LakeOption,
    db: Annotated[
        Path, typer.Option("--db", help="DuckDB store to export (written by `gpuyield ingest`).")
    ] = Path("gpuyield.duckdb"),
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
        raise typer.Exit(code=3)


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
