"""The self-contained HTML yield report: five charts as inline SVG, the numbers under each.

The page is rendered by a Jinja2 template with autoescaping (``data/html/report.html.j2``, through
``page_model.py``); this module builds what the page says. It fetches nothing: the CSS is inlined, the charts are SVG with their text drawn as paths,
and there is no script. Every number that ``gpuyield report --json`` prints is in the page with its
JSON key and value (``data-key``, ``data-value``), so a test or a script can compare the two.
"""

from __future__ import annotations

from importlib import metadata, resources
from pathlib import Path

from gpuyield.errors import FieldError
from gpuyield.ledger.sums import json_number
from gpuyield.progress import NoProgress, Progress
from gpuyield.report.charts import RenderedChart, render_charts, require_matplotlib
from gpuyield.report.figures import ReportFigures, build_figures
from gpuyield.report.html_cells import hours_text, keyed, share_text
from gpuyield.report.html_ladder import skipped_rungs_tables
from gpuyield.report.html_quality import quality_blocks
from gpuyield.report.html_tables import (
    failures_caption,
    failures_tables,
    lineage_caption,
    lineage_tables,
    time_caption,
    time_table,
    where_caption,
    where_tables,
    who_table,
)
from gpuyield.report.page_model import (
    Block,
    Cell,
    Figure,
    Kpi,
    Page,
    Section,
    TableGroup,
    render,
)
from gpuyield.report.showback import TITLE as SHOWBACK_TITLE
from gpuyield.report.showback import showback_blocks
from gpuyield.report.source import ReportSource
from gpuyield.report.summary import YieldReport, iso

_SECTIONS = (
    ("where", "1. Where the GPU-hours went"),
    ("time", "2. Over time"),
    ("who", "3. Who and what"),
    ("failures", "4. Failures and lemon nodes"),
    ("lineage", "5. Release lineage"),
    ("quality", "6. Data quality"),
    ("showback", SHOWBACK_TITLE),
)


def write_html_report(
    db: ReportSource,
    html_path: str | Path,
    *,
    since_s: int | None = None,
    until_s: int | None = None,
    png_dir: str | Path | None = None,
    allow_gaps: bool = False,
    progress: Progress | None = None,
) -> Path:
    """Write the HTML report of the store at ``db`` or of a lake (and slide PNGs into ``png_dir``).

    ``progress`` hears each phase (the ledger, each chart, the page). Returns the path written.
    """
    progress = progress or NoProgress()
    require_matplotlib()  # before the ledger runs, so a missing extra fails fast with the pip line
    target = Path(html_path)
    if not target.parent.is_dir():
        raise FieldError(
            "report.html_path",
            f": cannot write {target}: no directory {target.parent}",
            hint="create the directory first, or pick another report.html_path",
        )
    progress.phase("computing the ledger")
    figures = build_figures(db, since_s=since_s, until_s=until_s, allow_gaps=allow_gaps)
    pngs = None if png_dir is None else Path(png_dir)
    if pngs is not None:
        pngs.mkdir(parents=True, exist_ok=True)
    charts = render_charts(figures, pngs, progress=progress)
    progress.phase("writing the page")
    page = render_page(figures, charts)
    # Write beside the target and rename, so a reader never sees half a report.
    partial = target.with_name(f".{target.name}.partial")
    partial.write_text(page, encoding="utf-8")
    partial.replace(target)
    return target


def render_page(figures: ReportFigures, charts: list[RenderedChart]) -> str:
    """The whole HTML document."""
    report = figures.report
    start, end = iso(report.window_start_s), iso(report.window_end_s)
    svg = {c.chart_id: c.svg for c in charts}
    who = TableGroup(tables=tuple(who_table(w) for w in figures.who))
    sections = (
        _section("where", _figure("where", svg, where_caption()), where_tables(figures)),
        _section(
            "time",
            _figure("time", svg, time_caption(figures.timeline)),
            time_table(figures.timeline),
        ),
        _section(
            "who", _figure("who", svg, "Allocated GPU-hours; down and idle are in no group."), who
        ),
        _section(
            "failures",
            _figure("failures", svg, failures_caption()),
            failures_tables(figures),
            *_present(skipped_rungs_tables(figures.report.waste_in_skipped_rungs)),
        ),
        _section(
            "lineage",
            _figure("lineage", svg, lineage_caption()),
            lineage_tables(figures.lineages),
        ),
        _section("quality", None, *quality_blocks(figures)),
        _section("showback", None, *showback_blocks(figures)),
    )
    css = resources.files("gpuyield").joinpath("data/html/report.css").read_text(encoding="utf-8")
    page = Page(
        title=f"GPU yield report {start} .. {end}",
        css=css,
        headline=Cell(text=share_text(report.yield_), keyed=keyed("yield", report.yield_)),
        kpis=_kpis(report),
        warnings=tuple(
            Cell(text=w, keyed=keyed(f"warnings.{i}", w)) for i, w in enumerate(report.warnings)
        ),
        sections=sections,
        version=_version(),
        window=(start, end),
    )
    return render(page)


def _present(block: Block | None) -> tuple[Block, ...]:
    return () if block is None else (block,)


def _section(section_id: str, figure: Figure | None, *blocks: Block) -> Section:
    return Section(
        section_id=section_id, title=dict(_SECTIONS)[section_id], figure=figure, blocks=blocks
    )


def _figure(chart_id: str, svg: dict[str, str], caption: str) -> Figure:
    title = dict(_SECTIONS)[chart_id].split(". ", 1)[1]
    return Figure(chart_id=chart_id, title=title, svg=svg[chart_id], caption=caption)


# ---- header and footer


def _kpis(report: YieldReport) -> tuple[Kpi, ...]:
    """The header's figures; GPU-seconds keyed as ``--json`` prints them (``json_number``)."""
    start, end = iso(report.window_start_s), iso(report.window_end_s)
    installed, allocated = report.installed_gpu_seconds, report.allocated_gpu_seconds
    return (
        Kpi(label="window start", text=start, keyed=keyed("window.start", start)),
        Kpi(label="window end", text=end, keyed=keyed("window.end", end)),
        Kpi(
            label="installed GPU-hours",
            text=hours_text(installed),
            keyed=keyed("installed_gpu_seconds", json_number(installed)),
        ),
        Kpi(
            label="allocated GPU-hours",
            text=hours_text(allocated),
            keyed=keyed("allocated_gpu_seconds", json_number(allocated)),
        ),
        Kpi(
            label="utilization",
            text=share_text(report.utilization),
            keyed=keyed("utilization", report.utilization),
        ),
        Kpi(
            label="goodput",
            text=share_text(report.goodput),
            keyed=keyed("goodput", report.goodput),
        ),
    )


def _version() -> str:
    try:
        return metadata.version("gpuyield")
    except metadata.PackageNotFoundError:  # a source checkout without an install
        return "(not installed)"
