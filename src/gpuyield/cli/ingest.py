"""`gpuyield ingest ...`: read cluster records into the store."""

from __future__ import annotations

import dataclasses
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any

import typer

from gpuyield import parsing
from gpuyield.cli._common import cell, console, errors_mapped, print_json, shown
from gpuyield.cli._grammar import (
    DEFAULT_DB,
    DEFAULT_ZONE,
    db_option,
    epoch_s,
    instant_option,
    seconds_option,
    usage_error,
    zone_option,
)
from gpuyield.cli.lake import SyncOption, print_json_with_sync, print_sync, sync_after

app = typer.Typer(
    help="Read scheduler accounting, node events, inventory, manifests and telemetry.",
    no_args_is_help=True,
)

DbOption = Annotated[Path, db_option()]
ZoneOption = Annotated[str, zone_option()]


@app.command("slurm")
def slurm_command(
    sacct: Annotated[
        Path | None,
        typer.Option(help="`sacct -a -P [-X] [-D] --format=...` output (- for stdin; .gz, .zst)."),
    ] = None,
    events: Annotated[
        Path | None,
        typer.Option(
            help="`sacctmgr -P show event All_Time` output; best in the long format of "
            "docs/ledger.md, whose ClusterNodes give the installed nodes over time."
        ),
    ] = None,
    nodes: Annotated[
        Path | None, typer.Option(help="Node inventory: `scontrol -o show nodes` or `sinfo -N -o`.")
    ] = None,
    manifest: Annotated[
        Path | None, typer.Option(help="Release manifest (TOML, docs/manifest.md).")
    ] = None,
    reservations: Annotated[
        Path | None,
        typer.Option(
            help="`sacctmgr -P show reservation start=... format=Cluster,Name,TimeStart,TimeEnd,"
            "Flags,NodeNames`: MAINT reservations are planned down time."
        ),
    ] = None,
    jobs_detail: Annotated[
        Path | None,
        typer.Option(
            help="`scontrol -d -o show job` output, captured while jobs run: the GPU indices "
            "each job holds (unlabelled utilization samples on shared nodes find their job)."
        ),
    ] = None,
    directory: Annotated[
        Path | None,
        typer.Option(
            "--dir",
            help="Directory with sacct.psv, events.psv, nodes.txt, manifest.toml "
            "(and reservations.psv, jobs-detail.txt).",
        ),
    ] = None,
    db: DbOption = DEFAULT_DB,
    until: Annotated[
        datetime | None,
        instant_option(
            help="Capture time: running jobs and open events end here. "
            "Default: the latest time in the input."
        ),
    ] = None,
    tz: ZoneOption = DEFAULT_ZONE,
    lenient: Annotated[
        bool, typer.Option("--lenient", help="Skip malformed rows (counted, shown in the report).")
    ] = False,
    noheader: Annotated[
        bool, typer.Option("--noheader", help="The sacct file has no header line; give --fields.")
    ] = False,
    fields: Annotated[
        str | None, typer.Option(help="Comma-separated field names of a --noheader sacct file.")
    ] = None,
    cluster: Annotated[
        str | None, typer.Option(help="Cluster name when the files lack one.")
    ] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the ingest summary as JSON.")
    ] = False,
    since: Annotated[
        datetime | None,
        instant_option(
            help="Start of the capture (the -S given to sacct): the store records the accounting "
            "as covered from here to --until. Default: the earliest job start."
        ),
    ] = None,
    strict_manifest: Annotated[
        bool,
        typer.Option(
            "--strict-manifest",
            help="A manifest run not in the data is an error (default: a warning naming it).",
        ),
    ] = False,
    quiet: Annotated[
        bool, typer.Option("--quiet", "-q", help="No progress bars and no summary.")
    ] = False,
    now: Annotated[
        datetime | None,
        instant_option(
            help="The capture's present, for a simulated or replayed capture: --until may "
            "not be later than it. Default: this machine's clock.",
        ),
    ] = None,
    lake: SyncOption = None,
) -> None:
    """Ingest Slurm accounting into the store, in one transaction; re-ingesting a file changes nothing."""
    from gpuyield.cli._progress import RichProgress
    from gpuyield.ingest.slurm import SlurmInputs, ingest_slurm

    if noheader and not fields:
        usage_error("--noheader needs --fields", hint="pass the --format list you gave sacct")
    with errors_mapped():
        inputs = SlurmInputs(
            sacct=sacct,
            events=events,
            nodes=nodes,
            manifest=manifest,
            reservations=reservations,
            jobs_detail=jobs_detail,
        )
        if directory is not None:
            inputs = inputs.merged(SlurmInputs.from_dir(directory))
        field_list = [f.strip() for f in fields.split(",")] if fields else None
        until_s = epoch_s(until, tz, "--until")
        since_s = epoch_s(since, tz, "--since")
        now_s = epoch_s(now, tz, "--now")
        with RichProgress(enabled=not (as_json or quiet)) as progress:
            summary = ingest_slurm(
                db,
                inputs,
                until_s=until_s,
                since_s=since_s,
                now_s=now_s,
                strict_manifest=strict_manifest,
                tz=tz,
                lenient=lenient,
                fields=field_list,
                cluster=cluster,
                progress=progress,
            )
    synced = sync_after(db, lake)
    if as_json:
        print_json_with_sync(summary, synced)
        return
    if not quiet:
        _print_summary(summary)
        if synced is not None:
            print_sync(synced)


def _print_summary(summary: Any) -> None:
    from rich.table import Table

    table = Table(title=f"ingested into {shown(summary.db)}", title_justify="left")
    for column in ("source", "file", "read", "rejected", "skipped", "status"):
        table.add_column(
            column, justify="right" if column in ("read", "rejected", "skipped") else "left"
        )
    for f in summary.files:
        status = f"unchanged (ingest #{f.ingest_id})" if f.skipped else f"ingest #{f.ingest_id}"
        table.add_row(
            f.source,
            cell(f.path),
            str(f.rows_read),
            str(f.rows_rejected),
            str(f.rows_skipped),
            status,
        )
    console.print(table)
    for warning in summary.warnings:
        console.print(f"[yellow]warning:[/] {shown(warning)}", highlight=False)


@app.command("telemetry")
def telemetry_command(
    files: Annotated[list[Path], typer.Argument(help="Telemetry files or directories of one run.")],
    run: Annotated[
        str, typer.Option("--run", help="The run these files belong to (as in the manifest).")
    ],
    db: DbOption = DEFAULT_DB,
    fmt: Annotated[
        str | None,
        typer.Option(
            "--format",
            help="jsonl, tensorboard, wandb, mlflow, megatron or csv "
            "(default: detected from the content).",
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print what was stored as JSON.")] = False,
    lake: SyncOption = None,
) -> None:
    """Ingest run telemetry: measured lost progress, overhead, and divergence found in the loss curve."""
    from gpuyield.ingest.runlog import ingest_telemetry_files

    with errors_mapped():
        results = ingest_telemetry_files(db, run, files, fmt=fmt)
    synced = sync_after(db, lake)
    if as_json:
        print_json([r.to_dict() for r in results])
        # The list as before; what --lake wrote goes to stderr, not into the record.
        if synced is not None:
            print_sync(synced, to_stderr=True)
        return
    for r in results:
        status = (
            f"unchanged (ingest #{r.ingest_id})"
            if r.skipped
            else (
                f"{r.records} records, {r.divergence_events} divergence events, "
                f"{r.torn_lines} torn lines skipped"
                + (
                    f", {r.ft_events} fault-tolerance rows (gpuyield report ft-loss)"
                    if r.ft_events
                    else ""
                )
            )
        )
        console.print(f"{shown(r.run)}: {shown(r.path)}: {status}", highlight=False)
    if synced is not None:
        print_sync(synced)


@app.command("gres-conf")
def gres_conf_command(
    path: Annotated[Path, typer.Argument(help="The cluster's gres.conf (with NodeName= lines).")],
    db: DbOption = Path("gpuyield.duckdb"),
    cluster: Annotated[
        str | None,
        typer.Option(help="The cluster it describes (default: the store's only cluster)."),
    ] = None,
) -> None:
    """Ingest a gres.conf: the GPU type (Type=) of each node's GPUs, for yield by GPU model."""
    from gpuyield.ingest.gpu_models import ingest_gres_conf

    with errors_mapped():
        outcome = ingest_gres_conf(db, path, cluster=cluster)
    status = (
        f"unchanged (ingest #{outcome.ingest_id})"
        if outcome.skipped
        else f"{outcome.rows_read} node GPU types (ingest #{outcome.ingest_id})"
    )
    console.print(f"{outcome.path}: {status}")


@app.command("utilization")
def utilization_command(
    prom_json: Annotated[
        list[Path] | None,
        typer.Option(
            "--prom-json",
            help="Saved /api/v1/query_range responses (DCGM exporter or jobstats metrics).",
        ),
    ] = None,
    prometheus: Annotated[
        str | None, typer.Option(help="Prometheus base URL to query (http://host:9090).")
    ] = None,
    sacct_usage: Annotated[
        list[Path] | None,
        typer.Option(
            "--sacct-usage",
            help="`sacct -a -P -D --format=JobID,JobIDRaw,Start,End,NodeList,AllocTRES,"
            "TRESUsageInAve,AdminComment`: Slurm's gres/gpuutil per step, or jobstats summaries.",
        ),
    ] = None,
    since: Annotated[
        datetime | None, instant_option(help="With --prometheus: window start.")
    ] = None,
    until: Annotated[datetime | None, instant_option(help="With --prometheus: window end.")] = None,
    step: Annotated[
        int | None,
        seconds_option(
            help="The interval the samples were taken at (30s, 1m), when you know it: the data "
            "must agree. Left out, each series' spacing is read from its data (the first "
            "sample of a series covers at most 60s). --prometheus asks at this step (60s).",
            at_least_s=1,
            example="60s",
        ),
    ] = None,
    timeout: Annotated[
        int,
        seconds_option(
            "--timeout",
            help="With --prometheus: the longest to read all its answers (10m, 1h).",
            at_least_s=1,
            example="10m",
            show_default="30m",
        ),
    ] = 1800,
    node_label: Annotated[
        str | None, typer.Option(help="Label naming the node (default: Hostname, instance...).")
    ] = None,
    gpu_label: Annotated[
        str | None, typer.Option(help="Label giving the GPU index (default: gpu, minor_number).")
    ] = None,
    job_label: Annotated[
        str | None, typer.Option(help="Label naming the Slurm job (default: hpc_job, job_id...).")
    ] = None,
    cluster: Annotated[str | None, typer.Option(help="Cluster the samples belong to.")] = None,
    tz: ZoneOption = DEFAULT_ZONE,
    db: DbOption = DEFAULT_DB,
    as_json: Annotated[bool, typer.Option("--json", help="Print what was stored as JSON.")] = False,
    lake: SyncOption = None,
) -> None:
    """Ingest per-GPU activity, so allocated GPUs measured idle move to idle.allocated."""
    from gpuyield.ingest.utilization import (
        Limits,
        MetricNames,
        PrometheusSource,
        ingest_utilization,
    )

    if prometheus is not None and (since is None or until is None):
        usage_error("--prometheus needs --since and --until", hint="the window to read")
    with errors_mapped():
        names = MetricNames()
        names = dataclasses.replace(
            names,
            node_labels=(node_label,) if node_label else names.node_labels,
            gpu_labels=(gpu_label,) if gpu_label else names.gpu_labels,
            job_labels=(job_label,) if job_label else names.job_labels,
        )
        server = None
        if prometheus is not None and since is not None and until is not None:
            server = PrometheusSource(
                url=prometheus,
                since_s=parsing.epoch_s(since, tz=tz, field="--since"),
                until_s=parsing.epoch_s(until, tz=tz, field="--until"),
                limits=Limits(deadline_s=timeout),
            )
        results = ingest_utilization(
            db,
            prom_json=prom_json or [],
            server=server,
            sacct_usage=sacct_usage or [],
            tz=tz,
            step_s=step,
            names=names,
            cluster=cluster,
        )
    synced = sync_after(db, lake)
    if as_json:
        print_json([r.to_dict() for r in results])
        if synced is not None:
            print_sync(synced, to_stderr=True)
        return
    for r in results:
        status = f"unchanged (ingest #{r.ingest_id})" if r.skipped else f"{r.samples:,} GPU samples"
        console.print(f"{shown(r.path)}: {status}", highlight=False)
    if synced is not None:
        print_sync(synced)
