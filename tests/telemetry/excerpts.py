"""The real Megatron loss excerpts (BigScience), and rendering them back into Megatron log lines."""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path

EXCERPTS = (
    Path(__file__).resolve().parents[3]
    / "shared"
    / "data"
    / "megatron-loss-excerpts"
    / "megatron_log_lines.csv"
)


@dataclass(frozen=True, kw_only=True, slots=True)
class ExcerptLine:
    """One transcribed Megatron line (BigScience chronicles, see the data folder's file)."""

    source_file: str
    code_block: int
    kind: str
    iteration: int
    total_iterations: int | None
    lm_loss: float
    loss_scale: float | None
    grad_norm: float | None


def _opt(text: str) -> float | None:
    return float(text) if text else None


def load_excerpts() -> list[ExcerptLine]:
    with EXCERPTS.open(newline="") as handle:
        return [
            ExcerptLine(
                source_file=row["source_file"],
                code_block=int(row["code_block"]),
                kind=row["kind"],
                iteration=int(row["iteration"]),
                total_iterations=int(row["total_iterations"]) if row["total_iterations"] else None,
                lm_loss=float(row["lm_loss"]),
                loss_scale=_opt(row["loss_scale"]),
                grad_norm=_opt(row["grad_norm"]),
            )
            for row in csv.DictReader(handle)
        ]


def megatron_line(line: ExcerptLine) -> str:
    """The line as Megatron-DeepSpeed prints it (fields and number formats as the originals)."""
    if line.kind == "validation":
        return (
            f" validation loss at iteration {line.iteration} | lm loss value: "
            f"{line.lm_loss:.6E} | lm loss PPL: 1.000E+00 | "
        )
    scale = f" loss scale: {line.loss_scale:.1f} |" if line.loss_scale is not None else ""
    grad = f" grad norm: {line.grad_norm:.3f} |" if line.grad_norm is not None else ""
    return (
        f" iteration {line.iteration:>8d}/{line.total_iterations:>8d} | consumed samples: "
        f"{1024 * line.iteration:>12d} | elapsed time per iteration (ms): 22148.5 | learning rate: "
        f"9.849E-05 | global batch size:  1024 | lm loss: {line.lm_loss:.6E} |{scale}{grad} "
        "num zeros: 0.0 | number of skipped iterations:   0 | number of nan iterations:   0 |"
    )
