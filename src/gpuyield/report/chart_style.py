"""What every chart of the report shares: the slide size, one colour per category, matplotlib's
settings, and the small helpers (GPU-hours, compact tick labels, the note of an empty panel).

matplotlib is imported inside the helpers, as in ``charts``, so importing this module needs no extra.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from gpuyield.categories import Category

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

# A 16:9 slide (13.33 x 7.5 in) at 150 dpi is 2000 x 1125 pixels: sharp on a projector, small enough to mail.
SLIDE_SIZE_IN = (40 / 3, 7.5)
# One colour per category, the same in every chart: greys for unused time, warm colours for waste,
# blue for experiments, green for what shipped.
COLORS: dict[Category, str] = {
    Category.DOWN: "#6b6b6b",
    Category.IDLE: "#c9c9c9",
    Category.FAILED: "#d62728",
    Category.CANCELLED: "#ff7f0e",
    Category.DIVERGED: "#9467bd",
    Category.EXPERIMENT: "#1f77b4",
    Category.OVERHEAD: "#bcbd22",
    Category.RELEASED: "#2ca02c",
}
# Keys typed loosely: matplotlib's stubs list every rcParam as a Literal.
RC: dict[Any, Any] = {
    "font.size": 13,
    "axes.titlesize": 15,
    "axes.titleweight": "bold",
    "axes.spines.top": False,
    "axes.spines.right": False,
    "svg.fonttype": "path",  # text as paths: the page needs no font
    "svg.hashsalt": "gpuyield",  # stable ids, so the same data gives the same file
}


def to_hours(gpu_seconds: float) -> float:
    """GPU-seconds as GPU-hours, the unit every chart draws."""
    return gpu_seconds / 3600


def new_figure() -> Figure:
    """A slide-sized figure, laid out so titles and legends never overlap the axes."""
    from matplotlib.figure import Figure

    return Figure(figsize=SLIDE_SIZE_IN, layout="constrained")


def empty_note(ax: Axes, text: str) -> None:
    """Say in the panel why it is empty, instead of drawing bare axes."""
    from matplotlib.ticker import NullFormatter

    ax.text(0.5, 0.5, text, ha="center", va="center", transform=ax.transAxes, color="#555555")
    # No ticks, and a formatter that accepts none (the date formatter fails on an empty tick list).
    for axis in (ax.xaxis, ax.yaxis):
        axis.set_major_formatter(NullFormatter())
    ax.set_xticks([])
    ax.set_yticks([])


def compact(value: float) -> str:
    """1234567 -> '1.23M': short tick and bar labels for sums over a 100k-GPU month."""
    for scale, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= scale:
            return f"{value / scale:.3g}{suffix}"
    return f"{value:.3g}"


def compact_axis(axis: Any) -> None:
    """Tick labels like 40M instead of matplotlib's 4e7 offset note in the corner."""
    from matplotlib.ticker import FuncFormatter

    axis.set_major_formatter(FuncFormatter(lambda value, _pos: compact(value)))


def share_text(share: float | None) -> str:
    """A share as a percentage with one decimal; ``n/a`` when there is nothing to divide by."""
    return "n/a" if share is None else f"{share:.1%}"


def datetimes(epochs: list[float]) -> list[datetime]:
    """Epoch seconds as UTC datetimes for a date axis."""
    return [datetime.fromtimestamp(t, UTC) for t in epochs]
