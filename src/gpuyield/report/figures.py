"""The numbers behind the HTML report's charts: typed records computed from one ledger.

Nothing here draws. ``collect_figures`` runs every query the page needs once, so the charts, the
tables under them and the PNGs all show the same numbers, and tests check them without a browser.
"""

from __future__ import annotations

from dataclasses import dataclass

import ibis

from gpuyield.ledger import Ledger, compute_ledger
from gpuyield.report.breakdown import Breakdown, breakdown, bucket_totals
from gpuyield.report.failures import Failures, failures_of
from gpuyield.report.lineage import LineageFigure, lineages_of
from gpuyield.report.source import ReportSource, ledger_backend
from gpuyield.report.summary import YieldReport, iso, report_from_ledger
from gpuyield.report.weights import showback_of

# Windows at least this long are drawn per day, as the essay's "whole weekend lost" needs.
_DAILY_FROM_S = 3 * 86400
# Shorter windows get the finest bucket that keeps the area chart under this many steps.
_MAX_BUCKETS = 72
_BUCKET_LADDER_S = (60, 300, 900, 3600)
# Who-and-what panels show this many groups, then one row for the rest.
TOP_N = 8
# The data-quality section lists at most this many rejected rows (the count is always complete).
_REJECTS_SHOWN = 20


@dataclass(frozen=True, kw_only=True, slots=True)
class TimeBucket:
    """GPU-seconds per category in one time bucket."""

    label: str
    """ISO day (``2026-11-30``) or minute (``2026-11-30T10:40``) of the bucket start, UTC."""
    start_s: int
    """Bucket start (epoch seconds); the bucket is ``[start_s, start_s + bucket_s)``."""
    in_window_s: int
    """Seconds of the bucket inside the window (edge buckets are partial)."""
    categories: dict[str, float]
    """GPU-seconds per category inside the bucket and the window."""

    def __post_init__(self) -> None:
        if self.in_window_s < 0:
            raise ValueError(f"TimeBucket.in_window_s must be >= 0, got {self.in_window_s}")


@dataclass(frozen=True, kw_only=True, slots=True)
class Timeline:
    """The window cut into equal buckets."""

    bucket_s: int
    """Bucket length in seconds."""
    buckets: tuple[TimeBucket, ...]
    """In time order."""

    @property
    def bucket_name(self) -> str:
        """``day``, ``hour`` or ``N min``, for labels."""
        return {86400: "day", 3600: "hour"}.get(self.bucket_s, f"{self.bucket_s // 60} min")


@dataclass(frozen=True, kw_only=True, slots=True)
class GroupShare:
    """Allocated GPU-seconds of one group (an account, a user, a partition) or of the rest."""

    key: str
    """Group name, or ``(N others)`` for the groups folded into the rest."""
    categories: dict[str, float]
    """GPU-seconds per category (down and idle are always 0: they belong to no group)."""
    num_groups: int
    """1 for a group; for the rest, how many groups it folds."""

    @property
    def total_gpu_seconds(self) -> float:
        """Sum over categories."""
        return sum(self.categories.values())


@dataclass(frozen=True, kw_only=True, slots=True)
class WhoBreakdown:
    """One who-and-what panel: the top groups by allocated GPU-time, then the rest."""

    by: str
    """``account``, ``user`` or ``partition``."""
    rows: tuple[GroupShare, ...]
    """Largest first; the last row is the rest when there were more than ``TOP_N`` groups."""
    unallocated_gpu_seconds: float
    """Down plus idle, which no group holds (shown in the table, not the bars)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class RejectedRow:
    """One input row a lenient ingest refused."""

    path: str
    """Input file."""
    line: int | None
    """1-based line in the file."""
    field: str | None
    """Column that failed, if known."""
    message: str
    """Why."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Quality:
    """What the data does not say: rejected rows, missing GPU counts."""

    rejected: tuple[RejectedRow, ...]
    """The first rejected rows (``YieldReport.rejected_rows`` has the count)."""
    node_seconds_without_gpu_count: float
    """Node-seconds of the jobs whose GPU count is unknown, to judge how much they matter."""


@dataclass(frozen=True, kw_only=True, slots=True)
class ReportFigures:
    """Everything the HTML report shows."""

    report: YieldReport
    """The same record ``gpuyield report --json`` prints."""
    timeline: Timeline
    """Chart 2."""
    who: tuple[WhoBreakdown, ...]
    """Chart 3: by account, user, partition."""
    failures: Failures
    """Chart 4."""
    lineages: tuple[LineageFigure, ...]
    """Chart 5: one per released model of the manifest."""
    quality: Quality
    """Section 6 (with ``report.figures`` and ``report.sources``)."""
    showback: tuple[Breakdown, ...] = ()
    """Section 7: dollars (or H100-equivalent hours) by account, user, partition (weights.py)."""


def build_figures(
    db: ReportSource,
    *,
    since_s: int | None = None,
    until_s: int | None = None,
    allow_gaps: bool = False,
) -> ReportFigures:
    """Compute the ledger of the store at ``db`` (or of a lake) once, and everything the HTML
    report shows."""
    with ledger_backend(db) as backend:
        ledger = compute_ledger(
            backend, since_s=since_s, until_s=until_s, keep_segments=True, allow_gaps=allow_gaps
        )
        return collect_figures(ledger, report_from_ledger(ledger, backend), backend)


def collect_figures(
    ledger: Ledger, report: YieldReport, backend: ibis.BaseBackend
) -> ReportFigures:
    """Run every query the page needs on ``backend``, the ledger's."""
    return ReportFigures(
        report=report,
        timeline=timeline_of(ledger),
        who=tuple(who_of(ledger, by) for by in ("account", "user", "partition")),
        failures=failures_of(ledger, backend),
        lineages=lineages_of(ledger),
        quality=quality_of(ledger, backend),
        showback=showback_of(ledger, report.fleet),
    )


def bucket_s_for(duration_s: int) -> int:
    """Days for windows of 3 days or more, else the finest bucket with at most 72 steps."""
    if duration_s >= _DAILY_FROM_S:
        return 86400
    return next(b for b in _BUCKET_LADDER_S if duration_s <= b * _MAX_BUCKETS)


def timeline_of(ledger: Ledger) -> Timeline:
    """Categories per bucket: segments and capacity clipped to each bucket, as ``--by day|hour``."""
    window = ledger.window
    bucket_s = bucket_s_for(window.duration_s)
    first = window.start_s - window.start_s % bucket_s
    starts = list(range(first, window.end_s, bucket_s)) or [first]
    per_bucket = bucket_totals(ledger, bucket_s, starts)
    return Timeline(
        bucket_s=bucket_s,
        buckets=tuple(
            TimeBucket(
                label=iso(start)[: 10 if bucket_s == 86400 else 16],
                start_s=start,
                in_window_s=min(window.end_s, start + bucket_s) - max(window.start_s, start),
                categories=per_bucket[start],
            )
            for start in starts
        ),
    )


def who_of(ledger: Ledger, by: str, top_n: int = TOP_N) -> WhoBreakdown:
    """The ``top_n`` largest groups by allocated GPU-time, then one row for the rest."""
    assert top_n > 0, "a breakdown's top of 0 means every group"
    cut = breakdown(ledger, by, top=top_n)
    # Rows: the groups kept, the rest folded into one when cut, then the unallocated row.
    *groups, unallocated = cut.rows
    shares = [
        GroupShare(key=r.key, categories=dict(r.categories), num_groups=1) for r in groups[:top_n]
    ]
    if cut.top is not None:
        folded = cut.groups - cut.top
        shares.append(
            GroupShare(
                key=f"({folded} others)", categories=dict(groups[-1].categories), num_groups=folded
            )
        )
    return WhoBreakdown(
        by=by, rows=tuple(shares), unallocated_gpu_seconds=unallocated.total_gpu_seconds
    )


def quality_of(ledger: Ledger, backend: ibis.BaseBackend) -> Quality:
    """The first rejected rows and the weight of jobs without a GPU count."""
    rejects = backend.table("rejects")
    first = rejects.order_by(["ingest_id", "line"]).limit(_REJECTS_SHOWN)
    rows = first.select("path", "line", "field", "message").to_pyarrow().to_pylist()
    return Quality(
        rejected=tuple(
            RejectedRow(
                path=str(r["path"]),
                line=None if r["line"] is None else int(r["line"]),
                field=r["field"],
                message=str(r["message"]),
            )
            for r in rows
        ),
        node_seconds_without_gpu_count=ledger.node_seconds_without_gpu_count,
    )
