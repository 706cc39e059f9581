"""`gpuyield train-ft` and `gpuyield ft-loss`: the drop-vs-restart experiment and its accounting."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from gpuyield.cli._common import console, errors_mapped, print_json, shown
from gpuyield.cli._grammar import (
    DEFAULT_DB,
    SEED_HELP,
    count_option,
    db_option,
    duration_option,
    renamed,
    usage_error,
)
from gpuyield.errors import MissingExtraError

if TYPE_CHECKING:
    from gpuyield.train.config import RunSummary


def train_ft_command(
    mode: Annotated[
        str,
        typer.Option(
            help="drop: torchft drops the failed group, which heals from a peer; "
            "restart: torchrun restarts every group from the last checkpoint."
        ),
    ],
    out: Annotated[
        Path, typer.Option("--out", help="Directory for telemetry.jsonl, summary.json, logs/.")
    ],
    replicas: Annotated[
        int, count_option("--replicas", help="Data-parallel replica groups (processes).")
    ] = 3,
    steps: Annotated[int, count_option("--steps", help="Optimizer steps to train.")] = 200,
    fail_at: Annotated[
        list[str] | None,
        typer.Option(
            "--fail-at", help="STEP:GROUP: SIGKILL that group while it computes that step."
        ),
    ] = None,
    seed: Annotated[
        int, typer.Option("--seed", help=SEED_HELP + " Here: the weights and the data order.")
    ] = 0,
    checkpoint_every: Annotated[
        int, count_option("--checkpoint-every", help="restart: steps between checkpoints.")
    ] = 50,
    eval_every: Annotated[
        int, count_option("--eval-every", help="Steps between held-out losses.")
    ] = 50,
    n_layer: Annotated[int, count_option("--n-layer", help="Transformer layers.")] = 4,
    n_embd: Annotated[int, count_option("--n-embd", help="Model width.")] = 128,
    batch: Annotated[int, count_option("--batch", help="Sequences per group per step.")] = 8,
    backend: Annotated[str, typer.Option(help="gloo (CPU) or nccl (GPUs).")] = "gloo",
    timeout: Annotated[
        float,
        duration_option(
            "--timeout",
            help="Stop and fail past this long.",
            at_least_s=1,
            example="15m",
            show_default="15m",
        ),
    ] = 900.0,
    as_json: Annotated[bool, typer.Option("--json", help="Print summary.json to stdout.")] = False,
    timeout_s: Annotated[
        float | None, typer.Option("--timeout-s", hidden=True, help="Deprecated: --timeout 15m.")
    ] = None,
) -> None:
    """Train a small GPT with replica groups, kill groups as planned, and measure what it cost."""
    timeout = renamed(
        old="--timeout-s",
        old_value=timeout_s,
        new="--timeout",
        new_value=timeout,
        convert=float,
        example=f"{timeout_s:g}s" if timeout_s is not None else "",
    )
    from gpuyield.train.config import Mode

    try:
        chosen_mode = Mode(mode)
    except ValueError:
        usage_error(f"unknown --mode {mode!r}", hint="use drop or restart")
    with errors_mapped():
        try:
            import torch  # noqa: F401
            import torchft  # noqa: F401
        except ImportError as error:
            raise MissingExtraError("train", error.name or "torchft") from error
        from gpuyield.train.config import FailurePlan, TrainConfig
        from gpuyield.train.launch import train_ft

        config = TrainConfig(
            mode=chosen_mode,
            replicas=replicas,
            steps=steps,
            failures=tuple(FailurePlan.parse(f) for f in fail_at or ()),
            seed=seed,
            checkpoint_every=checkpoint_every,
            eval_every=eval_every,
            n_layer=n_layer,
            n_embd=n_embd,
            batch=batch,
            backend=backend,
            timeout_s=timeout,
        )
        summary = train_ft(config, out)
    if as_json:
        print_json(summary.to_dict())
        return
    _print_summary(summary, out)


def _print_summary(summary: RunSummary, out: Path) -> None:
    """The run's speed and loss, then what its failures cost, in two lines."""
    console.print(
        f"{shown(summary.run)}: {summary.steps_done} steps in {summary.wall_s:.1f} s "
        f"({summary.steps_per_s:.2f} steps/s), held-out loss {summary.final_loss:.4f}"
    )
    console.print(
        f"{summary.failures} failures, {summary.restarts} restarts: lost "
        f"{summary.lost_gpu_seconds:.1f} GPU-s (stall {summary.stall_gpu_seconds:.1f}, "
        f"lost work {summary.lost_work_gpu_seconds:.1f}, heal {summary.heal_gpu_seconds:.1f}, "
        f"restart {summary.restart_gpu_seconds:.1f}); files in {shown(out)}"
    )


def ft_loss_command(
    run: Annotated[str, typer.Option("--run", help="The run, as given to ingest telemetry.")],
    db: Annotated[Path, db_option()] = DEFAULT_DB,
    as_json: Annotated[bool, typer.Option("--json", help="Print as JSON.")] = False,
) -> None:
    """Lost GPU-seconds of a fault-tolerant run by kind, from its ingested telemetry."""
    from gpuyield import store
    from gpuyield.ledger.ft import ft_loss

    with errors_mapped():
        con = store.connect(db, read_only=True)
        try:
            loss = ft_loss(con, run)
        finally:
            con.close()
    if as_json:
        print_json(loss.to_dict())
        return
    from rich.table import Table

    table = Table(title=f"{shown(run)}: lost GPU-seconds by failure")
    for column in ("replica", "step", "recovery", "lost work", "heal", "restart", "recovery s"):
        table.add_column(column, justify="right")
    for f in loss.failures:
        table.add_row(
            str(f.replica),
            str(f.step),
            f.recovery.value,
            f"{f.lost_work_gpu_s:.1f}",
            f"{f.heal_gpu_s:.1f}",
            f"{f.restart_gpu_s:.1f}",
            f"{f.recovery_s:.1f}",
        )
    console.print(table)
    console.print(
        f"survivors stalled {loss.stall_gpu_s:.1f} GPU-s; in all {loss.lost_gpu_s:.1f} GPU-s lost"
    )
