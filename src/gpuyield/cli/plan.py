"""`gpuyield plan`: the estimate of a training run, then that run simulated on its cluster."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from gpuyield.cli._common import console, errors_mapped, print_json
from gpuyield.cli._grammar import (
    SEED_HELP,
    SEEDS_HELP,
    count_option,
    number_option,
    seconds_option,
    usage_error,
)

_NUMBER = "Numbers as people type them: 70B, 15T, 16k."


def plan_command(
    params: Annotated[str, typer.Option(help=f"Active parameters N. {_NUMBER}")],
    tokens: Annotated[str, typer.Option(help=f"Training tokens D. {_NUMBER}")],
    gpus: Annotated[str, typer.Option(help=f"GPUs of the job (a multiple of 8). {_NUMBER}")],
    accelerator: Annotated[
        str, typer.Option(help="Accelerator id (see `gpuyield estimate accelerators`).")
    ],
    policy: Annotated[
        str, typer.Option(help="On a failure: restart (the whole job) or drop (the replica).")
    ] = "restart",
    checkpoint_interval: Annotated[
        int,
        seconds_option(
            "--checkpoint-interval",
            help="Checkpoint this often.",
            example="30m",
            show_default="30m",
        ),
    ] = 1800,
    mfu: Annotated[
        float,
        number_option(
            "--mfu",
            help="Training-step MFU while the job computes (failures simulated): 0.4 or 40%.",
            show_default="0.4",
        ),
    ] = 0.4,
    precision: Annotated[str, typer.Option(help="bf16 or fp8: which dense peak.")] = "bf16",
    seeds: Annotated[int, count_option("--seeds", help=SEEDS_HELP, example="10")] = 10,
    seed: Annotated[int, typer.Option("--seed", help=SEED_HELP)] = 0,
    scenario: Annotated[
        str,
        typer.Option(help="Bundled scenario or TOML path whose failure costs and timing to use."),
    ] = "llama3-405b",
    as_json: Annotated[bool, typer.Option("--json", help="Print the plan as JSON.")] = False,
    html: Annotated[
        Path | None, typer.Option("--html", help="Also write the one-page HTML plan here.")
    ] = None,
    write_scenario: Annotated[
        Path | None,
        typer.Option(
            "--write-scenario",
            help="Write the planned run's scenario TOML (`gpuyield simulate run FILE --seed S`).",
        ),
    ] = None,
) -> None:
    """How long a run takes on your cluster once failures and restarts are counted, and what
    dropping failed replicas or a better checkpoint interval would change.

    First the estimate from published runs (expected GPU-hours with a calibrated 80% interval),
    then the run simulated for --seeds seeds under three variants that share each seed's
    failures: as planned, the other policy, and restart at Daly's checkpoint interval.
    """
    from gpuyield.cli._progress import RichProgress
    from gpuyield.simulate.plan import PlanSpec, plan
    from gpuyield.simulate.scenario import Policy

    if policy not in ("restart", "drop"):
        usage_error(f"--policy: unknown policy {policy!r}", hint="use restart or drop")
    with errors_mapped():
        spec = PlanSpec(
            params=params,
            tokens=tokens,
            gpus=gpus,
            accelerator=accelerator,
            policy=Policy(policy),
            checkpoint_interval_s=checkpoint_interval,
            mfu=mfu,
            precision=precision,
            seeds=seeds,
            seed=seed,
            base=scenario,
        )
        with RichProgress(enabled=not as_json) as progress:
            result = plan(spec, progress=progress)
        if html is not None:
            from gpuyield.report.plan_page import write_plan_html

            write_plan_html(result, html)
    if write_scenario is not None:
        write_scenario.write_text(result.scenario_toml(), encoding="utf-8")
    if as_json:
        print_json(result.to_dict())
        return
    _print(result, html, write_scenario)


def _print(result: Any, html: Path | None, scenario_path: Path | None) -> None:
    from rich.table import Table

    data = result.to_dict()
    est = data["estimate"]
    low, high = est["gpu_hours_interval"]
    console.print(
        f"Published runs like this one: {est['gpu_hours_expected']:,.0f} GPU-hours "
        f"({low:,.0f} - {high:,.0f}, {est['interval_coverage']:.0%} interval from "
        f"{est['interval_support']} {est['interval_basis']}), {est['wall_days_expected']:.1f} "
        f"days on {result.gpus:,} GPUs.",
        markup=False,
        highlight=False,
    )
    fm = data["failure_model"]
    table = Table(
        title=f"Simulated with failures: {fm['table']}, one every {fm['mtbf_minutes']:.0f} min "
        f"({fm['rate_per_gpu_hour']:.2e} per GPU-hour)"
    )
    for col in ("variant", "checkpoint", "wall days (10-90%)", "GPU-hours held", "yield", "saved"):
        table.add_column(col, justify="right")
    saved = data["days_saved_vs_plan"]
    for v in data["variants"]:
        d, h, y = v["wall_days"], v["gpu_hours"], v["yield"]
        table.add_row(
            v["name"],
            f"{v['checkpoint_interval_s']} s",
            f"{d['median']:.1f} ({d['interval'][0]:.1f} - {d['interval'][1]:.1f})",
            f"{h['median']:,.0f}",
            f"{y['median']:.1%} ({y['interval'][0]:.1%} - {y['interval'][1]:.1%})",
            f"{saved[v['name']]:+.1f} d" if v["name"] in saved else "",
        )
    console.print(table)
    for line in data["assumptions"]:
        console.print(f"- {line}", markup=False, highlight=False)
    for what, path in (("HTML", html), ("scenario", scenario_path)):
        if path is not None:
            console.print(f"{what}: {path}", markup=False, highlight=False)
