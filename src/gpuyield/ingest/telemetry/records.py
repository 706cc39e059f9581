"""Typed records of run telemetry: what every reader returns, whatever the source format.

A reader turns one file (or one run directory) into a ``TelemetryLog``: its records in file order
plus typed views (``steps``, ``checkpoints_saved``, ...). Times are epoch seconds (UTC, float) or
``None`` where the source has no clock (a Megatron log without timestamps, a plain CSV without a
time column).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum


class TelemetryFormat(StrEnum):
    """The source formats ``gpuyield.ingest.telemetry.read`` understands."""

    # gpuyield.Recorder's JSON Lines (docs/contracts.md, "Run telemetry").
    JSONL = "jsonl"
    # TensorBoard event files (one file or a log directory), read with the tensorboard package.
    TENSORBOARD = "tensorboard"
    # Weights & Biases history exports: run.history() as CSV, scan_history() as JSON/JSONL,
    # or the UI's "Export CSV" of a panel.
    WANDB = "wandb"
    # An MLflow file store run directory (mlruns/<experiment>/<run>/metrics/...).
    MLFLOW = "mlflow"
    # Megatron-LM stdout: "iteration N/ M | ... | lm loss: ... | loss scale: ... | grad norm: ...".
    MEGATRON = "megatron"
    # A plain CSV with a step column and a loss column.
    CSV = "csv"


def _check_time(name: str, t: float | None) -> None:
    if t is not None and not math.isfinite(t):
        raise ValueError(f"{name}.t must be finite epoch seconds, got {t!r}")


@dataclass(frozen=True, kw_only=True, slots=True)
class StepRecord:
    """One logged training step (logs may hold every k-th step only)."""

    #: Optimizer step (iteration) number as the training code counts it.
    step: int
    #: When the step was logged, epoch seconds UTC; None when the source has no clock.
    t: float | None = None
    #: Training loss; NaN/Inf are kept (they are what the divergence watch looks for).
    loss: float | None = None
    #: Global gradient norm before clipping.
    grad_norm: float | None = None
    #: fp16 dynamic loss scale.
    loss_scale: float | None = None
    #: Tokens consumed so far (cumulative), when the source logs it.
    tokens: int | None = None
    #: Replica group that committed the step (fault-tolerant jobs log one line per group).
    replica: int | None = None

    def __post_init__(self) -> None:
        if self.step < 0:
            raise ValueError(f"step.step must be >= 0, got {self.step}")
        _check_time("step", self.t)
        if self.tokens is not None and self.tokens < 0:
            raise ValueError(f"step.tokens must be >= 0, got {self.tokens}")


@dataclass(frozen=True, kw_only=True, slots=True)
class CheckpointSaved:
    """A checkpoint save finished."""

    #: The step the checkpoint holds.
    step: int
    #: When the save finished, epoch seconds UTC; None when unknown.
    t: float | None = None
    #: How long the save stalled training, seconds; None when unknown.
    duration_s: float | None = None

    def __post_init__(self) -> None:
        if self.step < 0:
            raise ValueError(f"checkpoint_saved.step must be >= 0, got {self.step}")
        _check_time("checkpoint_saved", self.t)
        if self.duration_s is not None and not (self.duration_s >= 0):
            raise ValueError(f"checkpoint_saved.duration_s must be >= 0, got {self.duration_s!r}")


@dataclass(frozen=True, kw_only=True, slots=True)
class CheckpointLoaded:
    """The run resumed from a checkpoint."""

    #: The step of the checkpoint that was loaded.
    step: int
    #: When loading finished, epoch seconds UTC; None when unknown.
    t: float | None = None
    #: Replica group that loaded it, when the job logs one.
    replica: int | None = None

    def __post_init__(self) -> None:
        if self.step < 0:
            raise ValueError(f"checkpoint_loaded.step must be >= 0, got {self.step}")
        _check_time("checkpoint_loaded", self.t)


@dataclass(frozen=True, kw_only=True, slots=True)
class EvalRecord:
    """An evaluation result."""

    #: The training step evaluated.
    step: int
    #: Metric name -> value (e.g. ``{"val_loss": 2.4}``).
    metrics: Mapping[str, float]
    #: When it was logged, epoch seconds UTC; None when unknown.
    t: float | None = None

    def __post_init__(self) -> None:
        if self.step < 0:
            raise ValueError(f"eval.step must be >= 0, got {self.step}")
        _check_time("eval", self.t)


@dataclass(frozen=True, kw_only=True, slots=True)
class JobStart:
    """A job (one scheduler allocation) of the run started."""

    #: When the job started, epoch seconds UTC.
    t: float | None
    #: Slurm job id (``SLURM_JOB_ID``, or ``<array job>_<task>`` for arrays); None outside Slurm.
    job_id: str | None = None
    #: Host (Slurm node name) of the recording process.
    host: str | None = None
    #: The run's name, as given to the recorder.
    run: str | None = None
    #: Process id of the recording process.
    pid: int | None = None

    def __post_init__(self) -> None:
        _check_time("job_start", self.t)


@dataclass(frozen=True, kw_only=True, slots=True)
class JobEnd:
    """A job of the run ended (cleanly enough to say so)."""

    #: When the job ended, epoch seconds UTC.
    t: float | None
    #: How it ended, as the training code says: "completed", "failed", "diverged", ...
    status: str
    #: Job id of the job_start this end belongs to (the latest one before it in the file).
    job_id: str | None = None
    #: Host of that job_start.
    host: str | None = None

    def __post_init__(self) -> None:
        _check_time("job_end", self.t)
        if not self.status:
            raise ValueError("job_end.status must not be empty")


class FtKind(StrEnum):
    """Fault-tolerance events of a replicated job (``gpuyield train-ft``, torchft, torchrun)."""

    # A replica group fails (its process dies); written by the group right before it is killed.
    REPLICA_LOST = "replica_lost"
    # A group sees a new quorum: the set of live replica groups changed.
    QUORUM = "quorum"
    # A restarted group starts fetching the live state of a peer.
    HEAL_STARTED = "heal_started"
    # ... and holds it: it rejoins training.
    HEAL_DONE = "heal_done"
    # A process (or the whole job, without a replica) starts again after a failure.
    RESTART = "restart"


@dataclass(frozen=True, kw_only=True, slots=True)
class FtEvent:
    """One fault-tolerance event (docs/contracts.md, "Run telemetry")."""

    kind: FtKind
    #: When it happened, epoch seconds UTC.
    t: float
    #: Replica group it concerns; None for the whole job (a torchrun restart).
    replica: int | None = None
    #: Training step at the event (the step being computed when a group was lost).
    step: int | None = None
    #: replica_lost: replica groups in the job, and GPUs per group.
    replicas: int | None = None
    gpus: int | None = None
    #: quorum: its id and how many groups take part.
    quorum_id: int | None = None
    participants: int | None = None
    #: restart: 1 for the first restart.
    attempt: int | None = None

    def __post_init__(self) -> None:
        _check_time(self.kind.value, self.t)
        for name in ("replica", "step", "quorum_id", "participants"):
            value = getattr(self, name)
            if value is not None and value < 0:
                raise ValueError(f"{self.kind.value}.{name} must be >= 0, got {value}")
        for name in ("replicas", "gpus", "attempt"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise ValueError(f"{self.kind.value}.{name} must be >= 1, got {value}")


#: Any record a reader can return.
Record = StepRecord | CheckpointSaved | CheckpointLoaded | EvalRecord | JobStart | JobEnd | FtEvent


@dataclass(frozen=True, kw_only=True, slots=True)
class TelemetryLog:
    """Everything read from one telemetry source, in file order."""

    #: The file or directory read.
    path: str
    #: The format it was read as.
    format: TelemetryFormat
    #: All records in the order the source holds them (restarts show as repeated step numbers).
    records: tuple[Record, ...] = field(default_factory=tuple)
    #: Lines that were cut short by a crash (a torn last line, or one followed by a restart) and
    #: were skipped; never a silently dropped good line.
    torn_lines: int = 0

    def __post_init__(self) -> None:
        if self.torn_lines < 0:
            raise ValueError(f"telemetry_log.torn_lines must be >= 0, got {self.torn_lines}")

    @property
    def steps(self) -> tuple[StepRecord, ...]:
        """The step records, in file order."""
        return tuple(r for r in self.records if isinstance(r, StepRecord))

    @property
    def checkpoints_saved(self) -> tuple[CheckpointSaved, ...]:
        """The checkpoint saves, in file order."""
        return tuple(r for r in self.records if isinstance(r, CheckpointSaved))

    @property
    def checkpoints_loaded(self) -> tuple[CheckpointLoaded, ...]:
        """The checkpoint loads, in file order."""
        return tuple(r for r in self.records if isinstance(r, CheckpointLoaded))

    @property
    def evals(self) -> tuple[EvalRecord, ...]:
        """The evaluation records, in file order."""
        return tuple(r for r in self.records if isinstance(r, EvalRecord))

    @property
    def job_starts(self) -> tuple[JobStart, ...]:
        """The job starts, in file order."""
        return tuple(r for r in self.records if isinstance(r, JobStart))

    @property
    def job_ends(self) -> tuple[JobEnd, ...]:
        """The job ends, in file order."""
        return tuple(r for r in self.records if isinstance(r, JobEnd))

    @property
    def ft_events(self) -> tuple[FtEvent, ...]:
        """The fault-tolerance events (replica lost, quorum, heal, restart), in file order."""
        return tuple(r for r in self.records if isinstance(r, FtEvent))
