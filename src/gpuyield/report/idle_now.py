"""Who holds idle GPUs now: the jobs whose allocated GPUs utilization samples measured idle.

"Now" is the most recent stretch of covered time, by default the last second of coverage, the
window of ``gpuyield serve``'s gauges (``gpuyield_allocated_idle_gpus`` is this list's total).
The numbers are the ledger's own: the ``idle.allocated`` segments that utilization samples move
out of each job's category (ledger/utilization.py), summed per job over the window and divided
by its length, so a job's ``idle_gpus`` is the mean number of its GPUs measured idle then.

Without samples nothing is measured: the answer says so and lists no job (never a list of zeros).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import ibis
import ibis.expr.types as ir

from gpuyield import store
from gpuyield.categories import Category, IdleCause
from gpuyield.errors import FieldError
from gpuyield.ledger import Ledger, backend_for, compute_ledger
from gpuyield.ledger.utilization import has_samples
from gpuyield.ledger.window import resolve_window
from gpuyield.report.summary import YieldReport, report_from_ledger

#: The default window: the last second of coverage, as serve's "now" gauges.
NOW_WINDOW_S = 1
#: The fields errors name (the CLI maps them to ``--window``, ``--top``).
WINDOW_FIELD = "idle_now.window_s"
TOP_FIELD = "idle_now.top"
#: The ``account`` of jobs that have none.
NO_ACCOUNT = "(none)"
NOT_MEASURED = (
    "utilization is not measured: no GPU samples in the store (gpuyield ingest utilization)"
)
NOT_COVERED = "utilization is not measured in this window: no GPU sample covers it"


@dataclass(frozen=True, kw_only=True, slots=True)
class IdleJob:
    """One job holding GPUs measured idle in the window."""

    cluster: str
    job_id: str
    """Slurm's JobID (``12_3`` for an array task)."""
    user: str | None
    account: str | None
    partition: str | None
    nodes: str | None
    """The job's node list as Slurm printed it."""
    idle_gpus: float
    """Idle GPU-seconds over the window's seconds: the mean number of its GPUs measured idle."""
    allocated_gpus: float
    """Its allocated GPU-seconds over the window's seconds."""
    idle_share: float
    """``idle_gpus / allocated_gpus`` (0..1)."""

    def to_dict(self) -> dict[str, Any]:
        """The ``--json`` shape of one row."""
        return {
            "cluster": self.cluster,
            "job_id": self.job_id,
            "user": self.user,
            "account": self.account,
            "partition": self.partition,
            "nodes": self.nodes,
            "idle_gpus": self.idle_gpus,
            "allocated_gpus": self.allocated_gpus,
            "idle_share": self.idle_share,
        }

    @staticmethod
    def from_dict(r: dict[str, Any], seconds: int) -> IdleJob:
        """A row of the per-job query, its GPU-seconds over the window's ``seconds``."""
        idle = float(r["idle_gpu_s"]) / seconds
        allocated = float(r["allocated_gpu_s"]) / seconds
        return IdleJob(
            cluster=str(r["cluster"]),
            job_id=str(r["job_id"]),
            user=r["user_name"],
            account=r["account"],
            partition=r["partition"],
            nodes=r["nodes"],
            idle_gpus=idle,
            allocated_gpus=allocated,
            idle_share=min(idle / allocated, 1.0) if allocated > 0 else 1.0,
        )


@dataclass(frozen=True, kw_only=True, slots=True)
class IdleAccount:
    """An account's idle GPUs in the window (every job of it, not only the top ones)."""

    account: str
    """``(none)`` for jobs without an account."""
    idle_gpus: float
    jobs: int
    """Its jobs holding idle GPUs."""


@dataclass(frozen=True, kw_only=True, slots=True)
class IdleNow:
    """The jobs holding GPUs measured idle at the end of the covered time."""

    measured: bool
    """False: no utilization sample covers the window, so idleness is not known."""
    note: str | None
    """Why it is not measured (None when it is)."""
    window_s: int
    """The length asked for."""
    window_start_s: int | None
    """The window (clipped to the coverage start); None when nothing was computed."""
    window_end_s: int | None
    threshold: float | None
    """Activity below which a sample counts idle."""
    samples: int
    """Samples overlapping the window."""
    idle_gpus: float
    """All jobs' idle GPUs (the ``gpuyield_allocated_idle_gpus`` gauge for the default window)."""
    job_count: int
    """Jobs holding idle GPUs, before the ``top`` cut."""
    top: int | None
    """The cut; None: every job."""
    jobs: tuple[IdleJob, ...]
    """Most idle GPUs first (then cluster, job id)."""
    accounts: tuple[IdleAccount, ...]
    """Per account, most idle GPUs first."""

    def to_dict(self) -> dict[str, Any]:
        """The ``--json`` shape (also ``/api/idle-now``)."""
        return {
            "measured": self.measured,
            "note": self.note,
            "window": {
                "start_s": self.window_start_s,
                "end_s": self.window_end_s,
                "length_s": self.window_s,
            },
            "threshold": self.threshold,
            "samples": self.samples,
            "idle_gpus": self.idle_gpus,
            "job_count": self.job_count,
            "top": self.top,
            "jobs": [j.to_dict() for j in self.jobs],
            "accounts": [
                {"account": a.account, "idle_gpus": a.idle_gpus, "jobs": a.jobs}
                for a in self.accounts
            ],
        }


def idle_now_json_text(result: IdleNow) -> str:
    """The JSON text ``gpuyield report idle-now --json`` prints and ``/api/idle-now`` serves."""
    return json.dumps(result.to_dict(), indent=2)


def _check(window_s: int, top: int | None) -> None:
    # Library errors name the library's fields; the CLI maps them to its flags.
    if window_s < 1:
        raise FieldError(WINDOW_FIELD, f"must be 1 second or more, not {window_s}", example="900")
    # Bounded: a LIMIT past 2**63 was a traceback.
    if top is not None and not 0 <= top <= 1_000_000_000:
        raise FieldError(
            TOP_FIELD, f"must be from 0 to 1,000,000,000 (0: every job), not {top}", example="10"
        )


def not_measured(window_s: int, top: int | None, note: str = NOT_MEASURED) -> IdleNow:
    """The answer of a store without samples: no list, and why."""
    return IdleNow(
        measured=False,
        note=note,
        window_s=window_s,
        window_start_s=None,
        window_end_s=None,
        threshold=None,
        samples=0,
        idle_gpus=0.0,
        job_count=0,
        top=top,
        jobs=(),
        accounts=(),
    )


@dataclass(frozen=True, kw_only=True, slots=True)
class NowReading:
    """The last stretch of coverage read once: its report and who held idle GPUs in it."""

    report: YieldReport
    idle: IdleNow


def build_idle_now(
    db: str | Path, *, window_s: int = NOW_WINDOW_S, top: int | None = None
) -> IdleNow:
    """``gpuyield report idle-now``: the jobs holding idle GPUs over the last ``window_s`` of coverage."""
    _check(window_s, top)
    con = store.connect(db, read_only=True)
    try:
        backend = backend_for(con)
        if not has_samples(backend):  # an empty store too: no ledger needed to say so
            return not_measured(window_s, top)
        ledger = _now_ledger(backend, window_s)
        return idle_now_of(ledger, backend, window_s=window_s, top=top)
    finally:
        con.close()


def build_now(db: str | Path, *, window_s: int = NOW_WINDOW_S) -> NowReading:
    """One ledger of the last ``window_s`` of coverage: serve's "now" report and idle list."""
    _check(window_s, None)
    con = store.connect(db, read_only=True)
    try:
        backend = backend_for(con)
        ledger = _now_ledger(backend, window_s)
        return NowReading(
            report=report_from_ledger(ledger, backend),
            idle=idle_now_of(ledger, backend, window_s=window_s, top=None),
        )
    finally:
        con.close()


def _now_ledger(backend: ibis.BaseBackend, window_s: int) -> Ledger:
    covered = resolve_window(backend, since_s=None, until_s=None)
    since_s = max(covered.start_s, covered.end_s - window_s)
    return compute_ledger(backend, since_s=since_s, until_s=covered.end_s, keep_segments=True)


def idle_now_of(
    ledger: Ledger, backend: ibis.BaseBackend, *, window_s: int, top: int | None
) -> IdleNow:
    """The list from a ledger computed with ``keep_segments`` over the window."""
    _check(window_s, top)
    util = ledger.utilization
    if util is None:
        return not_measured(window_s, top)
    if util.samples.total == 0:
        return not_measured(window_s, top, NOT_COVERED)
    seconds = max(ledger.window.end_s - ledger.window.start_s, 1)
    rows = sorted(
        (IdleJob.from_dict(r, seconds) for r in _per_job(ledger, backend).to_pyarrow().to_pylist()),
        key=lambda j: (-j.idle_gpus, j.cluster, j.job_id),
    )
    cut = rows if not top else rows[:top]
    return IdleNow(
        measured=True,
        note=None,
        window_s=window_s,
        window_start_s=ledger.window.start_s,
        window_end_s=ledger.window.end_s,
        threshold=util.threshold,
        samples=util.samples.total,
        idle_gpus=sum(j.idle_gpus for j in rows),
        job_count=len(rows),
        top=top or None,
        jobs=tuple(cut),
        accounts=_accounts(rows),
    )


def _per_job(ledger: Ledger, backend: ibis.BaseBackend) -> ir.Table:
    """Per job with idle time: its idle and allocated GPU-seconds, attributes and node list."""
    seg = ledger.segments.filter(
        ledger.segments.job_key.notnull() & (ledger.segments.category != Category.DOWN.value)
    )
    gpu_s = (seg.end_s - seg.start_s) * seg.gpus
    is_idle = (seg.category == Category.IDLE.value) & (seg.subcategory == IdleCause.ALLOCATED.value)
    per_job = seg.group_by(
        ["job_key", "cluster", "job_id", "user_name", "account", "partition"]
    ).aggregate(
        idle_gpu_s=ibis.ifelse(is_idle, gpu_s, 0.0).sum(),
        allocated_gpu_s=gpu_s.sum(),
    )
    per_job = per_job.filter(per_job.idle_gpu_s > 0)
    nodes = backend.table("jobs").select(n_job_key="job_key", nodes="node_list")
    return per_job.left_join(nodes, per_job.job_key == nodes.n_job_key).drop("n_job_key")


def _accounts(rows: list[IdleJob]) -> tuple[IdleAccount, ...]:
    sums: dict[str, list[float]] = {}
    for job in rows:
        acc = sums.setdefault(job.account or NO_ACCOUNT, [0.0, 0])
        acc[0] += job.idle_gpus
        acc[1] += 1
    return tuple(
        IdleAccount(account=k, idle_gpus=v[0], jobs=int(v[1]))
        for k, v in sorted(sums.items(), key=lambda kv: (-kv[1][0], kv[0]))
    )
