"""`gpuyield collect`: query Slurm for what happened since the last collection and ingest it."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated

import typer

from gpuyield.cli._common import console, errors_mapped, parse_duration, print_json, shown
from gpuyield.cli.ingest import parse_instant
from gpuyield.cli.lake import SyncOption, print_sync, sync_after, with_sync
from gpuyield.errors import InputError

_SIZE_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}


def parse_size(text: str, option: str) -> int:
    """``4G``, ``512M``, ``100k`` or plain bytes (binary units; a trailing ``B`` is allowed)."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([kmgt]?)i?b?\s*", text, re.IGNORECASE)
    if match is None:
        raise InputError(f"{option}: not a size: {text!r}", hint="write it like 4G, 512M or 100k")
    return int(float(match.group(1)) * _SIZE_UNITS[match.group(2).lower()])


def collect_command(
    db: Annotated[
        Path, typer.Option("--db", help="DuckDB file to write (created if missing).")
    ] = Path("gpuyield.duckdb"),
    since: Annotated[
        str | None,
        typer.Option(
            help="Where the first collection starts (ISO time). Later runs continue from the "
            "store's watermark; an earlier --since backfills."
        ),
    ] = None,
    until: Annotated[
        str | None, typer.Option(help="End of the collection (ISO time). Default: now.")
    ] = None,
    cluster: Annotated[
        str | None,
        typer.Option(help="Cluster to collect. Default: ClusterName of `scontrol show config`."),
    ] = None,
    overlap: Annotated[
        str,
        typer.Option(
            help="Re-read this much before the watermark, so jobs running at the last "
            "collection are updated (e.g. 1h, 30m)."
        ),
    ] = "1h",
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
    tz: Annotated[
        str, typer.Option(help="Time zone of --since/--until without an offset.")
    ] = "UTC",
    max_output: Annotated[
        str,
        typer.Option(
            "--max-output",
            help="Stop a Slurm command that prints more than this (4G, 512M); its output goes "
            "to a temporary file, never memory.",
        ),
    ] = "4G",
    as_json: Annotated[bool, typer.Option("--json", help="Print the outcome as JSON.")] = False,
    quiet: Annotated[
        bool, typer.Option("--quiet", "-q", help="No progress bars and no summary (for cron).")
    ] = False,
    lake: SyncOption = None,
) -> None:
    """Run sacct, sacctmgr and scontrol since the last collection and ingest them in one transaction (for cron)."""
    from gpuyield.cli._progress import RichProgress
    from gpuyield.ingest.collect import collect

    with errors_mapped({"collect.until": "--until", "collect.max_output_bytes": "--max-output"}):
        since_s = parse_instant(since, tz, "--since")
        until_s = parse_instant(until, tz, "--until")
        overlap_s = parse_duration(overlap, "--overlap")
        max_output_bytes = parse_size(max_output, "--max-output")
        with RichProgress(enabled=not (as_json or quiet)) as progress:
            outcome = collect(
                db,
                since_s=since_s,
                until_s=until_s,
                cluster=cluster,
                overlap_s=overlap_s,
                keep_raw=keep_raw,
                slurm_bin=slurm_bin,
                manifest=manifest,
                progress=progress,
                max_output_bytes=max_output_bytes,
            )
    synced = sync_after(db, lake)
    if as_json:
        print_json(with_sync(outcome.to_dict(), synced))
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
