"""`gpuyield estimate`: the essay's back-of-envelope method, its work shown and its sources cited.

Each command parses its options, calls one function of ``gpuyield.estimate`` and prints a Rich table
(formula, substituted numbers, result), ``--json`` or ``--markdown``. Numbers are typed as people
type them (405B, 15T, 16M, 2^24, $30M, 40%) and any may be a range low:high or low:central:high.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Annotated, Any, Protocol

import typer

from gpuyield.cli._common import call, cell, console, plain, print_json, shown

if TYPE_CHECKING:
    from gpuyield.estimate import ClaimCheck, Worksheet

app = typer.Typer(
    help=(
        "Back-of-envelope estimates with shown work: training time and cost, model size from "
        "decode speed or budget, a lab's yield, and a check of the essay's arithmetic."
    ),
    no_args_is_help=True,
)

NUMBER_HELP = "Forms: 405B, 15T, 16M, 2^24, 1.5e12, $30M, 40%; a range is low:high or low:mid:high."

JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")]
MarkdownOpt = Annotated[
    bool, typer.Option("--markdown", help="Print a Markdown table, for pasting into a post.")
]
AcceleratorOpt = Annotated[
    str | None,
    typer.Option(help="Accelerator id from the catalog (see `gpuyield estimate accelerators`)."),
]
PrecisionOpt = Annotated[
    str | None, typer.Option(help="Peak to divide by: bf16 or fp8 (default bf16, or the model's).")
]
MfuOpt = Annotated[
    str, typer.Option(help=f"Model FLOPs utilization, a fraction of dense peak. {NUMBER_HELP}")
]


@app.command()
def train(
    params: Annotated[str | None, typer.Option(help=f"Active parameters N. {NUMBER_HELP}")] = None,
    tokens: Annotated[str | None, typer.Option(help=f"Training tokens D. {NUMBER_HELP}")] = None,
    gpus: Annotated[str | None, typer.Option(help="GPUs in the run (for wall days).")] = None,
    accelerator: AcceleratorOpt = None,
    mfu: MfuOpt = "0.4",
    precision: PrecisionOpt = None,
    batch_tokens: Annotated[
        str | None, typer.Option(help="Tokens per optimizer step (for batches, seconds each).")
    ] = None,
    price_per_gpu_hour: Annotated[
        str | None, typer.Option(help="US dollars per GPU-hour (for the cost).")
    ] = None,
    model: Annotated[
        str | None,
        typer.Option(help="Catalog model id: fills params, tokens, hardware; adds implied MFU."),
    ] = None,
    reported_gpu_hours: Annotated[
        str | None,
        typer.Option(help="GPU-hours a run reported: adds the MFU they imply (both kinds)."),
    ] = None,
    peak_tflops: Annotated[
        str | None,
        typer.Option(help="Dense peak TFLOP/s per chip, for hardware not in the catalog."),
    ] = None,
    json_out: JsonOpt = False,
    markdown: MarkdownOpt = False,
) -> None:
    """FLOPs (6ND), GPU-hours, wall days, seconds per batch, batches and cost of a training run.

    GPU-hours come twice: at the training-step MFU (--mfu, the essay's 40%) and as a range at the
    effective, all-in MFU of published runs on the same accelerator generation (what reported
    GPU-hours, with restarts and evaluation, look like).
    """
    from gpuyield.estimate import estimate_train

    result = call(
        estimate_train,
        params=params,
        tokens=tokens,
        gpus=gpus,
        accelerator=accelerator,
        mfu=mfu,
        precision=precision,
        batch_tokens=batch_tokens,
        price_per_gpu_hour=price_per_gpu_hour,
        model=model,
        reported_gpu_hours=reported_gpu_hours,
        peak_tflops=peak_tflops,
    )
    _emit(result, json_out, markdown)
    if not (json_out or markdown):
        _print_two_mfus(result, mfu)


def _print_two_mfus(result: Any, mfu: str) -> None:
    """One line saying which MFU gave which GPU-hours."""
    from gpuyield.estimate.numbers import format_number, format_percent, format_range

    console.print(
        f"GPU-hours {format_range(result.gpu_hours)} at training-step MFU "
        f"{mfu}; {format_range(result.gpu_hours_range)} at the effective, all-in MFU "
        f"{format_percent(result.effective_mfu)} of {result.effective_basis}.",
        markup=False,
        highlight=False,
    )
    cal, hours = result.calibrated_mfu, result.gpu_hours_calibrated
    console.print(
        f"Expected {format_number(hours.central)} GPU-hours ({cal.coverage:.0%} interval "
        f"{format_number(hours.low)} - {format_number(hours.high)}, from {cal.support} "
        f"leave-one-out residuals of {cal.basis}).",
        markup=False,
        highlight=False,
    )


@app.command()
def validate(json_out: JsonOpt = False, markdown: MarkdownOpt = False) -> None:
    """Run the estimator over every published run in the catalog: predicted vs reported hours."""
    from gpuyield.estimate.validate import validate_catalog, validation_markdown

    report = call(validate_catalog)
    if json_out:
        print_json(report.to_dict())
        return
    if markdown:
        typer.echo(validation_markdown(report), nl=False)
        return
    from gpuyield.estimate.numbers import format_number

    columns = ("run", "on", "reported GPU-h", "expected", "80% interval", "ratio", "in", "range in")
    rows = [
        (
            r.id,
            r.accelerator,
            format_number(r.reported_gpu_hours),
            format_number(r.expected_gpu_hours),
            f"{format_number(r.interval_gpu_hours[0])} - {format_number(r.interval_gpu_hours[1])}",
            f"{r.expected_ratio:.2f}",
            "yes" if r.in_interval else "no",
            "yes" if r.in_range else "no",
        )
        for r in report.rows
    ]
    console.print(_table("Published runs: reported vs expected GPU-hours", columns, rows))
    s = report.overall
    console.print(
        f"80% interval, leave-one-out: {s.coverage:.0%} of {s.runs} runs inside, median width "
        f"{s.median_width:.2f}x; expected hours off by {s.median_ratio:.2f}x at the median, "
        f"{s.worst_ratio:.2f}x at worst. Old range (lowest-highest effective MFU of the "
        f"generation): {report.share_in_range:.0%} in range.",
        markup=False,
        highlight=False,
    )


@app.command("params-from-speed")
def params_from_speed(
    tokens_per_s: Annotated[
        str, typer.Option(help=f"Observed single-stream decode speed. {NUMBER_HELP}")
    ],
    accelerator: AcceleratorOpt = None,
    num_chips: Annotated[str, typer.Option(help="Chips holding one copy of the model.")] = "1",
    bytes_per_param: Annotated[
        str, typer.Option(help="Bytes per weight: 2 BF16, 1 FP8, 0.5 INT4.")
    ] = "2",
    efficiency: Annotated[
        str, typer.Option(help="Achieved fraction of HBM bandwidth (1 = hard upper bound).")
    ] = "1",
    context_tokens: Annotated[str, typer.Option(help="Context tokens read per step.")] = "0",
    kv_bytes_per_token: Annotated[
        str, typer.Option(help="KV-cache bytes per context token.")
    ] = "0",
    bandwidth_tbps: Annotated[
        str | None,
        typer.Option(help="HBM TB/s per chip, instead of the accelerator's (a box with 1 chip)."),
    ] = None,
    json_out: JsonOpt = False,
    markdown: MarkdownOpt = False,
) -> None:
    """Upper bound on ACTIVE parameters (not total) from tokens per second and HBM bandwidth."""
    from gpuyield.estimate import params_from_speed as run

    result = call(
        run,
        tokens_per_s=tokens_per_s,
        accelerator=accelerator,
        num_chips=num_chips,
        bytes_per_param=bytes_per_param,
        efficiency=efficiency,
        context_tokens=context_tokens,
        kv_bytes_per_token=kv_bytes_per_token,
        bandwidth_tbps=bandwidth_tbps,
    )
    _emit(result, json_out, markdown)


@app.command("params-from-budget")
def params_from_budget(
    tokens: Annotated[str, typer.Option(help=f"Training tokens D. {NUMBER_HELP}")],
    accelerator: Annotated[
        str, typer.Option(help="Accelerator id (see `gpuyield estimate accelerators`).")
    ],
    dollars: Annotated[str | None, typer.Option(help="Training budget, US dollars.")] = None,
    price_per_gpu_hour: Annotated[str | None, typer.Option(help="US dollars per GPU-hour.")] = None,
    gpu_hours: Annotated[str | None, typer.Option(help="GPU-hours, instead of dollars.")] = None,
    mfu: MfuOpt = "0.4",
    precision: Annotated[str, typer.Option(help="Peak to divide by: bf16 or fp8.")] = "bf16",
    json_out: JsonOpt = False,
    markdown: MarkdownOpt = False,
) -> None:
    """Active parameters a budget trains on D tokens (the essay's Sonnet estimate)."""
    from gpuyield.estimate import params_from_budget as run

    result = call(
        run,
        tokens=tokens,
        accelerator=accelerator,
        dollars=dollars,
        price_per_gpu_hour=price_per_gpu_hour,
        gpu_hours=gpu_hours,
        mfu=mfu,
        precision=precision,
    )
    _emit(result, json_out, markdown)


@app.command()
def lab(
    scenario: Annotated[
        str,
        typer.Argument(help="Bundled scenario id (see `gpuyield estimate labs`) or a .toml file."),
    ],
    json_out: JsonOpt = False,
    markdown: MarkdownOpt = False,
) -> None:
    """A lab's yield: released GPU-hours over the fleet's, in H100-equivalents and (with a price) dollars, every step shown."""
    from gpuyield.estimate import estimate_lab

    result = call(estimate_lab, scenario)
    _emit(result, json_out, markdown)


@app.command()
def labs(json_out: JsonOpt = False) -> None:
    """List the bundled lab scenarios."""
    from gpuyield.estimate import list_lab_scenarios

    names = call(list_lab_scenarios)
    if json_out:
        print_json(names)
        return
    for name in names:
        console.print(plain(name), markup=False, highlight=False)


@app.command("essay-check")
def essay_check(json_out: JsonOpt = False, markdown: MarkdownOpt = False) -> None:
    """Every numeric claim of the essay, recomputed, with a verdict and a one-line reason."""
    from gpuyield.estimate import check_essay, essay_to_markdown

    checks = call(check_essay)
    if json_out:
        print_json([check.to_dict() for check in checks])
    elif markdown:
        typer.echo(essay_to_markdown(checks), nl=False)
    else:
        console.print(_claims_table(checks))


@app.command()
def accelerators(json_out: JsonOpt = False) -> None:
    """The accelerator catalog: dense peaks, HBM, bandwidth, with sources."""
    from gpuyield.estimate import list_accelerators

    chips = call(list_accelerators)
    if json_out:
        print_json([chip.to_dict() for chip in chips])
        return
    columns = ("id", "BF16 TFLOP/s", "FP8 TFLOP/s", "HBM GB", "TB/s", "status", "source")
    rows = [
        (
            c.id,
            f"{c.peak_tflops_bf16:g}",
            f"{c.peak_tflops_fp8:g}" if c.peak_tflops_fp8 else "-",
            f"{c.hbm_gb:g}",
            f"{c.hbm_bandwidth_tbps:g}",
            str(c.status),
            c.source,
        )
        for c in chips
    ]
    console.print(_table("Accelerators (dense peaks per chip)", columns, rows))


@app.command()
def models(json_out: JsonOpt = False) -> None:
    """The model catalog: active/total parameters, tokens, reported GPU-hours, with sources."""
    from gpuyield.estimate import list_models
    from gpuyield.estimate.numbers import format_range

    entries = call(list_models)
    if json_out:
        print_json([m.to_dict() for m in entries])
        return
    columns = ("id", "active", "total", "tokens", "GPU-hours", "on", "status", "source")
    rows = [
        (
            m.id,
            format_range(m.active_params),
            format_range(m.total_params),
            format_range(m.tokens) if m.tokens else "-",
            format_range(m.reported_gpu_hours) if m.reported_gpu_hours else "-",
            m.accelerator,
            str(m.status),
            m.source,
        )
        for m in entries
    ]
    console.print(_table("Models (published training compute)", columns, rows))


class _Estimate(Protocol):
    """What every estimate returns: its shown work, and its JSON."""

    @property
    def worksheet(self) -> Worksheet: ...

    def to_dict(self) -> dict[str, Any]: ...


def _emit(result: _Estimate, json_out: bool, markdown: bool) -> None:
    from gpuyield.estimate import to_markdown

    sheet = result.worksheet
    if json_out:
        print_json(result.to_dict())
    elif markdown:
        typer.echo(to_markdown(sheet), nl=False)
    else:
        console.print(_sheet_table(sheet))
        for note in sheet.notes:
            # A warning (an implied figure bounded by physics, and why) is labelled as one.
            said = plain(note) if note.startswith("warning: ") else f"note: {plain(note)}"
            console.print(said, markup=False, highlight=False)


def _sheet_table(sheet: Worksheet) -> Any:
    columns = ("step", "formula", "substituted", "result", "source")
    rows = [(s.label, s.formula, s.substituted, s.shown, s.source) for s in sheet.steps]
    return _table(sheet.title, columns, rows)


def _claims_table(checks: list[ClaimCheck]) -> Any:
    columns = ("section", "claim", "essay", "recomputed", "verdict", "why")
    rows = [
        (
            c.section,
            c.claim,
            c.stated_shown,
            c.recomputed_shown,
            str(c.verdict),
            c.reason,
        )
        for c in checks
    ]
    return _table("The essay's numeric claims, recomputed", columns, rows)


def _table(title: str, columns: tuple[str, ...], rows: Sequence[tuple[str, ...]]) -> Any:
    from rich.table import Table

    table = Table(title=shown(title), show_lines=False)
    for column in columns:
        table.add_column(column)
    for row in rows:
        # Text, not markup: substituted ranges like "[0.5 .. 1]" would read as Rich tags; a
        # lab file's names are the user's.
        table.add_row(*(cell(text) for text in row))
    return table
