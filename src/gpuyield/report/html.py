"""The self-contained HTML yield report: five charts as inline SVG, the numbers under each.

The page is rendered by a Jinja2 template with autoescaping (``data/html/report.html.j2``, through
``page_model.py``); this module builds what the page says. It fetches nothing: the CSS is inlined, the charts are SVG with their text drawn as paths,
and there is no script. Every number that ``gpuyield report --json`` prints is in the page with its
JSON key and value (``data-key``, ``data-value``), so a test or a script can compare the two.
"""

from __future__ import annotations

from importlib import metadata, resources
from pathlib import Path
from typing import Any

from gpuyield.categories import Category, FailedCause
from gpuyield.errors import InputError
from gpuyield.report.charts import COLORS, RenderedChart, render_charts, require_matplotlib
from gpuyield.report.figures import ReportFigures, Timeline, WhoBreakdown, build_figures
from gpuyield.report.lineage import LineageFigure
from gpuyield.report.page_model import (
    Block,
    Cell,
    Figure,
    Keyed,
    Kpi,
    Note,
    Page,
    Row,
    Section,
    Table,
    TableGroup,
    render,
)
from gpuyield.report.summary import iso

_ALLOCATED = [c.value for c in Category if c not in (Category.DOWN, Category.IDLE)]
# Long tables stay in the page (they are the numbers behind the chart) but folded.
_FOLD_ROWS = 24
_MAX_LEMON_ROWS = 20
_MAX_LINEAGE_JOB_ROWS = 200
_SECTIONS = (
    ("where", "1. Where the GPU-hours went"),
    ("time", "2. Over time"),
    ("who", "3. Who and what"),
    ("failures", "4. Failures and lemon nodes"),
    ("lineage", "5. Release lineage"),
    ("quality", "6. Data quality"),
)


def write_html_report(
    db: str | Path,
    html_path: str | Path,
    *,
    since_s: int | None = None,
    until_s: int | None = None,
    png_dir: str | Path | None = None,
) -> Path:
    """Write the HTML report of the store at ``db`` (and slide PNGs into ``png_dir``).

    Returns the path written.
    """
    require_matplotlib()  # before the ledger runs, so a missing extra fails fast with the pip line
    target = Path(html_path)
    if not target.parent.is_dir():
        raise InputError(
            f"cannot write {target}: no directory {target.parent}",
            hint="create the directory first, or pick another --html path",
        )
    figures = build_figures(db, since_s=since_s, until_s=until_s)
    pngs = None if png_dir is None else Path(png_dir)
    if pngs is not None:
        pngs.mkdir(parents=True, exist_ok=True)
    page = render_page(figures, render_charts(figures, pngs))
    # Write beside the target and rename, so a reader never sees half a report.
    partial = target.with_name(f".{target.name}.partial")
    partial.write_text(page, encoding="utf-8")
    partial.replace(target)
    return target


def render_page(figures: ReportFigures, charts: list[RenderedChart]) -> str:
    """The whole HTML document."""
    data = figures.report.to_dict()
    svg = {c.chart_id: c.svg for c in charts}
    who = TableGroup(tables=tuple(_who_table(w) for w in figures.who))
    sections = (
        _section("where", _figure("where", svg, _where_caption()), _where_tables(figures, data)),
        _section(
            "time",
            _figure("time", svg, _time_caption(figures.timeline)),
            _time_table(figures.timeline),
        ),
        _section(
            "who", _figure("who", svg, "Allocated GPU-hours; down and idle are in no group."), who
        ),
        _section(
            "failures",
            _figure("failures", svg, _failures_caption()),
            _failures_tables(figures, data),
        ),
        _section(
            "lineage",
            _figure("lineage", svg, _lineage_caption()),
            _lineage_tables(figures.lineages),
        ),
        _section("quality", None, *_quality(figures, data)),
    )
    css = resources.files("gpuyield").joinpath("data/html/report.css").read_text(encoding="utf-8")
    page = Page(
        title=f"GPU yield report {data['window']['start']} .. {data['window']['end']}",
        css=css,
        headline=Cell(text=_share(data["yield"]), keyed=_keyed("yield", data["yield"])),
        kpis=_kpis(figures, data),
        warnings=tuple(
            Cell(text=w, keyed=_keyed(f"warnings.{i}", w)) for i, w in enumerate(data["warnings"])
        ),
        sections=sections,
        version=_version(),
        window=(iso(figures.report.window_start_s), iso(figures.report.window_end_s)),
    )
    return render(page)


# ---- small builders


def _keyed(key: str, value: Any) -> Keyed:
    """A cell's ``--json`` key and exact value."""
    return Keyed(key=key, value=value)


def _hours(gpu_seconds: float) -> str:
    """GPU-hours for a table: whole above 1000, two decimals above 1, else three significant digits
    (a small cluster's minutes would all read 0.00)."""
    hours = gpu_seconds / 3600
    if abs(hours) >= 1000:
        return f"{hours:,.0f}"
    return f"{hours:,.2f}" if abs(hours) >= 1 or hours == 0 else f"{hours:.3g}"


def _share(value: float | None) -> str:
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


def _section(section_id: str, figure: Figure | None, *blocks: Block) -> Section:
    return Section(
        section_id=section_id, title=dict(_SECTIONS)[section_id], figure=figure, blocks=blocks
    )


def _figure(chart_id: str, svg: dict[str, str], caption: str) -> Figure:
    title = dict(_SECTIONS)[chart_id].split(". ", 1)[1]
    return Figure(chart_id=chart_id, title=title, svg=svg[chart_id], caption=caption)


# ---- header and footer


def _kpis(figures: ReportFigures, data: dict[str, Any]) -> tuple[Kpi, ...]:
    window = data["window"]
    return (
        Kpi(
            label="window start",
            text=window["start"],
            keyed=_keyed("window.start", window["start"]),
        ),
        Kpi(label="window end", text=window["end"], keyed=_keyed("window.end", window["end"])),
        Kpi(
            label="installed GPU-hours",
            text=_hours(figures.report.installed_gpu_seconds),
            keyed=_keyed("installed_gpu_seconds", data["installed_gpu_seconds"]),
        ),
        Kpi(
            label="allocated GPU-hours",
            text=_hours(figures.report.allocated_gpu_seconds),
            keyed=_keyed("allocated_gpu_seconds", data["allocated_gpu_seconds"]),
        ),
        Kpi(
            label="utilization",
            text=_share(data["utilization"]),
            keyed=_keyed("utilization", data["utilization"]),
        ),
        Kpi(
            label="goodput", text=_share(data["goodput"]), keyed=_keyed("goodput", data["goodput"])
        ),
    )


def _version() -> str:
    try:
        return metadata.version("gpuyield")
    except metadata.PackageNotFoundError:  # a source checkout without an install
        return "(not installed)"


# ---- 1. where


def _where_caption() -> str:
    return (
        "Each bar after 'installed' takes its category's GPU-hours away from what is left; "
        "what remains at the end is released. Right: the same time in the essay's buckets "
        "(bad runs = cancelled; failures and divergence = failed + diverged)."
    )


def _where_tables(figures: ReportFigures, data: dict[str, Any]) -> TableGroup:
    installed = figures.report.installed_gpu_seconds
    rows = []
    for category, value in figures.report.categories.items():
        share = value / installed if installed > 0 else None
        exact = data["categories"][category]
        rows.append(
            _tr(
                [
                    Cell(text=category, swatch=COLORS[category]),
                    _td(_hours(value), num=True),
                    _td(str(exact), _keyed(f"categories.{category}", exact), num=True),
                    _td(_share(share), num=True),
                ]
            )
        )
        for sub, sub_value in data["subcategories"].items():
            if sub.startswith(f"{category}."):
                rows.append(
                    _tr(
                        [
                            _td(sub.split(".", 1)[1]),
                            _td(_hours(figures.report.subcategories.get(sub, 0.0)), num=True),
                            _td(
                                str(sub_value), _keyed(f"subcategories.{sub}", sub_value), num=True
                            ),
                            _td(_share(sub_value / installed if installed > 0 else None), num=True),
                        ],
                        "sub",
                    )
                )
    rows.append(
        _tr(
            [
                _td("installed"),
                _td(_hours(installed), num=True),
                _td(str(data["installed_gpu_seconds"]), num=True),
                _td("100.0%" if installed > 0 else "n/a", num=True),
            ],
            "total",
        )
    )
    categories = _table(
        "GPU-time by category", ["category", "GPU-hours", "GPU-seconds", "share"], rows, fold=False
    )
    essay = [
        _tr(
            [
                _td(bucket),
                _td(
                    _share(v["share"]), _keyed(f"typical_lab.{bucket}.share", v["share"]), num=True
                ),
                _td(
                    _share(v["typical"]),
                    _keyed(f"typical_lab.{bucket}.typical", v["typical"]),
                    num=True,
                ),
            ]
        )
        for bucket, v in data["typical_lab"].items()
    ]
    comparison = _table(
        "Beside the essay's typical lab", ["essay bucket", "this cluster", "typical lab"], essay
    )
    return _tables(categories, comparison)


# ---- 2. time


def _time_caption(timeline: Timeline) -> str:
    return (
        f"Average GPUs in each category per {timeline.bucket_name} (GPU-seconds in the "
        "bucket / its seconds inside the window); the top edge is the installed "
        "GPUs."
    )


def _time_table(timeline: Timeline) -> Table:
    order = [c.value for c in Category]
    rows = [
        _tr(
            [
                _td(b.label),
                *(_td(_hours(b.categories[c]), num=True) for c in order),
                _td(_hours(sum(b.categories.values())), num=True),
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


def _who_table(who: WhoBreakdown) -> Table:
    rows = [
        _tr(
            [
                _td(r.key),
                *(_td(_hours(r.categories[c]), num=True) for c in _ALLOCATED),
                _td(_hours(r.total_gpu_seconds), num=True),
            ]
        )
        for r in who.rows
    ]
    rows.append(
        _tr(
            [
                _td("(not allocated: down + idle)"),
                *(_td("") for _ in _ALLOCATED),
                _td(_hours(who.unallocated_gpu_seconds), num=True),
            ],
            "sub",
        )
    )
    return _table(f"GPU-hours by {who.by}", [who.by, *_ALLOCATED, "total"], rows)


# ---- 4. failures


def _failures_caption() -> str:
    return (
        "Left: failed GPU-hours by cause. Middle: node GPU-hours under each event reason, as "
        "recorded (overlaps counted per event). Right: nodes ranked by down time plus their "
        "share of failed jobs that ran on them (a job's GPUs spread evenly over its "
        "nodes)."
    )


def _failures_tables(figures: ReportFigures, data: dict[str, Any]) -> TableGroup:
    failures = figures.failures
    causes = []
    for cause in FailedCause:
        key = f"failed.{cause.value}"
        attrs = (
            _keyed(f"subcategories.{key}", data["subcategories"][key])
            if key in data["subcategories"]
            else None
        )
        hours = _hours(failures.causes[cause.value])
        causes.append(_tr([_td(cause.value), _td(hours, attrs, num=True)]))
    reasons = [
        _tr(
            [
                _td(e.state),
                _td(e.reason),
                _td(str(e.num_events), num=True),
                _td(str(e.num_nodes), num=True),
                _td(_hours(e.gpu_seconds), num=True),
            ]
        )
        for e in failures.event_reasons
    ]
    lemons = [
        _tr(
            [
                _td(n.node),
                _td(n.cluster),
                _td(_hours(n.down_gpu_seconds["planned"]), num=True),
                _td(_hours(n.down_gpu_seconds["unplanned"]), num=True),
                _td(_hours(n.failed_gpu_seconds[FailedCause.HARDWARE.value]), num=True),
                _td(
                    _hours(
                        n.failed_total_gpu_seconds
                        - n.failed_gpu_seconds[FailedCause.HARDWARE.value]
                    ),
                    num=True,
                ),
                _td(_hours(n.waste_gpu_seconds), num=True),
            ]
        )
        for n in failures.lemons[:_MAX_LEMON_ROWS]
    ]
    return _tables(
        _table("Failed GPU-hours by cause", ["cause", "GPU-hours"], causes),
        _table(
            "Node events by reason", ["state", "reason", "events", "nodes", "GPU-hours"], reasons
        ),
        _table(
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
        ),
    )


# ---- 5. lineage


def _lineage_caption() -> str:
    return (
        "One lane per run of each released model's lineage. Green: GPU-time kept in the model; "
        "hatched: progress lost since the last checkpoint when a job failed (red) or was "
        "preempted or cancelled (orange); X: the job was interrupted. Effective training "
        "time = released / all GPU-time of the lineage's jobs in the window."
    )


def _lineage_tables(lineages: tuple[LineageFigure, ...]) -> Note | TableGroup:
    if not lineages:
        return Note(text="The release manifest names no released models.")
    summary = [
        _tr(
            [
                _td(x.model),
                _td(", ".join(x.runs)),
                _td(str(len(x.jobs)), num=True),
                _td(str(x.num_interrupted), num=True),
                _td(_hours(x.gpu_seconds["released"]), num=True),
                _td(_hours(x.lost_gpu_seconds), num=True),
                _td(_hours(x.gpu_seconds["diverged"]), num=True),
                _td(_hours(x.gpu_seconds["overhead"]), num=True),
                _td(_share(x.effective_training_time), num=True),
            ]
        )
        for x in lineages
    ]
    jobs = [
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
                    _hours(sum(p.gpu_seconds for p in j.parts if p.category == "released")),
                    num=True,
                ),
                _td(_hours(j.lost_gpu_seconds), num=True),
            ]
        )
        for x in lineages
        for j in x.jobs
    ][:_MAX_LINEAGE_JOB_ROWS]
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


# ---- 6. quality


def _quality(figures: ReportFigures, data: dict[str, Any]) -> list[Block]:
    counts = [
        _tr(
            [
                _td("rejected input rows"),
                _td(
                    str(data["rejected_rows"]),
                    _keyed("rejected_rows", data["rejected_rows"]),
                    num=True,
                ),
            ]
        ),
        _tr(
            [
                _td("jobs that ran without a GPU count (their time is idle)"),
                _td(
                    str(data["jobs_without_gpu_count"]),
                    _keyed("jobs_without_gpu_count", data["jobs_without_gpu_count"]),
                    num=True,
                ),
            ]
        ),
        _tr(
            [
                _td("node-hours of those jobs"),
                _td(_hours(figures.quality.node_seconds_without_gpu_count), num=True),
            ]
        ),
    ]
    how = [
        _tr([_td(name), _td(text, _keyed(f"figures.{name}", text))])
        for name, text in data["figures"].items()
    ]
    fields = ("ingest_id", "source", "path", "sha256", "rows_read", "rows_rejected", "rows_skipped")
    sources = [
        _tr(
            [
                Cell(
                    text=str(s[f]),
                    code=f == "sha256",
                    keyed=_keyed(f"sources.{i}.{f}", s[f]),
                    num=isinstance(s[f], int),
                )
                for f in fields
            ]
        )
        for i, s in enumerate(data["sources"])
    ]
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
                    _keyed(f"divergence_evidence.{i}.{c}", item[c]) if c in item else None,
                )
                for c in columns
            ]
        )
        for i, item in enumerate(evidence)
    ]
    return _table("Divergence evidence in run telemetry", columns, rows)
