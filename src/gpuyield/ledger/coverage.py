"""Coverage: the time ranges whose accounting the store holds, per cluster.

Time outside coverage was never captured: a job may have run there unseen, so counting it as idle
would be wrong (a capture starting mid-window read 52% idle where 17% was true). The report's window
defaults to covered time, and a window reaching outside it is an error unless the gaps are shown as
"not captured" and left out of installed capacity (``--allow-gaps``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import ibis
from ibis.common.exceptions import TableNotFound

from gpuyield.errors import InputError
from gpuyield.times import iso_utc


@dataclass(frozen=True, kw_only=True, slots=True)
class CoverageSpan:
    """``[start_s, end_s)`` of one cluster's accounting: covered, or (as a gap) not captured."""

    cluster: str
    """Cluster name."""
    start_s: int
    """First second (epoch, UTC)."""
    end_s: int
    """First second after the span."""

    @property
    def duration_s(self) -> int:
        """Length of the span."""
        return self.end_s - self.start_s

    def to_dict(self) -> dict[str, str]:
        """The JSON shape: ``{cluster, start, end}`` in ISO UTC."""
        return {"cluster": self.cluster, "start": iso_utc(self.start_s), "end": iso_utc(self.end_s)}

    def describe(self) -> str:
        """One line for messages."""
        return f"{self.cluster} {iso_utc(self.start_s)} .. {iso_utc(self.end_s)}"


class CoverageGapError(InputError):
    """The window asks about time whose accounting was never captured."""

    def __init__(self, gaps: tuple[CoverageSpan, ...], covered: tuple[CoverageSpan, ...]) -> None:
        self.gaps = gaps
        shown = "; ".join(g.describe() for g in gaps[:3]) + (" ..." if len(gaps) > 3 else "")
        spans = "; ".join(c.describe() for c in covered[:3]) + (" ..." if len(covered) > 3 else "")
        super().__init__(
            "the window (window.since/window.until) reaches outside the captured time: "
            f"not captured {shown}",
            hint=f"captured: {spans}. Pick window.since/window.until inside it, collect the "
            "missing period (gpuyield collect --since ...), or pass window.allow_gaps to show "
            "the gaps as not captured",
        )


def stored_coverage(backend: ibis.BaseBackend) -> tuple[CoverageSpan, ...]:
    """Covered spans per cluster, overlapping and touching ranges merged, sorted."""
    try:
        table = backend.table("coverage").select("cluster", "start_s", "end_s")
    except TableNotFound:
        return ()  # a store written before coverage was recorded: nothing is known
    rows = sorted(
        (r["cluster"], int(r["start_s"]), int(r["end_s"])) for r in table.to_pyarrow().to_pylist()
    )
    merged: list[CoverageSpan] = []
    for cluster, start_s, end_s in rows:
        last = merged[-1] if merged else None
        if last is not None and last.cluster == cluster and start_s <= last.end_s:
            if end_s > last.end_s:
                merged[-1] = CoverageSpan(cluster=cluster, start_s=last.start_s, end_s=int(end_s))
            continue
        merged.append(CoverageSpan(cluster=cluster, start_s=int(start_s), end_s=int(end_s)))
    return tuple(merged)


def gaps_in(
    covered: tuple[CoverageSpan, ...], start_s: int, end_s: int
) -> tuple[CoverageSpan, ...]:
    """The parts of ``[start_s, end_s)`` each cluster's coverage misses."""
    gaps: list[CoverageSpan] = []
    for cluster in sorted({c.cluster for c in covered}):
        at = start_s
        for span in (c for c in covered if c.cluster == cluster):
            if span.end_s <= at or span.start_s >= end_s:
                continue
            if span.start_s > at:
                gaps.append(CoverageSpan(cluster=cluster, start_s=at, end_s=span.start_s))
            at = max(at, span.end_s)
        if at < end_s:
            gaps.append(CoverageSpan(cluster=cluster, start_s=at, end_s=end_s))
    return tuple(gaps)


@dataclass(frozen=True, kw_only=True, slots=True)
class CoveredBounds:
    """``[start_s, end_s)``: the default window every cluster's coverage reaches (epoch, UTC)."""

    start_s: int
    """The latest first covered second over the clusters."""
    end_s: int
    """The earliest end of coverage over the clusters."""


def covered_bounds(covered: tuple[CoverageSpan, ...]) -> CoveredBounds | None:
    """The default window: from the latest first covered second to the end of the latest coverage
    every cluster shares: a cluster captured from later, or collected less recently, would
    otherwise show a gap."""
    if not covered:
        return None
    starts: dict[str, int] = {}
    ends: dict[str, int] = {}
    for span in covered:
        starts[span.cluster] = min(starts.get(span.cluster, span.start_s), span.start_s)
        ends[span.cluster] = max(ends.get(span.cluster, span.end_s), span.end_s)
    return CoveredBounds(start_s=max(starts.values()), end_s=min(ends.values()))


def captured_parts(window: _HasGaps) -> list[tuple[int, int]]:
    """``[start_s, end_s)`` pieces of the window outside every cluster's gaps (a gap of one
    cluster leaves that time out for all: the parts are accounted as whole windows)."""
    cuts = sorted((g.start_s, g.end_s) for g in window.not_captured)
    parts: list[tuple[int, int]] = []
    at = window.start_s
    for start_s, end_s in cuts:
        if start_s > at:
            parts.append((at, start_s))
        at = max(at, end_s)
    if at < window.end_s:
        parts.append((at, window.end_s))
    return parts


class _HasGaps(Protocol):
    @property
    def start_s(self) -> int: ...
    @property
    def end_s(self) -> int: ...
    @property
    def not_captured(self) -> tuple[CoverageSpan, ...]: ...
