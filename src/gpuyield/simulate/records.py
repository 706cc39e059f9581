"""Records the simulator produces: sacct rows of lineage jobs, node events, per-category tallies."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

# Slurm state strings as ``sacct`` prints them (``CANCELLED by <uid>`` carries the canceller).
COMPLETED = "COMPLETED"
FAILED = "FAILED"
NODE_FAIL = "NODE_FAIL"
PREEMPTED = "PREEMPTED"
REQUEUED = "REQUEUED"
TIMEOUT = "TIMEOUT"
OUT_OF_MEMORY = "OUT_OF_MEMORY"
RUNNING = "RUNNING"
PENDING = "PENDING"
CANCELLED_BY_ADMIN = "CANCELLED by 0"
#: The run's own user (uid 1001) stops a lineage job that diverged, to roll back.
CANCELLED_BY_USER = "CANCELLED by 1001"


@dataclass(frozen=True, kw_only=True, slots=True)
class JobRow:
    """One ``sacct -X -D`` row: one run of a job (requeued jobs have several rows, same id)."""

    job_id: int
    name: str
    #: Run id written as ``Comment=run=<run>``.
    run: str
    user: str
    uid: int
    account: str
    partition: str
    submit_s: int
    eligible_s: int
    #: None: never started (``None assigned``).
    start_s: int | None
    #: None: still running or pending at the window end (``Unknown``).
    end_s: int | None
    state: str
    #: Node indices (0-based) of the allocation.
    nodes: tuple[int, ...]
    num_gpus: int
    #: ``None`` for a first run, ``BeginTime`` for a requeued run.
    reason: str = "None"
    #: Minutes; None prints ``UNLIMITED``.
    time_limit_min: int | None = None
    exit_code: str = "0:0"

    def __post_init__(self) -> None:
        assert self.start_s is None or self.start_s >= self.submit_s, self
        assert self.end_s is None or self.start_s is None or self.end_s >= self.start_s, self


@dataclass(frozen=True, kw_only=True, slots=True)
class NodeEvent:
    """One ``sacctmgr show event`` row of a node."""

    node: int
    #: ``DOWN``, ``DOWN*`` (not responding), ``DRAIN`` or ``MAINT``.
    state: str
    start_s: int
    #: None: still open at the window end (``Unknown``).
    end_s: int | None
    reason: str
    user: str = "root(0)"


@dataclass(kw_only=True, slots=True)
class Tally:
    """GPU-seconds by category and subcategory, accumulated while simulating (so mutable)."""

    categories: Counter[str] = field(default_factory=Counter)
    subcategories: Counter[str] = field(default_factory=Counter)

    def add(self, category: str, gpu_seconds: int, sub: str | None = None) -> None:
        """Book ``gpu_seconds`` to ``category`` (and ``category.sub`` when given)."""
        assert gpu_seconds >= 0, (category, gpu_seconds)
        self.categories[category] += gpu_seconds
        if sub is not None:
            self.subcategories[f"{category}.{sub}"] += gpu_seconds

    def move(self, source: str, target: str, gpu_seconds: int, sub: str | None = None) -> None:
        """Rebook ``gpu_seconds`` already in ``source`` to ``target`` (a rollback's repeated
        steps: time booked as kept progress that turned out lost)."""
        assert 0 <= gpu_seconds <= self.categories[source], (source, gpu_seconds)
        self.categories[source] -= gpu_seconds
        self.add(target, gpu_seconds, sub)

    def merge(self, other: Tally) -> None:
        """Add another tally into this one."""
        self.categories.update(other.categories)
        self.subcategories.update(other.subcategories)
