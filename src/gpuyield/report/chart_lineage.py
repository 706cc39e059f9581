"""Chart 5, the release lineage: per released model, its runs' jobs on a time line.

Kept GPU-time in green, progress lost to failures and preemptions hatched, an X where a job was
interrupted. Up to a few hundred job parts a panel draws them as bars; past that, each lane becomes
a stack of category shares per time bin, so a 16k-GPU run stays a readable chart of a few paths.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from gpuyield.categories import Category
from gpuyield.report.chart_style import COLORS, datetimes, empty_note, new_figure, share_text
from gpuyield.report.figures import ReportFigures
from gpuyield.report.lineage import LineageFigure

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

# Most models in one lineage chart; the table under it lists them all.
_MAX_LINEAGE_PANELS = 4
# Past this many job parts in a panel, lanes are drawn as time bins (_draw_lineage_binned).
_MAX_LINEAGE_BARS = 300
_LINEAGE_BINS = 240
# Kept at the bottom of a lane's stack, losses above it.
_LINEAGE_ORDER = (
    Category.RELEASED,
    Category.OVERHEAD,
    Category.DIVERGED,
    Category.CANCELLED,
    Category.FAILED,
)
_LOST = (Category.FAILED.value, Category.CANCELLED.value)
_SECONDS_PER_DAY = 86400.0


def draw_lineage(figures: ReportFigures) -> Figure:
    """Chart 5: per released model, its runs' jobs on a time line; losses hatched, X = failure."""
    lineages = figures.lineages[:_MAX_LINEAGE_PANELS]
    fig = new_figure()
    if not lineages:
        empty_note(fig.subplots(), "the release manifest names no released models")
        return fig
    axes = fig.subplots(
        len(lineages),
        1,
        squeeze=False,
        sharex=True,
        height_ratios=[len(x.runs) + 1 for x in lineages],
    )[:, 0]
    window = figures.report
    span = (
        float(window.window_start_s),
        float(max(window.window_end_s, window.window_start_s + 1)),
    )
    for ax, lineage in zip(axes, lineages, strict=True):
        _draw_one_lineage(ax, lineage, span)
    if window.window_end_s > window.window_start_s:
        axes[0].set_xlim(*datetimes([window.window_start_s, window.window_end_s]))
    fig.legend(handles=_lineage_legend(), loc="outside lower center", ncols=3, frameon=False)
    shown = len(figures.lineages)
    more = f" (first {_MAX_LINEAGE_PANELS} of {shown} models)" if shown > len(lineages) else ""
    fig.suptitle(
        f"Release lineage: the jobs behind each released model{more}",
        fontsize=16,
        fontweight="bold",
    )
    return fig


def _lineage_legend() -> list[Any]:
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    return [
        Patch(facecolor=COLORS[Category.RELEASED], label="kept in the model"),
        Patch(facecolor=COLORS[Category.FAILED], hatch="///", label="lost: failure"),
        Patch(facecolor=COLORS[Category.CANCELLED], hatch="///", label="lost: preemption, cancel"),
        Patch(facecolor=COLORS[Category.DIVERGED], label="diverged"),
        Patch(facecolor=COLORS[Category.OVERHEAD], label="overhead: start-up, checkpoints"),
        Line2D([], [], marker="X", color="black", linestyle="none", label="interrupted job"),
    ]


def _draw_one_lineage(ax: Axes, lineage: LineageFigure, window: tuple[float, float]) -> None:
    import matplotlib.dates as mdates

    parts = sum(len(job.parts) for job in lineage.jobs)
    if parts <= _MAX_LINEAGE_BARS:
        _draw_lineage_bars(ax, lineage)
        binned = ""
    else:
        binned = _draw_lineage_binned(ax, lineage, window)
    interrupted = [j for j in lineage.jobs if j.interrupted]
    if interrupted:
        # One marker set for every interrupted job: a chart of thousands stays one element.
        ends = mdates.date2num(datetimes([float(j.end_s) for j in interrupted]))
        lanes = {run: i for i, run in enumerate(lineage.runs)}
        # Binned, the marks go on a strip above the lane: hundreds would cover its bins.
        lift = 0.44 if binned else 0.0
        ax.plot(
            ends,
            [lanes[j.run] - lift for j in interrupted],
            marker="X",
            color="black",
            markersize=5 if binned else 9,
            linestyle="none",
        )
    ax.set_yticks(range(len(lineage.runs)), list(lineage.runs))
    ax.set_ylim(len(lineage.runs) - 0.5, -0.5)
    ett = lineage.effective_training_time
    ax.set_title(
        f"{lineage.model}: effective training time {share_text(ett)}, "
        f"{lineage.num_interrupted} interrupted job(s) (X){binned}",
        loc="left",
        fontsize=13,
    )
    ax.xaxis_date(tz=UTC)
    locator = mdates.AutoDateLocator()
    ax.xaxis.set_major_locator(locator)
    ax.xaxis.set_major_formatter(mdates.ConciseDateFormatter(locator, tz=UTC))
    if not lineage.jobs:
        empty_note(ax, "no jobs of this lineage in the window")


def _draw_lineage_bars(ax: Axes, lineage: LineageFigure) -> None:
    """Each job's parts as bars: one call per lane and category (broken_barh per part rescaled
    the axes each time: a 16k-GPU run's 16,000 parts took four minutes)."""
    import matplotlib.dates as mdates

    bars: dict[tuple[int, str], list[tuple[float, float]]] = {}
    lanes = {run: i for i, run in enumerate(lineage.runs)}
    for job in lineage.jobs:
        for part in job.parts:
            start = float(mdates.date2num(datetime.fromtimestamp(part.start_s, UTC)))
            width = (part.end_s - part.start_s) / _SECONDS_PER_DAY
            bars.setdefault((lanes[job.run], part.category), []).append((start, width))
    for (y, category), spans in bars.items():
        ax.broken_barh(
            spans,
            (y - 0.35, 0.7),
            facecolors=COLORS[Category(category)],
            edgecolor="white",
            linewidth=0.5,
            hatch="///" if category in _LOST else None,
        )


def _draw_lineage_binned(ax: Axes, lineage: LineageFigure, window: tuple[float, float]) -> str:
    """Past a few hundred bars, each lane is a stack of category shares per time bin.

    A bar per job part became one black band on a 54-day, 16k-GPU run (their white edges
    outweighed the bars) and 7.5 MB of SVG; binned, the chart is a few paths per lane whatever
    the number of jobs, and each bin still shows where the lane's GPU-time went.
    """
    import matplotlib.dates as mdates
    import numpy as np

    start_s, end_s = window
    edges = np.linspace(start_s, end_s, _LINEAGE_BINS + 1)
    bin_s = (end_s - start_s) / _LINEAGE_BINS
    x = mdates.date2num(datetimes([float(e) for e in edges]))
    for y, run in enumerate(lineage.runs):
        jobs = [j for j in lineage.jobs if j.run == run]
        peak = max((j.num_gpus or 0 for j in jobs), default=0)
        if not peak:
            continue
        shares = {c: np.zeros(_LINEAGE_BINS) for c in _LINEAGE_ORDER}
        for job in jobs:
            for part in job.parts:
                shares[Category(part.category)] += _overlap(edges, part.start_s, part.end_s) * (
                    part.gpu_seconds / max(part.end_s - part.start_s, 1e-9)
                )
        bottom = np.full(_LINEAGE_BINS, y + 0.35)
        for category in _LINEAGE_ORDER:
            height = shares[category] / (peak * bin_s) * 0.7
            if not height.any():
                continue
            ax.stairs(
                bottom - height,
                x,
                baseline=bottom,
                fill=True,
                color=COLORS[category],
                hatch="///" if category in _LOST else None,
                linewidth=0,
            )
            bottom = bottom - height
    hours = bin_s / 3600
    return f"; columns of {hours:.3g} h"


def _overlap(edges: Any, start: float, end: float) -> Any:
    """Seconds of ``[start, end)`` in each bin between ``edges``."""
    import numpy as np

    return np.clip(np.minimum(edges[1:], end) - np.maximum(edges[:-1], start), 0.0, None)
