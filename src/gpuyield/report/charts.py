"""The report's charts, drawn with matplotlib: one Figure per chart, as inline SVG or a slide PNG.

matplotlib is the ``html`` extra; it is imported inside functions so that the rest of the report
(and ``gpuyield --help``) works without it, and ``require_matplotlib`` turns its absence into the
pip line. Figures are ``matplotlib.figure.Figure`` objects, not pyplot: no GUI backend, no global
state.
"""

from __future__ import annotations

import io
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpuyield.categories import ALLOCATED, Category, DownCause, FailedCause
from gpuyield.errors import MissingExtraError
from gpuyield.progress import NoProgress, Progress
from gpuyield.report.chart_lineage import draw_lineage
from gpuyield.report.chart_style import (
    COLORS,
    RC,
    compact,
    compact_axis,
    datetimes,
    empty_note,
    new_figure,
    share_text,
    to_hours,
)
from gpuyield.report.figures import ReportFigures
from gpuyield.safetext import chart_label

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

    from gpuyield.report.summary import EssayShare

SLIDE_DPI = 150
# Chart ids, in page order; each is the ``data-chart`` marker and the PNG's file name.
CHART_IDS = ("where", "time", "who", "failures", "lineage")
# Allocated categories, released first so the useful part of each bar starts at the axis.
_ALLOCATED = [c.value for c in reversed(ALLOCATED)]
_MAX_EVENT_REASONS = 8
_MAX_LEMONS = 10


@dataclass(frozen=True, kw_only=True, slots=True)
class RenderedChart:
    """One chart, ready for the page."""

    chart_id: str
    """One of ``CHART_IDS``."""
    svg: str
    """Inline ``<svg>`` element (no XML prolog, ids prefixed by the chart id)."""
    png_path: Path | None
    """Where its slide PNG was written, if asked."""


def require_matplotlib() -> None:
    """Raise the pip line when the ``html`` extra is missing."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        raise MissingExtraError("html", "matplotlib") from None
    try:
        import jinja2  # noqa: F401
    except ImportError:
        raise MissingExtraError("html", "jinja2") from None


def render_charts(
    figures: ReportFigures, png_dir: Path | None = None, *, progress: Progress | None = None
) -> list[RenderedChart]:
    """Draw every chart; write slide PNGs into ``png_dir`` when given."""
    require_matplotlib()
    progress = progress or NoProgress()
    progress.phase("drawing the charts", total=len(CHART_IDS))
    import matplotlib

    drawers: dict[str, Callable[[ReportFigures], Figure]] = {
        "where": draw_where,
        "time": draw_time,
        "who": draw_who,
        "failures": draw_failures,
        "lineage": draw_lineage,
    }
    rendered = []
    with matplotlib.rc_context(RC):
        for chart_id in CHART_IDS:
            fig = drawers[chart_id](figures)
            # SVG first: saving at another dpi re-runs the layout, and the page must not depend
            # on whether PNGs were asked for.
            svg = svg_of(fig, chart_id)
            png = None
            if png_dir is not None:
                png = png_dir / f"{chart_id}.png"
                fig.savefig(png, format="png", dpi=SLIDE_DPI, metadata={"Software": None})
            rendered.append(RenderedChart(chart_id=chart_id, svg=svg, png_path=png))
            progress.advance(1)
    return rendered


def svg_of(fig: Figure, chart_id: str) -> str:
    """The figure as an inline ``<svg>`` for HTML: no prolog, no namespaces, no URLs, unique ids."""
    buffer = io.StringIO()
    fig.savefig(
        buffer, format="svg", metadata={"Date": None, "Creator": None, "Format": None, "Type": None}
    )
    text = buffer.getvalue()
    text = text[text.index("<svg") :]  # drop the XML declaration and the DOCTYPE (a DTD URL)
    text = re.sub(r"<metadata>.*?</metadata>", "", text, flags=re.DOTALL)
    # HTML puts inline <svg> in the SVG namespace itself; the xmlns URLs would only look like links.
    text = re.sub(r'\s+xmlns(:\w+)?="[^"]*"', "", text)
    # Several charts on one page: matplotlib's ids (glyphs, clip paths) must not collide.
    prefix = f"gy-{chart_id}-"
    text = re.sub(r'\bid="([^"]+)"', rf'id="{prefix}\1"', text)
    text = re.sub(r"url\(#([^)]+)\)", rf"url(#{prefix}\1)", text)
    text = re.sub(r'href="#([^"]+)"', rf'href="#{prefix}\1"', text)
    # Size from CSS (the viewBox keeps the aspect ratio), not from matplotlib's points.
    text = re.sub(r'^<svg\s+width="[^"]*"\s+height="[^"]*"', '<svg role="img"', text, count=1)
    return text


def draw_where(figures: ReportFigures) -> Figure:
    """Chart 1: a waterfall from installed GPU-hours down to what was released, beside the essay."""
    report = figures.report
    fig = new_figure()
    waterfall, essay = fig.subplots(1, 2, width_ratios=[3, 2])
    fig.suptitle(
        f"Yield {share_text(report.yield_)}: released / installed GPU-hours",
        fontsize=18,
        fontweight="bold",
    )
    installed = report.installed_gpu_seconds
    labels = ["installed", *report.categories]
    colors = ["#333333", *(COLORS[c] for c in report.categories)]
    remaining = installed
    bottoms, heights = [0.0], [installed]
    for value in report.categories.values():
        remaining -= value
        bottoms.append(remaining)
        heights.append(value)
    bars = waterfall.bar(
        labels, [to_hours(h) for h in heights], bottom=[to_hours(b) for b in bottoms], color=colors
    )
    for bar, value in zip(bars, heights, strict=True):
        if installed <= 0:
            break  # no shares to print; the note below says why
        share = value / installed
        waterfall.annotate(
            share_text(share),
            (bar.get_x() + bar.get_width() / 2, bar.get_y() + bar.get_height()),
            ha="center",
            va="bottom",
            fontsize=11,
            xytext=(0, 2),
            textcoords="offset points",
        )
    waterfall.set_ylabel("GPU-hours")
    compact_axis(waterfall.yaxis)
    waterfall.set_title("Where the installed GPU-hours went", loc="left")
    waterfall.tick_params(axis="x", labelrotation=30)
    if installed <= 0:
        waterfall.set_ylim(0, 1)
        empty_note(waterfall, "no installed GPU-time in this window")
    _draw_essay(essay, report.essay_comparison())
    return fig


def _draw_essay(ax: Axes, rows: list[EssayShare]) -> None:
    """This cluster's shares next to the essay's typical lab, bucket by bucket."""
    import numpy as np

    y = np.arange(len(rows))
    ours = [0.0 if r.share is None else r.share * 100 for r in rows]
    typical = [r.typical_share * 100 for r in rows]
    mine = ax.barh(y - 0.2, ours, height=0.4, color="#1f77b4", label="this cluster")
    theirs = ax.barh(y + 0.2, typical, height=0.4, color="#bbbbbb", label="essay's typical lab")
    ax.bar_label(mine, labels=[share_text(r.share) for r in rows], padding=3, fontsize=10)
    ax.bar_label(
        theirs, labels=[f"{t:.0f}%" for t in typical], padding=3, fontsize=10, color="#555555"
    )
    ax.set_yticks(y, [r.bucket for r in rows])
    ax.invert_yaxis()
    ax.set_xlabel("share of installed GPU-time (%)")
    ax.set_title("Beside the essay's typical lab", loc="left")
    ax.legend(loc="lower right", frameon=False)


def draw_time(figures: ReportFigures) -> Figure:
    """Chart 2: average GPUs per category in each bucket, stacked, so a bad weekend shows."""
    import matplotlib.dates as mdates

    timeline = figures.timeline
    fig = new_figure()
    ax = fig.subplots()
    order = list(reversed([c.value for c in Category]))  # released at the bottom, down on top
    edges = [b.start_s for b in timeline.buckets]
    edges.append(edges[-1] + timeline.bucket_s)
    series = []
    for category in order:
        # An empty window has a bucket of zero seconds: it holds no GPUs, not infinitely many.
        values = [
            b.categories[category] / b.in_window_s if b.in_window_s else 0.0
            for b in timeline.buckets
        ]
        series.append([*values, values[-1]])  # repeat the last step so it has a width
    ax.xaxis_date(tz=UTC)
    x = mdates.date2num(datetimes([float(e) for e in edges]))
    ax.stackplot(x, *series, labels=order, step="post", colors=[COLORS[Category(c)] for c in order])
    ax.set_ylabel(f"GPUs (average per {timeline.bucket_name})")
    compact_axis(ax.yaxis)
    ax.set_title(f"Categories over time, per {timeline.bucket_name} (UTC)", loc="left")
    locator = mdates.AutoDateLocator()
    ax.xaxis.set_major_locator(locator)
    ax.xaxis.set_major_formatter(mdates.ConciseDateFormatter(locator, tz=UTC))
    ax.margins(x=0)
    handles, labels = ax.get_legend_handles_labels()
    ax.legend(
        handles[::-1], labels[::-1], loc="upper left", bbox_to_anchor=(1.01, 1), frameon=False
    )
    if not any(b.in_window_s for b in timeline.buckets):
        empty_note(ax, "the window is empty")
    return fig


def draw_who(figures: ReportFigures) -> Figure:
    """Chart 3: allocated GPU-hours by account, user and partition (top groups, then the rest)."""
    fig = new_figure()
    axes = fig.subplots(1, len(figures.who))
    # The same number of bar slots in every panel, so bars are equally thick side by side.
    slots = max(4, *(len(w.rows) for w in figures.who))
    for ax, who in zip(axes, figures.who, strict=True):
        keys = [chart_label(row.key) for row in who.rows]
        left = [0.0] * len(keys)
        for category in _ALLOCATED:
            widths = [to_hours(row.categories[category]) for row in who.rows]
            ax.barh(keys, widths, left=left, color=COLORS[Category(category)], label=category)
            left = [a + b for a, b in zip(left, widths, strict=True)]
        for y, total in enumerate(left):
            ax.text(total, y, f" {compact(total)}", va="center", fontsize=11)
        ax.set_ylim(slots - 0.5, -0.5)
        ax.set_title(f"by {who.by}", loc="left")
        ax.set_xlabel("allocated GPU-hours")
        compact_axis(ax.xaxis)
        if not keys:
            empty_note(ax, "no jobs in this window")
    fig.legend(
        handles=_category_patches(_ALLOCATED),
        loc="outside lower center",
        ncols=len(_ALLOCATED),
        frameon=False,
    )
    fig.suptitle("Who and what used the GPUs", fontsize=16, fontweight="bold")
    return fig


def _category_patches(categories: list[str]) -> list[Any]:
    """Legend entries drawn from the palette (bars of an empty panel have no colour to copy)."""
    from matplotlib.patches import Patch

    return [Patch(facecolor=COLORS[Category(c)], label=c) for c in categories]


def draw_failures(figures: ReportFigures) -> Figure:
    """Chart 4: failed GPU-hours by cause, node events by reason, and the lemon nodes."""
    failures = figures.failures
    fig = new_figure()
    causes_ax, reasons_ax, lemons_ax = fig.subplots(1, 3, width_ratios=[2, 3, 3])
    causes_ax.barh(
        list(failures.causes),
        [to_hours(v) for v in failures.causes.values()],
        color=COLORS[Category.FAILED],
    )
    causes_ax.invert_yaxis()
    # Hours are never negative; without failures matplotlib would centre the axis on zero.
    causes_ax.set_xlim(0, max(to_hours(v) for v in failures.causes.values()) * 1.05 or 1)
    causes_ax.set_xlabel("failed GPU-hours")
    compact_axis(causes_ax.xaxis)
    causes_ax.set_title("Failed, by cause", loc="left")
    reasons = failures.event_reasons[:_MAX_EVENT_REASONS]
    if reasons:
        names = [
            chart_label(_short(f"{e.state}: {e.reason}" if e.reason else e.state)) for e in reasons
        ]
        reasons_ax.tick_params(axis="y", labelsize=11)
        reasons_ax.barh(
            names, [to_hours(e.gpu_seconds) for e in reasons], color=COLORS[Category.DOWN]
        )
        reasons_ax.invert_yaxis()
    else:
        empty_note(reasons_ax, "no node events in this window")
    reasons_ax.set_xlabel("GPU-hours under the event")
    compact_axis(reasons_ax.xaxis)
    reasons_ax.set_title("Node events, by reason", loc="left")
    _draw_lemons(lemons_ax, figures)
    fig.suptitle("Failures and the nodes behind them", fontsize=16, fontweight="bold")
    return fig


def _draw_lemons(ax: Axes, figures: ReportFigures) -> None:
    lemons = figures.failures.lemons[:_MAX_LEMONS]
    ax.set_title("Lemon nodes", loc="left")
    ax.set_xlabel("GPU-hours wasted on the node")
    compact_axis(ax.xaxis)
    if not lemons:
        empty_note(ax, "no down or failed time on any node")
        return
    names = [chart_label(n.node) for n in lemons]
    stacks = [
        ("down, planned", "#9e9e9e", [n.down_gpu_seconds[DownCause.PLANNED.value] for n in lemons]),
        (
            "down, unplanned",
            COLORS[Category.DOWN],
            [n.down_gpu_seconds[DownCause.UNPLANNED.value] for n in lemons],
        ),
        (
            "failed, hardware",
            "#8c1515",
            [n.failed_gpu_seconds[FailedCause.HARDWARE.value] for n in lemons],
        ),
        (
            "failed, other",
            COLORS[Category.FAILED],
            [
                n.failed_total_gpu_seconds - n.failed_gpu_seconds[FailedCause.HARDWARE.value]
                for n in lemons
            ],
        ),
    ]
    left = [0.0] * len(lemons)
    for label, color, values in stacks:
        widths = [to_hours(v) for v in values]
        ax.barh(names, widths, left=left, color=color, label=label)
        left = [a + b for a, b in zip(left, widths, strict=True)]
    ax.invert_yaxis()
    ax.legend(
        loc="lower right", fontsize=10, framealpha=0.9
    )  # may sit on long bars: keep a backdrop


def _short(text: str, width: int = 32) -> str:
    return text if len(text) <= width else text[: width - 3] + "..."
