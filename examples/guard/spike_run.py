"""A stand-in for a training script: 400 steps of a falling loss that diverges at step 310.

It writes ``pt-main.jsonl`` with ``gpuyield.Recorder`` exactly as a training loop would (a job
start, every step's loss, a checkpoint every 100 steps, the job end), on a fixed clock (one step
a minute from 2026-12-01T00:00:00Z) so the file, and what ``gpuyield divergence scan`` says about
it, are the same in every run (docs/guard.md shows that output).

    python examples/guard/spike_run.py [OUT.jsonl]
"""

from __future__ import annotations

import math
import sys

from gpuyield.guard import Recorder

START_S = 1_764_547_200.0  # 2026-12-01T00:00:00Z
STEPS = 400
SPIKE_STEP = 310


class StepClock:
    """Seconds since the epoch, one minute per step."""

    def __init__(self) -> None:
        self.step = 0

    def __call__(self) -> float:
        return START_S + 60.0 * self.step


def loss_at(step: int) -> float:
    """A loss falling from 5 towards 2 with a 1% wiggle, x1.6 from the spike on (divergence)."""
    loss = 2.0 + 3.0 * math.exp(-step / 80) + 0.02 * math.sin(step * 1.3)
    return loss * (1.6 if step >= SPIKE_STEP else 1.0)


def main(path: str = "pt-main.jsonl") -> None:
    clock = StepClock()
    rec = Recorder(path, run="pt-main", enabled=True, clock=clock)
    rec.job_start()
    for step in range(STEPS):
        clock.step = step
        rec.step(step, loss=loss_at(step), grad_norm=0.4, tokens=(step + 1) * 4_194_304)
        if step % 100 == 0 and step:
            rec.checkpoint_saved(step, duration_s=5.0)
    rec.job_end("completed")
    rec.close()


if __name__ == "__main__":
    main(*sys.argv[1:2])
