"""The HTML section "What each remedy buys on this cluster", on the report's page template.

Built from the typed projection; every figure carries its ``--json`` key and value (the numbers
``Projection.to_dict`` prints), as the report's page does. Rendered by the report's autoescaped
template (``report.page_model``).
"""

from __future__ import annotations

from importlib import metadata, resources
from pathlib import Path
from typing import Any

from gpuyield.errors import InputError
from gpuyield.report.page_model import Cell, Keyed, Kpi, Note, Page, Row, Section, Table, render
from gpuyield.times import iso_utc
from gpuyield.whatif.project import Projection, RemedyProjection
from gpuyield.whatif.replay import ReplayCheck

SECTION_TITLE = "What each remedy buys on this cluster"


def write_whatif_html(projection: Projection, path: Path) -> Path:
    """Write the page; returns the path written."""
    if not path.parent.is_dir():
        raise InputError(
            f"cannot write {path}: no directory {path.parent}",
            hint="create the directory first, or pick another whatif.html_path",
        )
    partial = path.with_name(f".{path.name}.partial")
    partial.write_text(render_whatif(projection), encoding="utf-8")
    partial.replace(path)
    return path


def render_whatif(projection: Projection) -> str:
    """The whole HTML document."""
    css = resources.files("gpuyield").joinpath("data/html/report.css").read_text(encoding="utf-8")
    fit = projection.fit
    start, end = iso_utc(fit.start_s), iso_utc(fit.end_s)
    base = projection.baseline.yield_.mean
    page = Page(
        title=f"{SECTION_TITLE} {start} .. {end}",
        css=css,
        headline=Cell(text=f"{base:.1%}", keyed=Keyed(key="baseline.yield", value=base)),
        kpis=_kpis(projection),
        warnings=_warnings(projection),
        sections=(
            Section(
                section_id="remedies",
                title=SECTION_TITLE,
                figure=None,
                blocks=_remedy_blocks(projection),
            ),
            Section(
                section_id="check",
                title="How well the fitted scenario replays the window",
                figure=None,
                blocks=(_check_table(projection.check),),
            ),
        ),
        version=_version(),
        window=(start, end),
    )
    return render(page)


def _kpis(p: Projection) -> tuple[Kpi, ...]:
    interval = p.baseline.yield_.to_list()
    price = p.price_per_gpu_hour
    return (
        Kpi(
            label="horizon",
            text=f"{p.horizon_days:g} days",
            keyed=Keyed(key="horizon_days", value=p.horizon_days),
        ),
        Kpi(
            label="baseline interval",
            text=f"{interval[0]:.1%} .. {interval[1]:.1%}",
            keyed=Keyed(key="baseline.yield_interval", value=interval),
        ),
        Kpi(label="draws", text=str(p.seeds), keyed=Keyed(key="seeds", value=p.seeds)),
        Kpi(
            label="price per GPU-hour",
            text=(
                f"${price:g} ({p.price_source})"
                if price is not None
                else p.price_source or "none given"
            ),
            keyed=Keyed(key="price_per_gpu_hour", value=price),
        ),
    )


def _warnings(p: Projection) -> tuple[Cell, ...]:
    if not p.forced:
        return ()
    text = "The fit's check FAILED; projected anyway (--force): " + "; ".join(p.check.reasons)
    return (Cell(text=text, keyed=Keyed(key="check.forced", value=True)),)


def _remedy_blocks(p: Projection) -> tuple[Table | Note, ...]:
    priced = p.price_per_gpu_hour is not None
    headers = (
        "rank",
        "remedy",
        "yield",
        "gain (points)",
        "interval",
        "GPU-hours gained",
        "interval",
        "idle GPU-hours filled",
    )
    # ``remedies`` is in ranking order, best first.
    rows = tuple(_remedy_row(rank, r, priced=priced) for rank, r in enumerate(p.remedies, start=1))
    ranking = Table(
        caption=f"Remedies ranked by the yield they add over {p.horizon_days:g} days "
        "(95% intervals over draws)",
        headers=headers + (("dollars gained",) if priced else ()),
        rows=rows,
    )
    return (ranking, _moved_table(p), *_assumption_notes(p))


def _remedy_row(rank: int, r: RemedyProjection, *, priced: bool) -> Row:
    name = r.remedy.name
    key = f"remedies.{name}"
    yield_, gain, hours = r.outcome.yield_.mean, r.yield_gain, r.gpu_hours_gained
    idle = r.outcome.gpu_hours["idle"].mean
    cells = [
        Cell(text=str(rank), num=True),
        Cell(text=name),
        _keyed(f"{yield_:.1%}", f"{key}.yield", yield_),
        _keyed(f"{gain.mean * 100:+.2f}", f"{key}.yield_gain", gain.mean),
        Cell(text=f"{gain.low * 100:+.2f} .. {gain.high * 100:+.2f}", num=True),
        _keyed(f"{hours.mean:+,.0f}", f"{key}.gpu_hours_gained", hours.mean),
        Cell(text=f"{hours.low:+,.0f} .. {hours.high:+,.0f}", num=True),
        # Idle filled is idle moved with the sign turned: the key holds the moved figure.
        _keyed(f"{-idle:,.0f}", f"{key}.gpu_hours_moved.idle", idle),
    ]
    if priced and r.dollars_gained is not None:
        dollars = r.dollars_gained.mean
        cells.append(_keyed(_dollars(dollars), f"{key}.dollars_gained", dollars))
    return Row(cells=tuple(cells))


def _moved_table(p: Projection) -> Table:
    base = p.baseline.gpu_hours
    categories = list(base)
    baseline = Row(
        cells=(
            Cell(text="baseline (GPU-hours)"),
            *(
                _keyed(f"{base[c].mean:,.0f}", f"baseline.gpu_hours.{c}", base[c].mean)
                for c in categories
            ),
        ),
        css_class="total",
    )
    rows = [baseline]
    for r in p.remedies:
        moved = r.outcome.gpu_hours
        key = f"remedies.{r.remedy.name}.gpu_hours_moved"
        cells = (_keyed(f"{moved[c].mean:+,.0f}", f"{key}.{c}", moved[c].mean) for c in categories)
        rows.append(Row(cells=(Cell(text=r.remedy.name), *cells)))
    return Table(
        caption="GPU-hours each remedy moves between categories",
        headers=("", *categories),
        rows=tuple(rows),
    )


def _keyed(text: str, key: str, value: Any) -> Cell:
    """A number cell carrying the JSON key and value it shows."""
    return Cell(text=text, num=True, keyed=Keyed(key=key, value=value))


def _assumption_notes(p: Projection) -> list[Note]:
    notes = []
    for r in p.remedies:
        name = r.remedy.name
        notes += [Note(text=f"{name} assumes {a}") for a in r.remedy.assumptions]
        notes += [Note(text=f"{name} does not apply: {a}") for a in r.remedy.not_applicable]
    notes += [Note(text=f"fit: {n}") for n in p.fit.notes]
    return notes


def _check_table(check: ReplayCheck) -> Table:
    rows = tuple(
        Row(
            cells=(
                Cell(text=c.category),
                _keyed(f"{c.real:.1%}", f"check.{c.category}.real", c.real),
                _keyed(f"{c.replay_mean:.1%}", f"check.{c.category}.replay_mean", c.replay_mean),
                Cell(text=f"+-{c.allowed:.1%}", num=True),
                Cell(text="missed" if c.missed else "ok"),
            )
        )
        for c in check.categories
    )
    caption = (
        f"Share of installed GPU-time, real against the replay of the fitted scenario "
        f"({check.seeds} seeds, tolerance {check.tolerance:.0%} plus the replay's prediction interval): "
        + ("passed" if check.passed else "failed")
    )
    return Table(caption=caption, headers=("category", "real", "replay", "allowed", ""), rows=rows)


def _dollars(value: float) -> str:
    """``+$131,084`` / ``-$2,000``."""
    return f"{'-' if value < 0 else '+'}${abs(value):,.0f}"


def _version() -> str:
    try:
        return metadata.version("gpuyield")
    except metadata.PackageNotFoundError:
        return "(source tree)"
