"""Release lineage: per released model, the jobs of its runs, what each kept and what it lost.

Effective training time (ETTR in MegaScale and ByteRobust, facts.md section 3) is the share of the
lineage's GPU-time that stayed in the model: released / (released + lost + overhead + diverged).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gpuyield.categories import ALLOCATED, Category
from gpuyield.ledger import Ledger

# The ledger's own rule for which lineage job ends lose progress (FAILED, NODE_FAIL, PREEMPTED...).
from gpuyield.ledger.jobs import LINEAGE_LOSS_STATES
from gpuyield.manifest import Release

_LOST = (Category.FAILED.value, Category.CANCELLED.value)
_JOB_COLUMNS = [
    "cluster",
    "job_id",
    "job_id_raw",
    "submit_s",
    "run",
    "state",
    "num_gpus",
    "clip_start_s",
    "clip_end_s",
]


@dataclass(frozen=True, kw_only=True, slots=True)
class LineagePart:
    """A piece of a lineage job's time in one category."""

    category: str
    """``released``, ``failed``, ``cancelled``, ``diverged`` or ``overhead``."""
    start_s: float
    """Start (epoch seconds)."""
    end_s: float
    """End (exclusive)."""
    gpu_seconds: float
    """GPUs x duration."""


@dataclass(frozen=True, kw_only=True, slots=True)
class LineageJob:
    """One job of a release lineage, clipped to the window."""

    run: str
    """The run it belongs to."""
    job_id: str
    """Slurm job id as printed."""
    state: str
    """Final (or current) state."""
    num_gpus: int | None
    """GPUs it held; None when sacct did not say (the job then has no parts)."""
    start_s: int
    """Start inside the window."""
    end_s: int
    """End inside the window."""
    interrupted: bool
    """Ended in a state that loses progress since the last checkpoint (failure, preemption)."""
    parts: tuple[LineagePart, ...]
    """Its categorised time, in time order."""

    @property
    def lost_gpu_seconds(self) -> float:
        """Progress lost at its end (failed or cancelled part)."""
        return sum(p.gpu_seconds for p in self.parts if p.category in _LOST)

    @staticmethod
    def from_dict(row: dict[str, Any], parts: list[LineagePart]) -> LineageJob:
        """A row of the ledger's jobs (``_JOB_COLUMNS``) and the job's parts, in time order."""
        state = str(row["state"])
        return LineageJob(
            run=str(row["run"]),
            job_id=str(row["job_id"]),
            state=state,
            num_gpus=None if row["num_gpus"] is None else int(row["num_gpus"]),
            start_s=int(row["clip_start_s"]),
            end_s=int(row["clip_end_s"]),
            interrupted=state in LINEAGE_LOSS_STATES,
            # Ties in time (an overhead pair) by category and size: one order on every engine.
            parts=tuple(
                sorted(parts, key=lambda p: (p.start_s, p.end_s, p.category, p.gpu_seconds))
            ),
        )


@dataclass(frozen=True, kw_only=True, slots=True)
class LineageFigure:
    """One released model: its runs' jobs and where their GPU-time went."""

    model: str
    """Model name from the manifest."""
    runs: tuple[str, ...]
    """Its lineage, pretraining first."""
    jobs: tuple[LineageJob, ...]
    """Every job of those runs in the window, by start."""
    gpu_seconds: dict[str, float]
    """Per allocated category, summed over the jobs (``failed``/``cancelled`` are lost progress)."""

    @property
    def lost_gpu_seconds(self) -> float:
        """Progress lost to failures and preemptions."""
        return sum(self.gpu_seconds[c] for c in _LOST)

    @property
    def total_gpu_seconds(self) -> float:
        """All GPU-time of the lineage's jobs in the window."""
        return sum(self.gpu_seconds.values())

    @property
    def effective_training_time(self) -> float | None:
        """Released / all lineage GPU-time; None when the lineage had no GPU-time in the window."""
        total = self.total_gpu_seconds
        return None if total <= 0 else self.gpu_seconds[Category.RELEASED.value] / total

    @property
    def num_interrupted(self) -> int:
        """Jobs that ended by failure or preemption (each one a restart from a checkpoint)."""
        return sum(j.interrupted for j in self.jobs)


def lineages_of(ledger: Ledger) -> tuple[LineageFigure, ...]:
    """One figure per ``[[releases]]`` entry of the manifest, in manifest order."""
    return tuple(_lineage(ledger, release) for release in ledger.manifest.releases)


def _lineage(ledger: Ledger, release: Release) -> LineageFigure:
    runs = list(release.runs)
    jobs = ledger.jobs.filter(ledger.jobs.run.isin(runs)).select(*_JOB_COLUMNS)
    segments = ledger.segments.filter(
        ledger.segments.run.isin(runs) & (ledger.segments.category != Category.DOWN.value)
    )
    parts: dict[tuple[str, str, int], list[LineagePart]] = {}
    seg_rows = (
        segments.select("cluster", "job_id_raw", "submit_s", "category", "start_s", "end_s", "gpus")
        .to_pyarrow()
        .to_pylist()
    )
    for row in seg_rows:
        key = (row["cluster"], row["job_id_raw"], int(row["submit_s"]))
        gpu_s = (row["end_s"] - row["start_s"]) * row["gpus"]
        parts.setdefault(key, []).append(
            LineagePart(
                category=row["category"],
                start_s=row["start_s"],
                end_s=row["end_s"],
                gpu_seconds=gpu_s,
            )
        )
    out_jobs = [
        LineageJob.from_dict(
            row, parts.pop((row["cluster"], row["job_id_raw"], int(row["submit_s"])), [])
        )
        for row in jobs.to_pyarrow().to_pylist()
    ]
    assert not parts, "lineage segments without a job"
    out_jobs.sort(key=lambda j: (runs.index(j.run), j.start_s, j.job_id))
    totals = {c.value: 0.0 for c in ALLOCATED}
    for job in out_jobs:
        for part in job.parts:
            totals[part.category] += part.gpu_seconds
    return LineageFigure(
        model=release.model, runs=release.runs, jobs=tuple(out_jobs), gpu_seconds=totals
    )
