"""`gpuyield collect`: query Slurm for what happened since the last collection and ingest it."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Annotated

import typer

from gpuyield.cli._common import console, errors_mapped, shown
from gpuyield.cli._grammar import (
    DEFAULT_DB,
    DEFAULT_ZONE,
    db_option,
    epoch_s,
    instant_option,
    seconds_option,
    size_option,
    zone_option,
)
from gpuyield.cli.lake import SyncOption, print_json_with_sync, print_sync, sync_after


def collect_command(
    db: Annotated[Path, db_option()] = DEFAULT_DB,
    since: Annotated[
        datetime | None,
        instant_option(
            help="Where the first collection starts. Later runs continue from the store's "
            "watermark; an earlier --since backfills."
        ),
    ] = None,
    until: Annotated[
        datetime | None, instant_option(help="End of the collection. Default: now.")
    ] = None,
    cluster: Annotated[
        str | None,
        typer.Option(help="Cluster to collect. Default: ClusterName of `scontrol show config`."),
    ] = None,
    overlap: Annotated[
        int,
        seconds_option(
            "--overlap",
            help="Re-read this much before the watermark, so jobs running at the last "
            "collection are updated.",
            example="1h",
            show_default="1h",
        ),
    ] = 3600,
    keep_raw: Annotated[
        Path | None,
        typer.Option(
            "--keep-raw",
            help="Keep each collection's raw output (gzip) and exact commands under this "
            "directory, to trace any number back to what Slurm printed.",
        ),
    ] = None,
    slurm_bin: Annotated[
        Path | None,
        typer.Option("--slurm-bin", help="Directory of sacct, sacctmgr, scontrol. Default: PATH."),
    ] = None,
    manifest: Annotated[
        Path | None, typer.Option(help="Release manifest (TOML) to ingest with the collection.")
    ] = None,
    tz: Annotated[str, zone_option()] = DEFAULT_ZONE,
    max_output: Annotated[
        int,
        size_option(
            "--max-output",
            help="Stop a Slurm command that prints more than this (4G, 512M); its output goes "
            "to a temporary file, never memory.",
            show_default="4G",
        ),
    ] = 4 << 30,
    as_json: Annotated[bool, typer.Option("--json", help="Print the outcome as JSON.")] = False,
    quiet: Annotated[
        bool, typer.Option("--quiet", "-q", help="No progress bars and no summary (for cron).")
    ] = False,
    lake: SyncOption = None,
) -> None:
    """Run sacct, sacctmgr and scontrol since the last collection and ingest them in one transaction (for cron)."""
    from gpuyield.cli._progress import RichProgress
    from gpuyield.ingest.collect import collect

    with errors_mapped():
        since_s = epoch_s(since, tz, "--since")
        until_s = epoch_s(until, tz, "--until")
        with RichProgress(enabled=not (as_json or quiet)) as progress:
            outcome = collect(
                db,
                since_s=since_s,
                until_s=until_s,
                cluster=cluster,
                overlap_s=overlap,
                keep_raw=keep_raw,
                slurm_bin=slurm_bin,
                manifest=manifest,
                progress=progress,
                max_output_bytes=max_output,
            )
    synced = sync_after(db, lake)
    if as_json:
        print_json_with_sync(outcome, synced)
        return
    if quiet:
        return
    from gpuyield.times import iso_utc

    covered = f"covered {iso_utc(outcome.covered_since_s)} .. {iso_utc(outcome.covered_until_s)}"
    if not outcome.commands:  # --until was covered already: nothing ran
        console.print(
            f"{shown(outcome.cluster)}: already covered up to {iso_utc(outcome.until_s)}: nothing to "
            f"collect; {covered}",
            highlight=False,
        )
        return
    console.print(
        f"{shown(outcome.cluster)}: {iso_utc(outcome.since_s)} .. {iso_utc(outcome.until_s)}: "
        f"jobs {outcome.jobs_new} new, {outcome.jobs_updated} updated "
        f"({outcome.jobs_unchanged} unchanged); {outcome.node_events} node events read; "
        f"{covered}",
        highlight=False,
    )
    for warning in outcome.ingest.warnings:
        console.print(f"[yellow]warning:[/] {shown(warning)}", highlight=False)
    if synced is not None:
        print_sync(synced)
