"""The self-contained HTML yield report: five charts as inline SVG, the numbers under each.

The page fetches nothing: the CSS is inlined, the charts are SVG with their text drawn as paths,
and there is no script. Every number that ``gpuyield report --json`` prints is in the page with its
JSON key and value (``data-key``, ``data-value``), so a test or a script can compare the two.
"""

from __future__ import annotations

import json
from html import escape
from importlib import metadata, resources
from pathlib import Path
from typing import Any

from gpuyield.categories import Category, FailedCause
from gpuyield.errors import InputError
from gpuyield.report.charts import COLORS, RenderedChart, render_charts, require_matplotlib
from gpuyield.report.figures import ReportFigures, Timeline, WhoBreakdown, build_figures
from gpuyield.report.lineage import LineageFigure
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
    body = [
        _header(figures, data),
        _section("where", _figure("where", svg, _where_caption()) + _where_tables(figures, data)),
        _section("time", _figure("time", svg, _time_caption(figures.timeline))
                 + _time_table(figures.timeline)),
        _section("who", _figure("who", svg, "Allocated GPU-hours; down and idle are in no group.")
                 + _tables(*(_who_table(w) for w in figures.who))),
        _section("failures", _figure("failures", svg, _failures_caption())
                 + _failures_tables(figures, data)),
        _section("lineage", _figure("lineage", svg, _lineage_caption())
                 + _lineage_tables(figures.lineages)),
        _section("quality", _quality(figures, data)),
        _footer(figures),
    ]  # fmt: skip
    css = resources.files("gpuyield").joinpath("data/html/report.css").read_text(encoding="utf-8")
    title = f"GPU yield report {data['window']['start']} .. {data['window']['end']}"
    return (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f"<title>{escape(title)}</title>\n<style>\n{css}</style>\n</head>\n<body>\n"
        + "\n".join(body)
        + "\n</body>\n</html>\n"
    )


# ---- small builders


def _keyed(key: str, value: Any) -> str:
    """Attributes tying a cell to its ``--json`` key and exact value."""
    return f' data-key="{escape(key)}" data-value="{escape(json.dumps(value))}"'


def _hours(gpu_seconds: float) -> str:
    """GPU-hours for a table: whole above 1000, two decimals above 1, else three significant digits
    (a small cluster's minutes would all read 0.00)."""
    hours = gpu_seconds / 3600
    if abs(hours) >= 1000:
        return f"{hours:,.0f}"
    return f"{hours:,.2f}" if abs(hours) >= 1 or hours == 0 else f"{hours:.3g}"


def _share(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.1%}"


def _td(text: str, attrs: str = "", *, num: bool = False) -> str:
    cls = ' class="num"' if num else ""
    return f"<td{cls}{attrs}>{text}</td>"


def _table(caption: str, headers: list[str], rows: list[str], *, fold: bool = True) -> str:
    head = "".join(f"<th>{escape(h)}</th>" for h in headers)
    table = (
        f'<table class="gy-numbers"><caption>{escape(caption)}</caption>'
        f"<thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"
    )
    if fold and len(rows) > _FOLD_ROWS:
        return f"<details><summary>{escape(caption)}: {len(rows)} rows</summary>{table}</details>"
    return table


def _tr(cells: list[str], cls: str = "") -> str:
    attr = f' class="{cls}"' if cls else ""
    return f"<tr{attr}>{''.join(cells)}</tr>"


def _tables(*tables: str) -> str:
    return f'<div class="gy-tables">{"".join(tables)}</div>'


def _swatch(category: str) -> str:
    return f'<span class="swatch" style="background:{COLORS[category]}"></span>{escape(category)}'


def _section(section_id: str, inner: str) -> str:
    title = dict(_SECTIONS)[section_id]
    return f'<section id="{section_id}">\n<h2>{escape(title)}</h2>\n{inner}\n</section>'


def _figure(chart_id: str, svg: dict[str, str], caption: str) -> str:
    title = dict(_SECTIONS)[chart_id].split(". ", 1)[1]
    drawing = svg[chart_id].replace(
        '<svg role="img"', f'<svg role="img" aria-label="{escape(title)}"', 1
    )
    return (
        f'<figure class="gy-chart" data-chart="{chart_id}">\n{drawing}\n'
        f"<figcaption>{escape(caption)}</figcaption>\n</figure>"
    )


# ---- header and footer


def _header(figures: ReportFigures, data: dict[str, Any]) -> str:
    kpis = [
        ("window start", data["window"]["start"], _keyed("window.start", data["window"]["start"])),
        ("window end", data["window"]["end"], _keyed("window.end", data["window"]["end"])),
        ("installed GPU-hours", _hours(figures.report.installed_gpu_seconds),
         _keyed("installed_gpu_seconds", data["installed_gpu_seconds"])),
        ("allocated GPU-hours", _hours(figures.report.allocated_gpu_seconds),
         _keyed("allocated_gpu_seconds", data["allocated_gpu_seconds"])),
        ("utilization", _share(data["utilization"]), _keyed("utilization", data["utilization"])),
        ("goodput", _share(data["goodput"]), _keyed("goodput", data["goodput"])),
    ]  # fmt: skip
    items = "".join(f"<div><dt>{escape(k)}</dt><dd{attrs}>{escape(v)}</dd></div>"
                    for k, v, attrs in kpis)  # fmt: skip
    warnings = "".join(
        f'<p class="gy-warning"{_keyed(f"warnings.{i}", w)}>{escape(w)}</p>'
        for i, w in enumerate(data["warnings"])
    )
    nav = "".join(f'<a href="#{sid}">{escape(title)}</a>' for sid, title in _SECTIONS)
    return (
        "<header>\n<h1>GPU yield report</h1>\n"
        f'<p class="gy-headline">Yield<strong{_keyed("yield", data["yield"])}>'
        f"{_share(data['yield'])}</strong>of installed GPU-time ended up in a released model</p>\n"
        f'<dl class="gy-kpis">{items}</dl>\n</header>\n{warnings}<nav>{nav}</nav>'
    )


def _footer(figures: ReportFigures) -> str:
    try:
        version = metadata.version("gpuyield")
    except metadata.PackageNotFoundError:  # a source checkout without an install
        version = "(not installed)"
    start, end = iso(figures.report.window_start_s), iso(figures.report.window_end_s)
    return (
        f"<footer>Made by gpuyield {escape(version)} from the store's data for "
        f"{escape(start)} .. {escape(end)}"
        ". GPU-hours = GPU-seconds / 3600. Categories and rules: docs/contracts.md; this page: "
        "docs/report.md.</footer>"
    )


# ---- 1. where


def _where_caption() -> str:
    return ("Each bar after 'installed' takes its category's GPU-hours away from what is left; "
            "what remains at the end is released. Right: the same time in the essay's buckets "
            "(bad runs = cancelled; failures and divergence = failed + diverged).")  # fmt: skip


def _where_tables(figures: ReportFigures, data: dict[str, Any]) -> str:
    installed = figures.report.installed_gpu_seconds
    rows = []
    for category, value in figures.report.categories.items():
        share = value / installed if installed > 0 else None
        exact = data["categories"][category]
        rows.append(_tr([_td(_swatch(category)), _td(_hours(value), num=True),
                         _td(escape(str(exact)), _keyed(f"categories.{category}", exact), num=True),
                         _td(_share(share), num=True)]))  # fmt: skip
        for sub, sub_value in data["subcategories"].items():
            if sub.startswith(f"{category}."):
                rows.append(_tr([_td(escape(sub.split(".", 1)[1])),
                                 _td(_hours(figures.report.subcategories.get(sub, 0.0)), num=True),
                                 _td(escape(str(sub_value)), _keyed(f"subcategories.{sub}",
                                                                    sub_value), num=True),
                                 _td(_share(sub_value / installed if installed > 0 else None),
                                     num=True)], "sub"))  # fmt: skip
    rows.append(_tr([_td("installed"), _td(_hours(installed), num=True),
                     _td(escape(str(data["installed_gpu_seconds"])), num=True),
                     _td("100.0%" if installed > 0 else "n/a", num=True)], "total"))  # fmt: skip
    categories = _table("GPU-time by category", ["category", "GPU-hours", "GPU-seconds", "share"],
                        rows, fold=False)  # fmt: skip
    essay = [
        _tr([_td(escape(bucket)),
             _td(_share(v["share"]), _keyed(f"typical_lab.{bucket}.share", v["share"]), num=True),
             _td(_share(v["typical"]), _keyed(f"typical_lab.{bucket}.typical", v["typical"]),
                 num=True)])
        for bucket, v in data["typical_lab"].items()
    ]  # fmt: skip
    comparison = _table("Beside the essay's typical lab", ["essay bucket", "this cluster",
                                                           "typical lab"], essay)  # fmt: skip
    return _tables(categories, comparison)


# ---- 2. time


def _time_caption(timeline: Timeline) -> str:
    return (f"Average GPUs in each category per {timeline.bucket_name} (GPU-seconds in the "
            "bucket / its seconds inside the window); the top edge is the installed "
            "GPUs.")  # fmt: skip


def _time_table(timeline: Timeline) -> str:
    order = [c.value for c in Category]
    rows = [
        _tr([_td(escape(b.label)), *(_td(_hours(b.categories[c]), num=True) for c in order),
             _td(_hours(sum(b.categories.values())), num=True)])
        for b in timeline.buckets
    ]  # fmt: skip
    return _table(f"GPU-hours per {timeline.bucket_name} (UTC)",
                  [timeline.bucket_name, *order, "installed"], rows)  # fmt: skip


# ---- 3. who


def _who_table(who: WhoBreakdown) -> str:
    rows = [
        _tr([_td(escape(r.key)), *(_td(_hours(r.categories[c]), num=True) for c in _ALLOCATED),
             _td(_hours(r.total_gpu_seconds), num=True)])
        for r in who.rows
    ]  # fmt: skip
    rows.append(_tr([_td("(not allocated: down + idle)"), *(_td("") for _ in _ALLOCATED),
                     _td(_hours(who.unallocated_gpu_seconds), num=True)], "sub"))  # fmt: skip
    return _table(f"GPU-hours by {who.by}", [who.by, *_ALLOCATED, "total"], rows)


# ---- 4. failures


def _failures_caption() -> str:
    return ("Left: failed GPU-hours by cause. Middle: node GPU-hours under each event reason, as "
            "recorded (overlaps counted per event). Right: nodes ranked by down time plus their "
            "share of failed jobs that ran on them (a job's GPUs spread evenly over its "
            "nodes).")  # fmt: skip


def _failures_tables(figures: ReportFigures, data: dict[str, Any]) -> str:
    failures = figures.failures
    causes = []
    for cause in FailedCause:
        key = f"failed.{cause.value}"
        attrs = _keyed(f"subcategories.{key}", data["subcategories"][key]) \
            if key in data["subcategories"] else ""  # fmt: skip
        hours = _hours(failures.causes[cause.value])
        causes.append(_tr([_td(escape(cause.value)), _td(hours, attrs, num=True)]))
    reasons = [
        _tr([_td(escape(e.state)), _td(escape(e.reason)), _td(str(e.num_events), num=True),
             _td(str(e.num_nodes), num=True), _td(_hours(e.gpu_seconds), num=True)])
        for e in failures.event_reasons
    ]  # fmt: skip
    lemons = [
        _tr([_td(escape(n.node)), _td(escape(n.cluster)),
             _td(_hours(n.down_gpu_seconds["planned"]), num=True),
             _td(_hours(n.down_gpu_seconds["unplanned"]), num=True),
             _td(_hours(n.failed_gpu_seconds[FailedCause.HARDWARE.value]), num=True),
             _td(_hours(n.failed_total_gpu_seconds
                        - n.failed_gpu_seconds[FailedCause.HARDWARE.value]), num=True),
             _td(_hours(n.waste_gpu_seconds), num=True)])
        for n in failures.lemons[:_MAX_LEMON_ROWS]
    ]  # fmt: skip
    return _tables(
        _table("Failed GPU-hours by cause", ["cause", "GPU-hours"], causes),
        _table("Node events by reason", ["state", "reason", "events", "nodes", "GPU-hours"],
               reasons),
        _table(f"Lemon nodes (top {_MAX_LEMON_ROWS})",
               ["node", "cluster", "down planned", "down unplanned", "failed hardware",
                "failed other", "waste GPU-hours"], lemons),
    )  # fmt: skip


# ---- 5. lineage


def _lineage_caption() -> str:
    return ("One lane per run of each released model's lineage. Green: GPU-time kept in the model; "
            "hatched: progress lost since the last checkpoint when a job failed (red) or was "
            "preempted or cancelled (orange); X: the job was interrupted. Effective training "
            "time = released / all GPU-time of the lineage's jobs in the window.")  # fmt: skip


def _lineage_tables(lineages: tuple[LineageFigure, ...]) -> str:
    if not lineages:
        return '<p class="gy-note">The release manifest names no released models.</p>'
    summary = [
        _tr([_td(escape(x.model)), _td(escape(", ".join(x.runs))), _td(str(len(x.jobs)), num=True),
             _td(str(x.num_interrupted), num=True),
             _td(_hours(x.gpu_seconds["released"]), num=True),
             _td(_hours(x.lost_gpu_seconds), num=True),
             _td(_hours(x.gpu_seconds["diverged"]), num=True),
             _td(_hours(x.gpu_seconds["overhead"]), num=True),
             _td(_share(x.effective_training_time), num=True)])
        for x in lineages
    ]  # fmt: skip
    jobs = [
        _tr([_td(escape(x.model)), _td(escape(j.run)), _td(escape(j.job_id)), _td(escape(j.state)),
             _td("?" if j.num_gpus is None else str(j.num_gpus), num=True),
             _td(escape(iso(j.start_s))), _td(escape(iso(j.end_s))),
             _td(_hours(sum(p.gpu_seconds for p in j.parts if p.category == "released")), num=True),
             _td(_hours(j.lost_gpu_seconds), num=True)])
        for x in lineages for j in x.jobs
    ][:_MAX_LINEAGE_JOB_ROWS]  # fmt: skip
    return _tables(
        _table("Released models", ["model", "runs", "jobs", "interrupted", "released GPU-hours",
                                   "lost GPU-hours", "diverged GPU-hours", "overhead GPU-hours",
                                   "effective training time"], summary),
        _table("Jobs of the lineages", ["model", "run", "job", "state", "GPUs", "start", "end",
                                        "kept GPU-hours", "lost GPU-hours"], jobs),
    )  # fmt: skip


# ---- 6. quality


def _quality(figures: ReportFigures, data: dict[str, Any]) -> str:
    counts = [
        _tr([_td("rejected input rows"),
             _td(str(data["rejected_rows"]), _keyed("rejected_rows", data["rejected_rows"]),
                 num=True)]),
        _tr([_td("jobs that ran without a GPU count (their time is idle)"),
             _td(str(data["jobs_without_gpu_count"]),
                 _keyed("jobs_without_gpu_count", data["jobs_without_gpu_count"]), num=True)]),
        _tr([_td("node-hours of those jobs"),
             _td(_hours(figures.quality.node_seconds_without_gpu_count), num=True)]),
    ]  # fmt: skip
    how = [_tr([_td(escape(name)), _td(escape(text), _keyed(f"figures.{name}", text))])
           for name, text in data["figures"].items()]  # fmt: skip
    fields = ("ingest_id", "source", "path", "sha256", "rows_read", "rows_rejected", "rows_skipped")
    sources = [
        _tr([_td(f"<code>{escape(str(s[f]))}</code>" if f == "sha256" else escape(str(s[f])),
                 _keyed(f"sources.{i}.{f}", s[f]), num=isinstance(s[f], int)) for f in fields])
        for i, s in enumerate(data["sources"])
    ]  # fmt: skip
    rejects = [
        _tr([_td(escape(r.path)), _td("" if r.line is None else str(r.line), num=True),
             _td(escape(r.field or "")), _td(escape(r.message))])
        for r in figures.quality.rejected
    ]  # fmt: skip
    parts = [
        _tables(_table("Coverage", ["what", "count"], counts),
                _table("Measured or estimated", ["figure", "how"], how)),
        _table("Sources (every ingest, with the SHA-256 of the file read)", list(fields), sources),
    ]  # fmt: skip
    if "gpu_activity" in data:
        parts.append(_activity_tables(data["gpu_activity"]))
    evidence = _evidence_table(data.get("divergence_evidence", []))
    if evidence:
        parts.append(evidence)
    if rejects:
        parts.append(_table(f"First rejected rows (of {data['rejected_rows']})",
                            ["file", "line", "field", "why"], rejects))  # fmt: skip
    return "\n".join(parts)


def _activity_tables(activity: dict[str, Any]) -> str:
    """What the utilization samples measured: per category, and how the samples were attributed."""

    def cell(key: str, text: str, value: Any) -> str:
        return _td(text, _keyed(f"gpu_activity.{key}", value), num=True)

    rows = []
    for c, a in activity["categories"].items():
        k = f"categories.{c}"
        rows.append(_tr([
            _td(_swatch(c) + escape(c)),
            cell(f"{k}.measured_gpu_seconds", _hours(a["measured_gpu_seconds"]),
                 a["measured_gpu_seconds"]),
            cell(f"{k}.measured_share", _share(a["measured_share"]), a["measured_share"]),
            cell(f"{k}.idle_gpu_seconds", _hours(a["idle_gpu_seconds"]), a["idle_gpu_seconds"]),
            cell(f"{k}.active_share", _share(a["active_share"]), a["active_share"]),
            cell(f"{k}.tensor_share", _share(a["tensor_share"]), a["tensor_share"]),
        ]))  # fmt: skip
    counts = [_tr([_td(escape(k.replace("_", " "))), cell(f"samples.{k}", f"{v:,}", v)])
              for k, v in activity["samples"].items()]  # fmt: skip
    counts.append(_tr([_td("idle threshold (activity over a sample)"),
                       cell("idle_threshold", f"{activity['idle_threshold']:.0%}",
                            activity["idle_threshold"])]))  # fmt: skip
    counts.append(_tr([_td("allocated GPU-hours measured idle (idle.allocated)"),
                       cell("idle_allocated_gpu_seconds",
                            _hours(activity["idle_allocated_gpu_seconds"]),
                            activity["idle_allocated_gpu_seconds"])]))  # fmt: skip
    headers = ["category", "measured GPU-hours", "measured", "idle GPU-hours",
               "graphics engine", "tensor pipes"]  # fmt: skip
    return _tables(
        _table("Measured GPU activity of job time (utilization samples)", headers, rows),
        _table("Utilization samples (unattributed ones are counted, not guessed)",
               ["samples", "count"], counts),
    )  # fmt: skip


def _evidence_table(evidence: list[dict[str, Any]]) -> str:
    """Divergence-watch findings from run telemetry, one row each (columns as the JSON has them)."""
    if not evidence:
        return ""
    columns = list(dict.fromkeys(k for item in evidence for k in item))
    rows = [
        _tr([_td(escape(str(item.get(c, ""))),
                 _keyed(f"divergence_evidence.{i}.{c}", item[c]) if c in item else "")
             for c in columns])
        for i, item in enumerate(evidence)
    ]  # fmt: skip
    return _table("Divergence evidence in run telemetry", columns, rows)
