"""Everything `gpuyield serve` shows, computed at once from the store and never changed after.

A snapshot is built after each collection (or when the store changes) by the same library functions
as ``gpuyield report --json`` and ``--html``, then swapped in whole: a reader holds one snapshot for
its whole request, so no response mixes numbers from before and after a collection.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from gpuyield import store
from gpuyield.errors import GpuyieldError
from gpuyield.ledger import backend_for, compute_ledger
from gpuyield.ledger.now import DownNode, Waiting, down_at, waiting_at
from gpuyield.ledger.weights import several_classes
from gpuyield.report.breakdown import Breakdown, breakdown
from gpuyield.report.document import report_json_text
from gpuyield.report.idle_now import NOW_WINDOW_S, IdleNow, build_now, idle_now_json_text
from gpuyield.report.summary import YieldReport, build_report, report_from_ledger
from gpuyield.report.weights import weighted_accounts

DAY_S = 86400
#: The rolling windows of ``gpuyield_yield_ratio{window=...}``.
WINDOWS: tuple[tuple[str, int], ...] = (("1d", DAY_S), ("7d", 7 * DAY_S), ("30d", 30 * DAY_S))
#: The HTML page at ``/`` shows this window.
PAGE_WINDOW_S = 7 * DAY_S
# "Now" is the last second of coverage (NOW_WINDOW_S): a one-second ledger gives the GPUs idle,
# down and allocated at that instant with the same rules as every other figure.
_CLUSTERS = "SELECT cluster FROM nodes UNION SELECT cluster FROM cluster_events"


@dataclass(frozen=True, kw_only=True, slots=True)
class WindowReport:
    """The report of one rolling window that ends at the capture time."""

    name: str
    """``1d``, ``7d``, ``30d``."""
    report: YieldReport
    """Its ledger; it starts at the window's length before the end, or the coverage start."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Snapshot:
    """One consistent reading of the store."""

    cluster: str
    """The ``cluster`` label: the store's cluster, or its clusters joined with ``+``."""
    report: YieldReport
    """The default window (``gpuyield report --json`` without --since/--until)."""
    report_json: str
    """That report exactly as ``gpuyield report --json`` prints it."""
    windows: tuple[WindowReport, ...]
    """The rolling windows."""
    now: YieldReport
    """The last second of coverage."""
    idle_now: IdleNow
    """Who holds GPUs measured idle in that second (from the same ledger as ``now``)."""
    idle_now_json: str
    """``idle_now`` exactly as ``gpuyield report idle-now --json`` prints it."""
    waiting: Waiting
    """Jobs waiting for GPUs at the capture time."""
    down_nodes: tuple[DownNode, ...]
    """Nodes out of service at the capture time."""
    accounts: Breakdown
    """GPU-seconds by account over the default window."""
    weighted_accounts: tuple[Breakdown, ...] = ()
    """The same accounts in H100-equivalent seconds and dollars (report/weights.py)."""
    top_accounts: int
    """Accounts exported one by one (the rest summed as ``(others)``)."""
    page: str
    """The HTML report of the last 7 days (or a note saying why there is none)."""
    built_at_s: float
    """When it was computed (epoch seconds)."""
    build_duration_s: float
    """How long computing it took."""


def build_snapshot(db: str | Path, *, top_accounts: int, with_page: bool = True) -> Snapshot:
    """Read the store at ``db`` once into a snapshot (several ledgers; see the module doc)."""
    started = time.monotonic()
    con = store.connect(db, read_only=True)
    try:
        backend = backend_for(con)
        ledger = compute_ledger(backend, keep_segments=several_classes(backend))
        report = report_from_ledger(ledger, backend)
        accounts = breakdown(ledger, "account", top=top_accounts, backend=backend)
        weighted = weighted_accounts(ledger, report.fleet, top_accounts)
        as_of = ledger.window.as_of_s
        waiting = waiting_at(backend, as_of)
        down_nodes = down_at(backend, as_of)
        clusters = sorted(str(r[0]) for r in con.execute(_CLUSTERS).fetchall())
    finally:
        con.close()
    windows = tuple(
        WindowReport(name=name, report=window_report(db, report, length_s))
        for name, length_s in WINDOWS
    )
    now = build_now(db, window_s=NOW_WINDOW_S)
    return Snapshot(
        cluster="+".join(clusters) or "unknown",
        report=report,
        report_json=report_json_text(report),
        windows=windows,
        now=now.report,
        idle_now=now.idle,
        idle_now_json=idle_now_json_text(now.idle),
        waiting=waiting,
        down_nodes=down_nodes,
        accounts=accounts,
        weighted_accounts=weighted,
        top_accounts=top_accounts,
        page=render_page_html(db, report) if with_page else "",
        built_at_s=time.time(),
        build_duration_s=time.monotonic() - started,
    )


def window_start_s(full: YieldReport, length_s: int) -> int:
    """A rolling window's start: its length before the end, but never before the coverage."""
    return max(full.window_start_s, full.window_end_s - length_s)


def window_report(db: str | Path, full: YieldReport, length_s: int) -> YieldReport:
    """``gpuyield report --since <start> --until <end>`` for a rolling window."""
    if window_start_s(full, length_s) == full.window_start_s:
        return full  # the window covers all there is: the same ledger
    return build_report(db, since_s=window_start_s(full, length_s), until_s=full.window_end_s)


def render_page_html(db: str | Path, full: YieldReport) -> str:
    """The HTML report of the last 7 days, by the renderer of ``gpuyield report --html``."""
    from gpuyield.report.charts import render_charts
    from gpuyield.report.figures import build_figures
    from gpuyield.report.html import render_page

    try:
        figures = build_figures(
            db, since_s=window_start_s(full, PAGE_WINDOW_S), until_s=full.window_end_s
        )
        return render_page(figures, render_charts(figures))
    except GpuyieldError as error:
        # Without the html extra the metrics still serve; the page says what to install.
        return _note_page(error.message, error.hint)


def _note_page(message: str, hint: str | None) -> str:
    from html import escape

    hint_html = f"<p>{escape(hint)}</p>" if hint else ""
    return (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>gpuyield</title>'
        f"</head><body><h1>gpuyield</h1><p>{escape(message)}</p>{hint_html}</body></html>"
    )
