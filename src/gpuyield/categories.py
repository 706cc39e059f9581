"""The closed vocabulary of the ledger: where a GPU-second went.

Every installed GPU-second in a window belongs to exactly one ``Category``. The order of the members is
the order reports use: from time nobody could use, to time that became a released model.
"""

from __future__ import annotations

from enum import StrEnum


class Category(StrEnum):
    """Top-level ledger category of a GPU-second."""

    # Not allocated, on a node that was down, failed, drained or in maintenance: nobody could use it.
    DOWN = "down"
    # In service and not allocated: usable, but nobody used it.
    IDLE = "idle"
    # Allocated to a job that ended by failure (hardware, software, OOM, time limit), or the progress a
    # release-lineage job lost since its last checkpoint when it failed.
    FAILED = "failed"
    # Allocated to a job that was cancelled or preempted; a preempted release job loses its progress
    # since its last checkpoint here, because a person or the scheduler chose to stop it.
    CANCELLED = "cancelled"
    # Allocated to a run that diverged (marked in the manifest or found by the divergence watch).
    DIVERGED = "diverged"
    # Allocated to a job that completed but is not in a released model's lineage.
    EXPERIMENT = "experiment"
    # Start-up and checkpoint stalls inside release-lineage jobs, measured from run telemetry only.
    OVERHEAD = "overhead"
    # Allocated to a release-lineage job and kept in the released model.
    RELEASED = "released"


#: The categories of GPU-seconds a job held, in report order: every category but ``down`` and
#: ``idle`` (nobody held those). ``idle.allocated`` is held but measured idle: it sits in ``idle``.
ALLOCATED: tuple[Category, ...] = tuple(
    c for c in Category if c not in (Category.DOWN, Category.IDLE)
)


class IdleCause(StrEnum):
    """Subcategory of ``Category.IDLE`` (only with utilization samples in the store)."""

    # Allocated to a job whose GPUs were measured idle: moved out of the job's category into idle.
    ALLOCATED = "allocated"


#: ``idle.allocated``: the only idle subcategory, present only when utilization was measured.
IDLE_ALLOCATED = f"{Category.IDLE.value}.{IdleCause.ALLOCATED.value}"


class FailedCause(StrEnum):
    """Subcategory of ``Category.FAILED``."""

    # NODE_FAIL/BOOT_FAIL, or a node event on the job's nodes near its end: the machine, not the code.
    HARDWARE = "hardware"
    # FAILED with no hardware evidence: the job's own code or configuration.
    SOFTWARE = "software"
    # OUT_OF_MEMORY: the job asked for less memory than it used.
    OOM = "oom"
    # TIMEOUT/DEADLINE outside a release lineage: the job did not finish in its time.
    TIMEOUT = "timeout"


class CancelCause(StrEnum):
    """Subcategory of ``Category.CANCELLED``."""

    # PREEMPTED: the scheduler stopped it for a more important job.
    PREEMPTED = "preempted"
    # CANCELLED, REQUEUED, REVOKED: a person (or an admin) stopped it.
    USER = "user"


class DownCause(StrEnum):
    """Subcategory of ``Category.DOWN``."""

    # MAINT state or a maintenance reservation: someone chose to take it down.
    PLANNED = "planned"
    # DOWN, DOWN*, FAIL, DRAIN without maintenance: the node broke or was pulled for a fault.
    UNPLANNED = "unplanned"


#: Every ``category.subcategory`` key reports carry (zeros included, so the shape never changes).
SUBCATEGORIES: tuple[str, ...] = (
    *(f"{Category.DOWN.value}.{c.value}" for c in DownCause),
    *(f"{Category.FAILED.value}.{c.value}" for c in FailedCause),
    *(f"{Category.CANCELLED.value}.{c.value}" for c in CancelCause),
)

#: The essay's "typical lab" split, as shares of installed GPU-time, for comparison in reports.
#: It lists only what the essay names; the remaining 7% (the essay's "double that in unrelated
#: models") is shown as "unexplained" by the report, not folded into a category.
TYPICAL_LAB_SHARES: dict[str, float] = {
    "unavailable": 0.20,
    "idle": 0.20,
    "bad runs": 0.20,
    "failures and divergence": 0.20,
    "experiments": 0.10,
    "released": 0.03,
}
