"""`gpuyield simulate`: a cluster's year as Slurm logs with its ground truth, and sweeps.

``gpuyield simulate SCENARIO --out DIR`` is short for ``gpuyield simulate run SCENARIO --out DIR``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from typer.core import TyperGroup

from gpuyield.cli._common import call, console, print_json


class _RunByDefault(TyperGroup):
    """Treat an unknown first word as a scenario for ``run`` (so ``simulate llama3-405b`` works)."""

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        # ctx is typed loosely: typer 0.29 vendors its own click, older versions use click's.
        if args and args[0] not in self.commands and not args[0].startswith("-"):
            args = ["run", *args]
        return super().parse_args(ctx, args)


app = typer.Typer(
    cls=_RunByDefault,
    help="Simulate a training cluster (failures, lineage runs, research jobs) as real Slurm logs "
    "plus truth.json; sweep cluster size, checkpoint interval and recovery policy.",
    no_args_is_help=True,
)


@app.command("run")
def run_command(
    scenario: Annotated[str, typer.Argument(help="Bundled scenario name or path to a TOML file.")],
    out: Annotated[Path, typer.Option("--out", help="Directory to write the cluster's files to.")],
    seed: Annotated[int | None, typer.Option(help="Random seed (default: the scenario's).")] = None,
    days: Annotated[
        float | None, typer.Option(help="Simulate this many days (default: the scenario's).")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print truth.json to stdout.")] = False,
    utilization: Annotated[
        bool,
        typer.Option(
            "--utilization",
            help="Also write utilization.json: DCGM GPU_UTIL series per job GPU (query_range "
            "JSON), with their idle allocated time in truth.json.",
        ),
    ] = False,
) -> None:
    """Simulate SCENARIO and write sacct.psv, events.psv, nodes.txt, manifest.toml, truth.json."""
    from gpuyield.simulate.api import run_scenario

    summary = call(run_scenario, scenario, out, seed=seed, days=days, utilization=utilization)
    if as_json:
        print_json(summary.truth)
        return
    _print_summary(summary)


def _print_summary(summary: Any) -> None:
    from rich.table import Table

    truth = summary.truth
    table = Table(title=f"{summary.scenario}: truth ({summary.out_dir})")
    table.add_column("category")
    table.add_column("GPU-hours", justify="right")
    table.add_column("share", justify="right")
    installed = truth["installed_gpu_seconds"]
    for name, gpu_s in truth["categories"].items():
        table.add_row(name, f"{gpu_s / 3600:,.0f}", f"{gpu_s / installed:.1%}")
    console.print(table)
    inter = truth["interruptions"]
    console.print(
        f"yield {truth['yield']:.1%}; interruptions {inter['unexpected']} unexpected, "
        f"{inter['planned']} planned; effective training time "
        + ", ".join(f"{k} {v:.1%}" for k, v in truth["effective_training_time"].items())
    )
    console.print(
        f"{summary.num_events:,} events, {summary.research_jobs:,} research jobs; simulated in "
        f"{summary.simulate_s:.1f} s, written in {summary.write_s:.1f} s"
    )


@app.command("list")
def list_command() -> None:
    """List the bundled scenarios."""
    from gpuyield.simulate.scenario import bundled_names, load_scenario

    for name in call(bundled_names):
        console.print(f"{name}: {call(load_scenario, name).description}", highlight=False)


@app.command("sweep")
def sweep_command(
    out: Annotated[Path, typer.Option("--out", help="Directory for sweep.csv/json/png/html.")],
    param: Annotated[
        str, typer.Option(help="What to vary: cluster-gpus or interval-s.")
    ] = "cluster-gpus",
    values: Annotated[
        str | None, typer.Option(help="Comma-separated values (default depends on --param).")
    ] = None,
    policy: Annotated[str, typer.Option(help="Comma-separated policies.")] = "restart,drop,spares",
    seeds: Annotated[int, typer.Option(help="Seeds per point.")] = 3,
    days: Annotated[float, typer.Option(help="Length of the simulated run.")] = 30.0,
    gpus: Annotated[int, typer.Option(help="Cluster size for interval sweeps.")] = 16384,
    interval_s: Annotated[int, typer.Option(help="Checkpoint interval for size sweeps.")] = 1800,
    write_s: Annotated[int, typer.Option(help="Checkpoint write stall (s).")] = 30,
    jobs: Annotated[int, typer.Option("--jobs", help="Parallel processes.")] = 1,
    plots: Annotated[bool, typer.Option(help="Write sweep.png and sweep.html.")] = True,
    as_json: Annotated[bool, typer.Option("--json", help="Print the summary as JSON.")] = False,
) -> None:
    """Vary cluster size or checkpoint interval over policies and seeds; write a table and plots."""
    from gpuyield.simulate.sweep import sweep_from_options, sweep_summary

    result = call(
        sweep_from_options,
        out=out,
        param=param,
        values=values,
        policies=policy,
        seeds=seeds,
        days=days,
        gpus=gpus,
        interval_s=interval_s,
        write_s=write_s,
        jobs=jobs,
        plots=plots,
    )
    if as_json:
        print_json(sweep_summary(result))
        return
    from rich.table import Table

    table = Table(title=f"sweep over {result.spec.param.value} ({out})")
    for col in ("policy", result.spec.param.value, "ETTR", "yield", "interruptions", "MTTF h"):
        table.add_column(col, justify="right")
    for p in result.points:
        table.add_row(
            p.policy.value,
            f"{p.value:g}",
            f"{p.ettr_mean:.3f}",
            f"{p.yield_mean:.3f}",
            f"{p.interruptions_mean:.1f}",
            f"{p.mttf_h:.3g}",
        )
    console.print(table)
    for pol, o in result.optimum.items():
        console.print(
            f"{pol}: best interval {o['best_s']:g} s; Young {o['young_s']:.0f} s; "
            f"Daly {o['daly_s']:.0f} s"
        )
