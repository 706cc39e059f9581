"""`gpuyield simulate`: a cluster's year as Slurm logs with its ground truth, and sweeps.

``gpuyield simulate SCENARIO --out DIR`` is short for ``gpuyield simulate run SCENARIO --out DIR``.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

import typer
from typer.core import TyperGroup

from gpuyield import parsing
from gpuyield.cli._common import (
    call,
    console,
    errors_mapped,
    print_json,
    shown,
)
from gpuyield.cli._grammar import (
    count_option,
    duration_option,
    renamed,
    seconds_option,
    usage_error,
)
from gpuyield.cli._simulate_print import print_cases, print_summary, print_sweep
from gpuyield.errors import FieldError

if TYPE_CHECKING:
    from gpuyield.simulate import SweepResult

E = TypeVar("E", bound=StrEnum)

_DAY_S = 86_400
_DAYS_HELP = "Deprecated: --duration 30d."


def _words(text: str) -> list[str]:
    return [w.strip() for w in text.split(",") if w.strip()]


def _choice(kind: type[E], word: str, flag: str) -> E:
    try:
        return kind(word)
    except ValueError:
        usage_error(f"unknown {flag} {word!r}", hint="use " + ", ".join(str(k.value) for k in kind))


def _values(text: str, param: StrEnum) -> tuple[float, ...]:
    """``--values``: GPU counts (``1k,16k``) or checkpoint intervals (``10m,1h``; bare seconds)."""
    durations = param.value == "interval-s"
    try:
        return tuple(
            parsing.parse_duration(v, field="--values", example="10m,1h")
            if durations
            else float(parsing.parse_count(v, field="--values", example="1k,16k"))
            for v in text.split(",")
        )
    except FieldError as error:
        usage_error(f"{error.field} {error.problem}", hint=f"write e.g. {error.example}")


class _RunByDefault(TyperGroup):
    """Treat an unknown first word as a scenario for ``run`` (so ``simulate llama3-405b`` works)."""

    #: What a first word that names no command runs (the CLI snapshot shows it).
    default_command = "run"

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        # ctx is typed loosely: typer 0.29 vendors its own click, older versions use click's.
        if args and args[0] not in self.commands and not args[0].startswith("-"):
            args = [self.default_command, *args]
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
    seed: Annotated[
        int | None, typer.Option("--seed", help="Random seed (default: the scenario's).")
    ] = None,
    duration: Annotated[
        float | None,
        duration_option(
            "--duration",
            help="Simulate this long (default: the scenario's).",
            example="7d",
        ),
    ] = None,
    days: Annotated[float | None, typer.Option("--days", hidden=True, help=_DAYS_HELP)] = None,
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

    duration = renamed(
        old="--days",
        old_value=days,
        new="--duration",
        new_value=duration,
        convert=lambda d: d * _DAY_S,
        example=f"{days:g}d" if days is not None else "",
    )
    with errors_mapped():
        days_run = None if duration is None else duration / _DAY_S
        summary = run_scenario(scenario, out, seed=seed, days=days_run, utilization=utilization)
    if as_json:
        print_json(summary.truth.to_dict())
        return
    print_summary(summary)


@app.command("list")
def list_command() -> None:
    """List the bundled scenarios."""
    from gpuyield.simulate.scenario import bundled_names, load_scenario

    for name in call(bundled_names):
        console.print(
            f"{shown(name)}: {shown(call(load_scenario, name).description)}", highlight=False
        )


@app.command("validate")
def validate_command(
    as_json: Annotated[bool, typer.Option("--json", help="Print the cases as JSON.")] = False,
    markdown: Annotated[
        bool, typer.Option("--markdown", help="Print the cases as a Markdown table.")
    ] = False,
    seed: Annotated[int, typer.Option(help="Random seed of the simulated counts.")] = 0,
) -> None:
    """Published reliability cases (interruptions, ETTR): predicted vs published, with sources."""
    from gpuyield.simulate.validate import ValidationCases, validate_cases

    results = call(validate_cases, seed=seed)
    if as_json:
        print_json(ValidationCases(cases=results).to_dict())
        return
    if markdown:
        from gpuyield.simulate.validate import cases_markdown

        typer.echo(cases_markdown(results), nl=False)
        return
    print_cases(results)


@app.command("sweep")
def sweep_command(
    out: Annotated[Path, typer.Option("--out", help="Directory for sweep.csv/json/png/html.")],
    param: Annotated[
        str, typer.Option(help="What to vary: cluster-gpus, interval-s or ladder-skip-share.")
    ] = "cluster-gpus",
    values: Annotated[
        str | None,
        typer.Option(
            help="Comma-separated values: GPU counts (1k,16k), checkpoint intervals (10m,1h) or "
            "skip shares (0.1,0.3). Default depends on --param."
        ),
    ] = None,
    policy: Annotated[
        str, typer.Option(help="Comma-separated policies: restart, drop, spares, in-memory.")
    ] = "restart,drop,spares",
    seeds: Annotated[
        int,
        count_option(
            "--seeds",
            help="How many independent seeds (0, 1, 2, ...) to simulate; each figure is their mean.",
            example="3",
        ),
    ] = 3,
    duration: Annotated[
        float,
        duration_option(
            "--duration", help="Length of the simulated run.", example="30d", show_default="30d"
        ),
    ] = 30.0 * _DAY_S,
    gpus: Annotated[
        int, count_option("--gpus", help="Cluster size for interval sweeps.", example="16k")
    ] = 16384,
    checkpoint_interval: Annotated[
        int | None,
        seconds_option(
            "--checkpoint-interval",
            help="Checkpoint interval for size sweeps (default: the scenario run's).",
            at_least_s=1,
            example="1h",
        ),
    ] = None,
    checkpoint_write: Annotated[
        int | None,
        seconds_option(
            "--checkpoint-write",
            help="Checkpoint write stall (default: the scenario run's).",
            example="30s",
        ),
    ] = None,
    scenario: Annotated[
        str,
        typer.Option(
            help="Bundled scenario or TOML path whose failure model and restart costs to use."
        ),
    ] = "llama3-405b",
    jobs: Annotated[int, count_option("--jobs", help="Parallel processes.", example="2")] = 1,
    plots: Annotated[bool, typer.Option(help="Write sweep.png and sweep.html.")] = True,
    ft_calibration: Annotated[
        str | None,
        typer.Option(
            "--ft-calibration",
            help="Recovery costs measured by `python -m bench ft`: 'measured' (the bundled file) "
            "or a path; replaces the assumed restart, stall and rejoin times.",
        ),
    ] = None,
    spares_for: Annotated[
        str | None,
        typer.Option(
            "--spares-for",
            help="Which remedies take a failed node's replacement from the spare nodes: all "
            "(restart and drop alike) or restart (a dropped replica waits for its node's repair). "
            "Default: the scenario's run (all unless it says otherwise).",
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the summary as JSON.")] = False,
    markdown: Annotated[
        bool,
        typer.Option("--markdown", help="Print the assumptions and a Markdown table of values."),
    ] = False,
    skip_failure_multiplier: Annotated[
        float, typer.Option(help="ladder-skip-share: how much likelier a skipping job fails.")
    ] = 2.0,
    days: Annotated[float | None, typer.Option("--days", hidden=True, help=_DAYS_HELP)] = None,
    interval_s: Annotated[
        int | None,
        typer.Option("--interval-s", hidden=True, help="Deprecated: --checkpoint-interval."),
    ] = None,
    write_s: Annotated[
        int | None, typer.Option("--write-s", hidden=True, help="Deprecated: --checkpoint-write.")
    ] = None,
) -> None:
    """Vary cluster size or checkpoint interval over policies and seeds; write a table and plots.

    Failure rates and restart costs come from --scenario; every policy of one seed sees the same
    failures (common random numbers), so policy differences are not sampling noise.
    With --param ladder-skip-share: the research workload's waste at each share of jobs skipping
    their lower rung, against the ladder enforced (docs/ladder.md).
    """
    days_run = _sweep_days(duration, days)
    interval_s = renamed(
        old="--interval-s",
        old_value=interval_s,
        new="--checkpoint-interval",
        new_value=checkpoint_interval,
        convert=int,
        example=f"{interval_s}s",
    )
    write_s = renamed(
        old="--write-s",
        old_value=write_s,
        new="--checkpoint-write",
        new_value=checkpoint_write,
        convert=int,
        example=f"{write_s}s",
    )
    if param == "ladder-skip-share":
        from gpuyield.cli.ladder import ladder_sweep_command

        ladder_sweep_command(out, values, seeds, days_run, gpus, skip_failure_multiplier, as_json)
        return
    from gpuyield.simulate.scenario import Policy, SparesFor
    from gpuyield.simulate.sweep import SweepParam, default_values

    which = _choice(SweepParam, param, "--param")
    options = _SweepOptions(
        param=which,
        values=_values(values, which) if values else call(default_values, which),
        policies=tuple(_choice(Policy, p, "--policy") for p in _words(policy)),
        seeds=seeds,
        days=days_run,
        gpus=gpus,
        interval_s=interval_s,
        write_s=write_s,
        scenario=scenario,
        spares_for=None if spares_for is None else _choice(SparesFor, spares_for, "--spares-for"),
        ft_calibration=ft_calibration,
    )
    result = _run_sweep(options, out, jobs=jobs, plots=plots)
    print_sweep(result, out, as_json=as_json, markdown=markdown)


def _sweep_days(duration: float, days: float | None) -> float:
    """The sweep's length in days, from --duration or the deprecated --days."""
    seconds = renamed(
        old="--days",
        old_value=days,
        new="--duration",
        new_value=duration,
        convert=lambda d: d * _DAY_S,
        example=f"{days:g}d" if days is not None else "",
    )
    return seconds / _DAY_S


@dataclass(frozen=True, kw_only=True, slots=True)
class _SweepOptions:
    """What the sweep command read from its options, before the library checks it."""

    param: Any
    values: tuple[float, ...]
    policies: tuple[Any, ...]
    seeds: int
    days: float
    gpus: int
    interval_s: int | None
    write_s: int | None
    scenario: str
    spares_for: Any
    ft_calibration: str | None


def _run_sweep(options: _SweepOptions, out: Path, *, jobs: int, plots: bool) -> SweepResult:
    from gpuyield.simulate.ft_costs import load_ft_calibration
    from gpuyield.simulate.scenario import Policy
    from gpuyield.simulate.sweep import SweepSpec, base_model
    from gpuyield.simulate.sweep_files import run_and_write_sweep

    calibration = options.ft_calibration
    with errors_mapped():
        costs = (
            None
            if calibration is None
            else load_ft_calibration(None if calibration == "measured" else calibration)
        )
        base = base_model(
            days=options.days,
            gpus=options.gpus,
            interval_s=options.interval_s,
            write_s=options.write_s,
            scenario=options.scenario,
            spares_for=options.spares_for,
            costs=costs,
        )
        spec = SweepSpec(
            param=options.param,
            values=options.values,
            policies=options.policies or tuple(Policy),
            seeds=options.seeds,
            base=base.model,
            gpus_per_node=base.gpus_per_node,
            costs=costs,
            assumptions=base.assumptions,
        )
        return run_and_write_sweep(spec, out, jobs=jobs, plots=plots)
