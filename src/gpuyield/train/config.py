"""Settings and results of a fault-tolerance run (standard library only: the CLI parses them)."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

from gpuyield.errors import FieldError


class Mode(StrEnum):
    """How the job gets past a failed replica group."""

    # torchrun --max-restarts: the whole job restarts from its last checkpoint.
    RESTART = "restart"
    # torchft: the failed group is dropped; it heals from a live peer and rejoins.
    DROP = "drop"


@dataclass(frozen=True, kw_only=True, slots=True)
class FailurePlan:
    """Kill replica group ``group`` (SIGKILL of its process) while it computes step ``step``."""

    step: int
    group: int

    @classmethod
    def parse(cls, text: str) -> FailurePlan:
        """``STEP:GROUP``, one of ``train.failures`` (the CLI's ``--fail-at``)."""
        step, sep, group = text.partition(":")
        try:
            if not sep:
                raise ValueError(text)
            return cls(step=int(step), group=int(group))
        except ValueError:
            raise FieldError(
                "train.failures", f": {text!r} is not STEP:GROUP", example="60:1"
            ) from None


@dataclass(frozen=True, kw_only=True, slots=True)
class TrainConfig:
    """One run: model, data, schedule and failures. Same config + seed -> same data order."""

    mode: Mode
    replicas: int = 3
    steps: int = 200
    failures: tuple[FailurePlan, ...] = ()
    seed: int = 0
    #: Model: layers, width, heads, context (characters). The default has ~0.8M parameters.
    n_layer: int = 4
    n_embd: int = 128
    n_head: int = 4
    block: int = 64
    #: Sequences per replica group per step: the global batch is replicas x batch while all live.
    batch: int = 8
    lr: float = 3e-3
    warmup_steps: int = 20
    #: restart mode: save a checkpoint every this many steps.
    checkpoint_every: int = 50
    #: Held-out loss every this many steps (0: only at the end), on eval_batches batches.
    eval_every: int = 50
    eval_batches: int = 8
    #: torch threads per replica process (the machine is shared; 1 keeps replicas from fighting).
    threads: int = 1
    #: GPUs each replica group stands for, in the lost GPU-seconds (a CPU process here).
    gpus_per_replica: int = 1
    #: drop: seconds before a killed group's process is started again (a scheduler noticing and
    #: restarting it). Longer than the lighthouse's 2 s heartbeat timeout, so the survivors always
    #: form a quorum without the dead group first, on fast machines too.
    restart_delay_s: float = 3.0
    backend: str = "gloo"
    #: Longest a run may take before it is stopped and reported as failed.
    timeout_s: float = 900.0
    run: str = field(default="")

    def __post_init__(self) -> None:
        if self.replicas < 2:
            raise FieldError(
                "train.replicas", "must be >= 2", hint="a lone replica has no peer to heal from"
            )
        for name in ("steps", "n_layer", "n_embd", "n_head", "block", "batch", "checkpoint_every"):
            if getattr(self, name) < 1:
                raise FieldError(f"train.{name}", "must be >= 1")
        if self.n_embd % self.n_head:
            raise FieldError("train.n_embd", "must be a multiple of train.n_head")
        for plan in self.failures:
            if not 0 < plan.step < self.steps:
                raise FieldError(
                    "train.failures",
                    f": {plan.step}:{plan.group}: the step must be in 1..{self.steps - 1}",
                )
            if not 0 <= plan.group < self.replicas:
                raise FieldError(
                    "train.failures",
                    f": {plan.step}:{plan.group}: the group must be in 0..{self.replicas - 1}",
                )
        if not self.restart_delay_s >= 0:
            raise FieldError("train.restart_delay_s", "must be >= 0")
        if self.backend not in ("gloo", "nccl"):
            raise FieldError("train.backend", f"{self.backend!r}: use gloo or nccl")

    @property
    def run_name(self) -> str:
        """The run name the telemetry carries."""
        return self.run or f"ft-{self.mode.value}-s{self.seed}"

    def to_dict(self) -> dict[str, object]:
        """The config as JSON data (``config.json``, what the worker processes read)."""
        data = asdict(self)
        data["mode"] = self.mode.value
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TrainConfig:
        """Inverse of ``to_dict``."""
        data = dict(data)
        data["mode"] = Mode(data["mode"])
        data["failures"] = tuple(FailurePlan(**f) for f in data["failures"])
        return cls(**data)


@dataclass(frozen=True, kw_only=True, slots=True)
class EvalPoint:
    """Held-out loss after ``step`` committed steps."""

    step: int
    loss: float


@dataclass(frozen=True, kw_only=True, slots=True)
class RunSummary:
    """``summary.json``: what one run did and what its failures cost (from gpuyield.ledger.ft)."""

    mode: Mode
    run: str
    replicas: int
    steps_done: int
    final_loss: float
    wall_s: float
    #: From the first process start to the last committed step (no launcher start-up, and no wait
    #: at the end for a late group to heal).
    to_last_step_s: float
    steps_per_s: float
    lost_gpu_seconds: float
    stall_s: float
    stall_gpu_seconds: float
    lost_work_gpu_seconds: float
    heal_s: float
    heal_gpu_seconds: float
    restart_s: float
    restart_gpu_seconds: float
    failures: int
    restarts: int
    #: Held-out loss over the run, in step order: the curve.
    eval_curve: tuple[EvalPoint, ...]

    def to_dict(self) -> dict[str, object]:
        """``summary.json`` and ``gpuyield train-ft --json``: every field, the curve as a list."""
        data = asdict(self)
        data["mode"] = self.mode.value
        return data

    def write(self, path: Path) -> None:
        """Write as JSON."""
        path.write_text(json.dumps(self.to_dict(), indent=2) + "\n", encoding="utf-8")
