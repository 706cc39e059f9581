"""How `gpuyield simulate` prints on a terminal: a run's truth, the published cases, a sweep.

JSON and Markdown come from the library's records (``to_dict``, ``*_markdown``); these are the
Rich tables and lines a person reads.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer

from gpuyield.cli._common import console, err_console, plain, print_json, shown

if TYPE_CHECKING:
    from gpuyield.simulate import RunSummary, SweepResult
    from gpuyield.simulate.validate import CaseResult


def print_summary(summary: RunSummary) -> None:
    """The run's truth by category, its yield and interruptions."""
    from rich.table import Table

    truth = summary.truth
    if truth.assumptions is not None:
        for line in truth.assumptions.lines():
            console.print(plain(line), markup=False, highlight=False)
    table = Table(title=f"{shown(summary.scenario)}: truth ({shown(summary.out_dir)})")
    table.add_column("category")
    table.add_column("GPU-hours", justify="right")
    table.add_column("share", justify="right")
    installed = truth.installed_gpu_seconds
    for name, gpu_s in truth.categories.items():
        table.add_row(name, f"{gpu_s / 3600:,.0f}", f"{gpu_s / installed:.1%}")
    console.print(table)
    inter = truth.interruptions
    console.print(
        f"yield {truth.yield_:.1%}; interruptions {inter.unexpected} unexpected, "
        f"{inter.planned} planned; effective training time "
        + ", ".join(f"{k} {v:.1%}" for k, v in truth.effective_training_time.items())
    )
    console.print(f"{summary.num_events:,} events, {summary.research_jobs:,} research jobs")
    if err_console.is_terminal:
        # How long it took, like a progress bar: on a terminal only, so the output on a pipe
        # (a log, a doc's figure) is the same in every run.
        err_console.print(
            f"simulated in {summary.simulate_s:.1f} s, written in {summary.write_s:.1f} s"
        )


def print_cases(results: tuple[CaseResult, ...]) -> None:
    """Each published case: predicted and simulated against published, and whether it fits."""
    from rich.table import Table

    table = Table(title="Published reliability cases: predicted vs published")
    for col in (
        "case",
        "table",
        "GPUs",
        "MTBF min",
        "predicted",
        "simulated",
        "published",
        "ETTR",
        "ok",
    ):
        table.add_column(col)
    for r in results:
        c = r.case
        published = (
            str(c.published_interruptions)
            if c.published_interruptions is not None
            else f"> {c.published_min_interruptions}"
            if c.published_min_interruptions is not None
            else f"ETTR {c.published_ettr or c.published_min_ettr}"
        )
        table.add_row(
            c.id + (" (in-sample)" if c.in_sample else ""),
            c.table,
            f"{c.gpus:,}",
            f"{r.mtbf_minutes:,.0f}",
            f"{r.predicted_interruptions:,.1f} ({r.band[0]:,.0f}-{r.band[1]:,.0f})",
            f"{r.simulated_interruptions:,}",
            published,
            f"{r.simulated_ettr:.3f}",
            "yes" if r.within else "no (documented)" if c.expect_outside else "NO",
        )
    console.print(table)
    for r in results:
        if not r.within and r.case.expect_outside:
            console.print(f"{r.case.id}: {r.case.expect_outside}", markup=False, highlight=False)


def print_sweep(result: SweepResult, out: Path, *, as_json: bool, markdown: bool) -> None:
    """A sweep as JSON, Markdown, or a table with each policy's best interval."""
    if as_json:
        print_json(result.to_dict())
        return
    if markdown:
        from gpuyield.simulate.sweep_table import sweep_markdown

        typer.echo(sweep_markdown(result), nl=False)
        return
    from rich.table import Table

    if result.spec.assumptions is not None:
        for line in result.spec.assumptions.lines():
            console.print(plain(line), markup=False, highlight=False)
    table = Table(title=f"sweep over {result.spec.param.value} ({shown(out)})")
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
            f"{pol}: best interval {o.best_s:g} s; Young {o.young_s:.0f} s; Daly {o.daly_s:.0f} s"
        )
