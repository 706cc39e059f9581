"""The HTML section "What each remedy buys on this cluster", on the report's page template.

Built from the projection's ``to_dict()`` (every figure carries its JSON key and value, as the
report's page does), rendered by the report's autoescaped template (``report.page_model``).
"""

from __future__ import annotations

from importlib import metadata, resources
from pathlib import Path
from typing import Any

from gpuyield.errors import InputError
from gpuyield.report.page_model import Cell, Keyed, Kpi, Note, Page, Row, Section, Table, render
from gpuyield.whatif.project import Projection

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
    data = projection.to_dict()
    css = resources.files("gpuyield").joinpath("data/html/report.css").read_text(encoding="utf-8")
    window = data["fit"]["window"]
    base = data["baseline"]
    page = Page(
        title=f"{SECTION_TITLE} {window['start']} .. {window['end']}",
        css=css,
        headline=Cell(
            text=f"{base['yield']:.1%}", keyed=Keyed(key="baseline.yield", value=base["yield"])
        ),
        kpis=_kpis(data),
        warnings=_warnings(data),
        sections=(
            Section(
                section_id="remedies", title=SECTION_TITLE, figure=None, blocks=_remedy_blocks(data)
            ),
            Section(
                section_id="check",
                title="How well the fitted scenario replays the window",
                figure=None,
                blocks=(_check_table(data),),
            ),
        ),
        version=_version(),
        window=(window["start"], window["end"]),
    )
    return render(page)


def _kpis(data: dict[str, Any]) -> tuple[Kpi, ...]:
    low, high = data["baseline"]["yield_interval"]
    price = data["price_per_gpu_hour"]
    return (
        Kpi(
            label="horizon",
            text=f"{data['horizon_days']:g} days",
            keyed=Keyed(key="horizon_days", value=data["horizon_days"]),
        ),
        Kpi(
            label="baseline interval",
            text=f"{low:.1%} .. {high:.1%}",
            keyed=Keyed(key="baseline.yield_interval", value=[low, high]),
        ),
        Kpi(label="draws", text=str(data["seeds"]), keyed=Keyed(key="seeds", value=data["seeds"])),
        Kpi(
            label="price per GPU-hour",
            text="none given" if price is None else f"${price:g} ({data['price_source']})",
            keyed=Keyed(key="price_per_gpu_hour", value=price),
        ),
    )


def _warnings(data: dict[str, Any]) -> tuple[Cell, ...]:
    if not data["check"]["forced"]:
        return ()
    text = "The fit's check FAILED; projected anyway (--force): " + "; ".join(
        data["check"]["reasons"]
    )
    return (Cell(text=text, keyed=Keyed(key="check.forced", value=True)),)


def _remedy_blocks(data: dict[str, Any]) -> tuple[Table | Note, ...]:
    priced = data["price_per_gpu_hour"] is not None
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
    rows = tuple(
        _remedy_row(rank, name, data["remedies"][name], priced=priced)
        for rank, name in enumerate(data["ranking"], start=1)
    )
    ranking = Table(
        caption=f"Remedies ranked by the yield they add over {data['horizon_days']:g} days "
        "(95% intervals over draws)",
        headers=headers + (("dollars gained",) if priced else ()),
        rows=rows,
    )
    return (ranking, _moved_table(data), *_assumption_notes(data))


def _remedy_row(rank: int, name: str, r: dict[str, Any], *, priced: bool) -> Row:
    key = f"remedies.{name}"
    gain_low, gain_high = r["yield_gain_interval"]
    hours_low, hours_high = r["gpu_hours_gained_interval"]
    idle = r["gpu_hours_moved"]["idle"]
    cells = [
        Cell(text=str(rank), num=True),
        Cell(text=name),
        _keyed(f"{r['yield']:.1%}", f"{key}.yield", r["yield"]),
        _keyed(f"{r['yield_gain'] * 100:+.2f}", f"{key}.yield_gain", r["yield_gain"]),
        Cell(text=f"{gain_low * 100:+.2f} .. {gain_high * 100:+.2f}", num=True),
        _keyed(f"{r['gpu_hours_gained']:+,.0f}", f"{key}.gpu_hours_gained", r["gpu_hours_gained"]),
        Cell(text=f"{hours_low:+,.0f} .. {hours_high:+,.0f}", num=True),
        # Idle filled is idle moved with the sign turned: the key holds the moved figure.
        _keyed(f"{-idle:,.0f}", f"{key}.gpu_hours_moved.idle", idle),
    ]
    if priced:
        dollars = r["dollars_gained"]
        cells.append(_keyed(_dollars(dollars), f"{key}.dollars_gained", dollars))
    return Row(cells=tuple(cells))


def _moved_table(data: dict[str, Any]) -> Table:
    categories = list(data["baseline"]["gpu_hours"])
    base = data["baseline"]["gpu_hours"]
    baseline = Row(
        cells=(
            Cell(text="baseline (GPU-hours)"),
            *(_keyed(f"{base[c]:,.0f}", f"baseline.gpu_hours.{c}", base[c]) for c in categories),
        ),
        css_class="total",
    )
    rows = [baseline]
    for name in data["ranking"]:
        moved = data["remedies"][name]["gpu_hours_moved"]
        key = f"remedies.{name}.gpu_hours_moved"
        cells = (_keyed(f"{moved[c]:+,.0f}", f"{key}.{c}", moved[c]) for c in categories)
        rows.append(Row(cells=(Cell(text=name), *cells)))
    return Table(
        caption="GPU-hours each remedy moves between categories",
        headers=("", *categories),
        rows=tuple(rows),
    )


def _keyed(text: str, key: str, value: Any) -> Cell:
    """A number cell carrying the JSON key and value it shows."""
    return Cell(text=text, num=True, keyed=Keyed(key=key, value=value))


def _assumption_notes(data: dict[str, Any]) -> list[Note]:
    notes = []
    for name in data["ranking"]:
        r = data["remedies"][name]
        notes += [Note(text=f"{name} assumes {a}") for a in r["assumptions"]]
        notes += [Note(text=f"{name} does not apply: {a}") for a in r["not_applicable"]]
    notes += [Note(text=f"fit: {n}") for n in data["fit"]["notes"]]
    return notes


def _check_table(data: dict[str, Any]) -> Table:
    check = data["check"]
    rows = tuple(
        Row(
            cells=(
                Cell(text=c["category"]),
                _keyed(f"{c['real']:.1%}", f"check.{c['category']}.real", c["real"]),
                _keyed(
                    f"{c['replay_mean']:.1%}",
                    f"check.{c['category']}.replay_mean",
                    c["replay_mean"],
                ),
                Cell(text=f"+-{c['allowed']:.1%}", num=True),
                Cell(text="missed" if c["missed"] else "ok"),
            )
        )
        for c in check["categories"]
    )
    caption = (
        f"Share of installed GPU-time, real against the replay of the fitted scenario "
        f"({check['seeds']} seeds, tolerance {check['tolerance']:.0%} plus the replay's prediction interval): "
        + ("passed" if check["passed"] else "failed")
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
