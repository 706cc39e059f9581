"""The numbers under each chart of the HTML report, as typed tables (``page_model``).

One builder per charted section (1-5); ``html.render_page`` puts them under their charts. Section 6,
the data quality, is ``html_quality``.
"""

from __future__ import annotations

from gpuyield.categories import ALLOCATED, Category, FailedCause
from gpuyield.ledger.sums import json_number
from gpuyield.report.chart_style import COLORS
from gpuyield.report.failures import Failures
from gpuyield.report.figures import ReportFigures, Timeline, WhoBreakdown
from gpuyield.report.html_cells import group, hours_text, keyed, share_text, table, td, tr
from gpuyield.report.lineage import LineageFigure
from gpuyield.report.page_model import Cell, Note, Row, Table, TableGroup
from gpuyield.report.summary import EssayShare, iso

_ALLOCATED = [c.value for c in ALLOCATED]
_MAX_LEMON_ROWS = 20
_MAX_LINEAGE_JOB_ROWS = 200


# ---- 1. where


def where_caption() -> str:
    return (
        "Each bar after 'installed' takes its category's GPU-hours away from what is left; "
        "what remains at the end is released. Right: the same time in the essay's buckets "
        "(bad runs = cancelled; failures and divergence = failed + diverged)."
    )


def where_tables(figures: ReportFigures) -> TableGroup:
    """GPU-time by category and subcategory (GPU-seconds as ``--json`` prints them), and the
    essay's buckets beside this cluster's."""
    report = figures.report
    installed = report.installed_gpu_seconds
    subcategories = report.subcategories_shown()
    rows = []
    for category, value in report.categories.items():
        share = value / installed if installed > 0 else None
        exact = json_number(value)
        rows.append(
            tr(
                [
                    Cell(text=category, swatch=COLORS[category]),
                    td(hours_text(value), num=True),
                    td(str(exact), keyed(f"categories.{category}", exact), num=True),
                    td(share_text(share), num=True),
                ]
            )
        )
        for sub, sub_value in subcategories.items():
            if sub.startswith(f"{category}."):
                rows.append(
                    tr(
                        [
                            td(sub.split(".", 1)[1]),
                            td(hours_text(report.subcategories.get(sub, 0.0)), num=True),
                            td(str(sub_value), keyed(f"subcategories.{sub}", sub_value), num=True),
                            td(
                                share_text(sub_value / installed if installed > 0 else None),
                                num=True,
                            ),
                        ],
                        "sub",
                    )
                )
    rows.append(
        tr(
            [
                td("installed"),
                td(hours_text(installed), num=True),
                td(str(json_number(installed)), num=True),
                td("100.0%" if installed > 0 else "n/a", num=True),
            ],
            "total",
        )
    )
    categories = table(
        "GPU-time by category", ["category", "GPU-hours", "GPU-seconds", "share"], rows, fold=False
    )
    return group(categories, _essay_table(report.essay_comparison()))


def _essay_table(shares: list[EssayShare]) -> Table:
    essay = [
        tr(
            [
                td(e.bucket),
                td(
                    share_text(e.share),
                    keyed(f"typical_lab.{e.bucket}.share", e.share),
                    num=True,
                ),
                td(
                    share_text(e.typical_share),
                    keyed(f"typical_lab.{e.bucket}.typical", e.typical_share),
                    num=True,
                ),
            ]
        )
        for e in shares
    ]
    comparison = table(
        "Beside the essay's typical lab", ["essay bucket", "this cluster", "typical lab"], essay
    )
    return comparison


# ---- 2. time


def time_caption(timeline: Timeline) -> str:
    return (
        f"Average GPUs in each category per {timeline.bucket_name} (GPU-seconds in the "
        "bucket / its seconds inside the window); the top edge is the installed "
        "GPUs."
    )


def time_table(timeline: Timeline) -> Table:
    order = [c.value for c in Category]
    rows = [
        tr(
            [
                td(b.label),
                *(td(hours_text(b.categories[c]), num=True) for c in order),
                td(hours_text(sum(b.categories.values())), num=True),
            ]
        )
        for b in timeline.buckets
    ]
    return table(
        f"GPU-hours per {timeline.bucket_name} (UTC)",
        [timeline.bucket_name, *order, "installed"],
        rows,
    )


# ---- 3. who


def who_table(who: WhoBreakdown) -> Table:
    rows = [
        tr(
            [
                td(r.key),
                *(td(hours_text(r.categories[c]), num=True) for c in _ALLOCATED),
                td(hours_text(r.total_gpu_seconds), num=True),
            ]
        )
        for r in who.rows
    ]
    rows.append(
        tr(
            [
                td("(not allocated: down + idle)"),
                *(td("") for _ in _ALLOCATED),
                td(hours_text(who.unallocated_gpu_seconds), num=True),
            ],
            "sub",
        )
    )
    return table(f"GPU-hours by {who.by}", [who.by, *_ALLOCATED, "total"], rows)


# ---- 4. failures


def failures_caption() -> str:
    return (
        "Left: failed GPU-hours by cause. Middle: node GPU-hours under each event reason, as "
        "recorded (overlaps counted per event). Right: nodes ranked by down time plus their "
        "share of failed jobs that ran on them (a job's GPUs spread evenly over its "
        "nodes)."
    )


def failures_tables(figures: ReportFigures) -> TableGroup:
    failures = figures.failures
    subcategories = figures.report.subcategories_shown()
    causes = []
    for cause in FailedCause:
        key = f"failed.{cause.value}"
        attrs = keyed(f"subcategories.{key}", subcategories[key]) if key in subcategories else None
        hours = hours_text(failures.causes[cause.value])
        causes.append(tr([td(cause.value), td(hours, attrs, num=True)]))
    reasons = [
        tr(
            [
                td(e.state),
                td(e.reason),
                td(str(e.num_events), num=True),
                td(str(e.num_nodes), num=True),
                td(hours_text(e.gpu_seconds), num=True),
            ]
        )
        for e in failures.event_reasons
    ]
    return group(
        table("Failed GPU-hours by cause", ["cause", "GPU-hours"], causes),
        table(
            "Node events by reason", ["state", "reason", "events", "nodes", "GPU-hours"], reasons
        ),
        _lemon_table(failures),
    )


def _lemon_table(failures: Failures) -> Table:
    lemons = [
        tr(
            [
                td(n.node),
                td(n.cluster),
                td(hours_text(n.down_gpu_seconds["planned"]), num=True),
                td(hours_text(n.down_gpu_seconds["unplanned"]), num=True),
                td(hours_text(n.failed_gpu_seconds[FailedCause.HARDWARE.value]), num=True),
                td(
                    hours_text(
                        n.failed_total_gpu_seconds
                        - n.failed_gpu_seconds[FailedCause.HARDWARE.value]
                    ),
                    num=True,
                ),
                td(hours_text(n.waste_gpu_seconds), num=True),
            ]
        )
        for n in failures.lemons[:_MAX_LEMON_ROWS]
    ]
    return table(
        f"Lemon nodes (top {_MAX_LEMON_ROWS})",
        [
            "node",
            "cluster",
            "down planned",
            "down unplanned",
            "failed hardware",
            "failed other",
            "waste GPU-hours",
        ],
        lemons,
    )


# ---- 5. lineage


def lineage_caption() -> str:
    return (
        "One lane per run of each released model's lineage. Green: GPU-time kept in the model; "
        "hatched: progress lost since the last checkpoint when a job failed (red) or was "
        "preempted or cancelled (orange); X: the job was interrupted. Effective training "
        "time = released / all GPU-time of the lineage's jobs in the window."
    )


def lineage_tables(lineages: tuple[LineageFigure, ...]) -> Note | TableGroup:
    if not lineages:
        return Note(text="The release manifest names no released models.")
    return group(
        table(
            "Released models",
            [
                "model",
                "runs",
                "jobs",
                "interrupted",
                "released GPU-hours",
                "lost GPU-hours",
                "diverged GPU-hours",
                "overhead GPU-hours",
                "effective training time",
            ],
            _lineage_summary_rows(lineages),
        ),
        table(
            "Jobs of the lineages",
            [
                "model",
                "run",
                "job",
                "state",
                "GPUs",
                "start",
                "end",
                "kept GPU-hours",
                "lost GPU-hours",
            ],
            _lineage_job_rows(lineages),
        ),
    )


def _lineage_summary_rows(lineages: tuple[LineageFigure, ...]) -> list[Row]:
    return [
        tr(
            [
                td(x.model),
                td(", ".join(x.runs)),
                td(str(len(x.jobs)), num=True),
                td(str(x.num_interrupted), num=True),
                td(hours_text(x.gpu_seconds[Category.RELEASED.value]), num=True),
                td(hours_text(x.lost_gpu_seconds), num=True),
                td(hours_text(x.gpu_seconds[Category.DIVERGED.value]), num=True),
                td(hours_text(x.gpu_seconds[Category.OVERHEAD.value]), num=True),
                td(share_text(x.effective_training_time), num=True),
            ]
        )
        for x in lineages
    ]


def _lineage_job_rows(lineages: tuple[LineageFigure, ...]) -> list[Row]:
    return [
        tr(
            [
                td(x.model),
                td(j.run),
                td(j.job_id),
                td(j.state),
                td("?" if j.num_gpus is None else str(j.num_gpus), num=True),
                td(iso(j.start_s)),
                td(iso(j.end_s)),
                td(
                    hours_text(
                        sum(p.gpu_seconds for p in j.parts if p.category == Category.RELEASED)
                    ),
                    num=True,
                ),
                td(hours_text(j.lost_gpu_seconds), num=True),
            ]
        )
        for x in lineages
        for j in x.jobs
    ][:_MAX_LINEAGE_JOB_ROWS]
