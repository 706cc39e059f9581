"""The numbers under each chart of the HTML report, as typed tables (``page_model``).

One builder per section; ``html.render_page`` puts them under their charts.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from gpuyield.categories import ALLOCATED, Category, FailedCause
from gpuyield.report.charts import COLORS
from gpuyield.report.failures import Failures
from gpuyield.report.figures import ReportFigures, Timeline, WhoBreakdown
from gpuyield.report.lineage import LineageFigure
from gpuyield.report.page_model import Block, Cell, Keyed, Note, Row, Table, TableGroup
from gpuyield.report.summary import iso

_ALLOCATED = [c.value for c in ALLOCATED]
# Long tables stay in the page (they are the numbers behind the chart) but folded.
_FOLD_ROWS = 24
_MAX_LEMON_ROWS = 20
_MAX_LINEAGE_JOB_ROWS = 200


def keyed(key: str, value: Any) -> Keyed:
    """A cell's ``--json`` key and exact value."""
    return Keyed(key=key, value=value)


def hours_text(gpu_seconds: float) -> str:
    """GPU-hours for a table: whole above 1000, two decimals above 1, else three significant digits
    (a small cluster's minutes would all read 0.00)."""
    hours = gpu_seconds / 3600
    if abs(hours) >= 1000:
        return f"{hours:,.0f}"
    return f"{hours:,.2f}" if abs(hours) >= 1 or hours == 0 else f"{hours:.3g}"


def share_text(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.1%}"


def _td(text: str, keyed: Keyed | None = None, *, num: bool = False) -> Cell:
    return Cell(text=text, keyed=keyed, num=num)


def _table(caption: str, headers: list[str], rows: list[Row], *, fold: bool = True) -> Table:
    return Table(
        caption=caption,
        headers=tuple(headers),
        rows=tuple(rows),
        folded=fold and len(rows) > _FOLD_ROWS,
    )


def _tr(cells: list[Cell], cls: str = "") -> Row:
    return Row(cells=tuple(cells), css_class=cls)


def _tables(*tables: Table) -> TableGroup:
    return TableGroup(tables=tables)


# ---- 1. where


def where_caption() -> str:
    return (
        "Each bar after 'installed' takes its category's GPU-hours away from what is left; "
        "what remains at the end is released. Right: the same time in the essay's buckets "
        "(bad runs = cancelled; failures and divergence = failed + diverged)."
    )


def where_tables(figures: ReportFigures, data: dict[str, Any]) -> TableGroup:
    installed = figures.report.installed_gpu_seconds
    rows = []
    for category, value in figures.report.categories.items():
        share = value / installed if installed > 0 else None
        exact = data["categories"][category]
        rows.append(
            _tr(
                [
                    Cell(text=category, swatch=COLORS[category]),
                    _td(hours_text(value), num=True),
                    _td(str(exact), keyed(f"categories.{category}", exact), num=True),
                    _td(share_text(share), num=True),
                ]
            )
        )
        for sub, sub_value in data["subcategories"].items():
            if sub.startswith(f"{category}."):
                rows.append(
                    _tr(
                        [
                            _td(sub.split(".", 1)[1]),
                            _td(hours_text(figures.report.subcategories.get(sub, 0.0)), num=True),
                            _td(str(sub_value), keyed(f"subcategories.{sub}", sub_value), num=True),
                            _td(
                                share_text(sub_value / installed if installed > 0 else None),
                                num=True,
                            ),
                        ],
                        "sub",
                    )
                )
    rows.append(
        _tr(
            [
                _td("installed"),
                _td(hours_text(installed), num=True),
                _td(str(data["installed_gpu_seconds"]), num=True),
                _td("100.0%" if installed > 0 else "n/a", num=True),
            ],
            "total",
        )
    )
    categories = _table(
        "GPU-time by category", ["category", "GPU-hours", "GPU-seconds", "share"], rows, fold=False
    )
    return _tables(categories, _essay_table(data))


def _essay_table(data: dict[str, Any]) -> Table:
    essay = [
        _tr(
            [
                _td(bucket),
                _td(
                    share_text(v["share"]),
                    keyed(f"typical_lab.{bucket}.share", v["share"]),
                    num=True,
                ),
                _td(
                    share_text(v["typical"]),
                    keyed(f"typical_lab.{bucket}.typical", v["typical"]),
                    num=True,
                ),
            ]
        )
        for bucket, v in data["typical_lab"].items()
    ]
    comparison = _table(
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
        _tr(
            [
                _td(b.label),
                *(_td(hours_text(b.categories[c]), num=True) for c in order),
                _td(hours_text(sum(b.categories.values())), num=True),
            ]
        )
        for b in timeline.buckets
    ]
    return _table(
        f"GPU-hours per {timeline.bucket_name} (UTC)",
        [timeline.bucket_name, *order, "installed"],
        rows,
    )


# ---- 3. who


def who_table(who: WhoBreakdown) -> Table:
    rows = [
        _tr(
            [
                _td(r.key),
                *(_td(hours_text(r.categories[c]), num=True) for c in _ALLOCATED),
                _td(hours_text(r.total_gpu_seconds), num=True),
            ]
        )
        for r in who.rows
    ]
    rows.append(
        _tr(
            [
                _td("(not allocated: down + idle)"),
                *(_td("") for _ in _ALLOCATED),
                _td(hours_text(who.unallocated_gpu_seconds), num=True),
            ],
            "sub",
        )
    )
    return _table(f"GPU-hours by {who.by}", [who.by, *_ALLOCATED, "total"], rows)


# ---- 4. failures


def failures_caption() -> str:
    return (
        "Left: failed GPU-hours by cause. Middle: node GPU-hours under each event reason, as "
        "recorded (overlaps counted per event). Right: nodes ranked by down time plus their "
        "share of failed jobs that ran on them (a job's GPUs spread evenly over its "
        "nodes)."
    )


def failures_tables(figures: ReportFigures, data: dict[str, Any]) -> TableGroup:
    failures = figures.failures
    causes = []
    for cause in FailedCause:
        key = f"failed.{cause.value}"
        attrs = (
            keyed(f"subcategories.{key}", data["subcategories"][key])
            if key in data["subcategories"]
            else None
        )
        hours = hours_text(failures.causes[cause.value])
        causes.append(_tr([_td(cause.value), _td(hours, attrs, num=True)]))
    reasons = [
        _tr(
            [
                _td(e.state),
                _td(e.reason),
                _td(str(e.num_events), num=True),
                _td(str(e.num_nodes), num=True),
                _td(hours_text(e.gpu_seconds), num=True),
            ]
        )
        for e in failures.event_reasons
    ]
    return _tables(
        _table("Failed GPU-hours by cause", ["cause", "GPU-hours"], causes),
        _table(
            "Node events by reason", ["state", "reason", "events", "nodes", "GPU-hours"], reasons
        ),
        _lemon_table(failures),
    )


def _lemon_table(failures: Failures) -> Table:
    lemons = [
        _tr(
            [
                _td(n.node),
                _td(n.cluster),
                _td(hours_text(n.down_gpu_seconds["planned"]), num=True),
                _td(hours_text(n.down_gpu_seconds["unplanned"]), num=True),
                _td(hours_text(n.failed_gpu_seconds[FailedCause.HARDWARE.value]), num=True),
                _td(
                    hours_text(
                        n.failed_total_gpu_seconds
                        - n.failed_gpu_seconds[FailedCause.HARDWARE.value]
                    ),
                    num=True,
                ),
                _td(hours_text(n.waste_gpu_seconds), num=True),
            ]
        )
        for n in failures.lemons[:_MAX_LEMON_ROWS]
    ]
    return _table(
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
    summary = [
        _tr(
            [
                _td(x.model),
                _td(", ".join(x.runs)),
                _td(str(len(x.jobs)), num=True),
                _td(str(x.num_interrupted), num=True),
                _td(hours_text(x.gpu_seconds[Category.RELEASED.value]), num=True),
                _td(hours_text(x.lost_gpu_seconds), num=True),
                _td(hours_text(x.gpu_seconds[Category.DIVERGED.value]), num=True),
                _td(hours_text(x.gpu_seconds[Category.OVERHEAD.value]), num=True),
                _td(share_text(x.effective_training_time), num=True),
            ]
        )
        for x in lineages
    ]
    jobs = _lineage_job_rows(lineages)
    return _tables(
        _table(
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
            summary,
        ),
        _table(
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
            jobs,
        ),
    )


def _lineage_job_rows(lineages: tuple[LineageFigure, ...]) -> list[Row]:
    return [
        _tr(
            [
                _td(x.model),
                _td(j.run),
                _td(j.job_id),
                _td(j.state),
                _td("?" if j.num_gpus is None else str(j.num_gpus), num=True),
                _td(iso(j.start_s)),
                _td(iso(j.end_s)),
                _td(
                    hours_text(
                        sum(p.gpu_seconds for p in j.parts if p.category == Category.RELEASED)
                    ),
                    num=True,
                ),
                _td(hours_text(j.lost_gpu_seconds), num=True),
            ]
        )
        for x in lineages
        for j in x.jobs
    ][:_MAX_LINEAGE_JOB_ROWS]


# ---- 6. quality


def quality_blocks(figures: ReportFigures, data: dict[str, Any]) -> list[Block]:
    counts = _coverage_rows(figures, data)
    how = [
        _tr([_td(name), _td(text, keyed(f"figures.{name}", text))])
        for name, text in data["figures"].items()
    ]
    fields = ("ingest_id", "source", "path", "sha256", "rows_read", "rows_rejected", "rows_skipped")
    sources = _source_rows(data, fields)
    rejects = [
        _tr(
            [
                _td(r.path),
                _td("" if r.line is None else str(r.line), num=True),
                _td(r.field or ""),
                _td(r.message),
            ]
        )
        for r in figures.quality.rejected
    ]
    parts: list[Block] = [
        _tables(
            _table("Coverage", ["what", "count"], counts),
            _table("Measured or estimated", ["figure", "how"], how),
        ),
        _table("Sources (every ingest, with the SHA-256 of the file read)", list(fields), sources),
    ]
    parts.append(_captured_table(data))
    if "gpu_activity" in data:
        parts.append(activity_tables(data["gpu_activity"]))
    evidence = _evidence_table(data.get("divergence_evidence", []))
    if evidence:
        parts.append(evidence)
    if rejects:
        parts.append(
            _table(
                f"First rejected rows (of {data['rejected_rows']})",
                ["file", "line", "field", "why"],
                rejects,
            )
        )
    return parts


def activity_tables(activity: dict[str, Any]) -> TableGroup:
    """What the utilization samples measured: per category, and how the samples were attributed."""

    def cell(key: str, text: str, value: Any) -> Cell:
        return _td(text, keyed(f"gpu_activity.{key}", value), num=True)

    rows = []
    for c, a in activity["categories"].items():
        k = f"categories.{c}"
        rows.append(
            _tr(
                [
                    Cell(text=c, swatch=COLORS.get(c)),
                    cell(
                        f"{k}.measured_gpu_seconds",
                        hours_text(a["measured_gpu_seconds"]),
                        a["measured_gpu_seconds"],
                    ),
                    cell(
                        f"{k}.measured_share", share_text(a["measured_share"]), a["measured_share"]
                    ),
                    cell(
                        f"{k}.idle_gpu_seconds",
                        hours_text(a["idle_gpu_seconds"]),
                        a["idle_gpu_seconds"],
                    ),
                    cell(f"{k}.active_share", share_text(a["active_share"]), a["active_share"]),
                    cell(f"{k}.tensor_share", share_text(a["tensor_share"]), a["tensor_share"]),
                ]
            )
        )
    headers = ["category", "measured GPU-hours", "measured", "idle GPU-hours", "graphics engine",
               "tensor pipes"]  # fmt: skip
    return _tables(
        _table("Measured GPU activity of job time (utilization samples)", headers, rows),
        _table(
            "Utilization samples (unattributed ones are counted, not guessed)",
            ["samples", "count"],
            _sample_rows(activity, cell),
        ),
    )


def _sample_rows(activity: dict[str, Any], cell: Callable[[str, str, Any], Cell]) -> list[Row]:
    counts = [
        _tr([_td(k.replace("_", " ")), cell(f"samples.{k}", f"{v:,}", v)])
        for k, v in activity["samples"].items()
    ]
    threshold = activity["idle_threshold"]
    counts.append(
        _tr(
            [
                _td("idle threshold (activity over a sample)"),
                cell("idle_threshold", f"{threshold:.0%}", threshold),
            ]
        )
    )
    idle = activity["idle_allocated_gpu_seconds"]
    counts.append(
        _tr(
            [
                _td("allocated GPU-hours measured idle (idle.allocated)"),
                cell("idle_allocated_gpu_seconds", hours_text(idle), idle),
            ]
        )
    )
    return counts


def _captured_table(data: dict[str, Any]) -> Table:
    """The store's coverage, and the gaps left out of installed (``--allow-gaps``)."""
    rows = []
    for key, label in (("coverage", "captured"), ("not_captured", "not captured (not idle)")):
        for i, span in enumerate(data.get(key, [])):
            cells = [_td(label)]
            cells += [
                _td(str(span[f]), keyed(f"{key}.{i}.{f}", span[f]))
                for f in ("cluster", "start", "end")
            ]
            duration = span.get("duration_s")
            cells.append(
                _td("", num=True)
                if duration is None
                else _td(hours_text(duration), keyed(f"{key}.{i}.duration_s", duration), num=True)
            )
            rows.append(_tr(cells))
    return _table(
        "Captured time (report windows stay inside it)",
        ["", "cluster", "from", "to", "hours"],
        rows,
    )


def _coverage_rows(figures: ReportFigures, data: dict[str, Any]) -> list[Row]:
    return [
        _tr(
            [
                _td("rejected input rows"),
                _td(
                    str(data["rejected_rows"]),
                    keyed("rejected_rows", data["rejected_rows"]),
                    num=True,
                ),
            ]
        ),
        _tr(
            [
                _td("jobs that ran without a GPU count (their time is idle)"),
                _td(
                    str(data["jobs_without_gpu_count"]),
                    keyed("jobs_without_gpu_count", data["jobs_without_gpu_count"]),
                    num=True,
                ),
            ]
        ),
        _tr(
            [
                _td("node-hours of those jobs"),
                _td(hours_text(figures.quality.node_seconds_without_gpu_count), num=True),
            ]
        ),
    ]


def _source_rows(data: dict[str, Any], fields: tuple[str, ...]) -> list[Row]:
    return [
        _tr(
            [
                Cell(
                    text=str(s[f]),
                    code=f == "sha256",
                    keyed=keyed(f"sources.{i}.{f}", s[f]),
                    num=isinstance(s[f], int),
                )
                for f in fields
            ]
        )
        for i, s in enumerate(data["sources"])
    ]


def _evidence_table(evidence: list[dict[str, Any]]) -> Table | None:
    """Divergence-watch findings from run telemetry, one row each (columns as the JSON has them)."""
    if not evidence:
        return None
    columns = list(dict.fromkeys(k for item in evidence for k in item))
    rows = [
        _tr(
            [
                _td(
                    str(item.get(c, "")),
                    keyed(f"divergence_evidence.{i}.{c}", item[c]) if c in item else None,
                )
                for c in columns
            ]
        )
        for i, item in enumerate(evidence)
    ]
    return _table("Divergence evidence in run telemetry", columns, rows)
