"""The one-page HTML of `gpuyield plan`: the estimate, the simulated variants, the assumptions.

Rendered by a Jinja2 template with autoescaping (``data/html/plan.html.j2``); the chart is a small
SVG drawn by the template from coordinates computed here (no plotting library, no script, nothing
fetched). Every number shown carries its ``--json`` key and exact value (``data-key``,
``data-value``), so the page can be checked against ``gpuyield plan --json``.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import metadata, resources
from pathlib import Path
from typing import Any

from gpuyield.estimate.train import TrainEstimate
from gpuyield.report.page_model import environment
from gpuyield.simulate.plan_result import PlanResult, Variant

_COLORS = ("#1f77b4", "#2ca02c", "#ff7f0e")
_WIDTH, _LEFT, _RIGHT, _ROW = 760, 190, 30, 34


@dataclass(frozen=True, kw_only=True, slots=True)
class Num:
    """A number as shown, with its JSON key and value."""

    key: str
    value: Any
    text: str


@dataclass(frozen=True, kw_only=True, slots=True)
class Kpi:
    """A headline figure under the title."""

    label: str
    value: Num


@dataclass(frozen=True, kw_only=True, slots=True)
class EstimateRow:
    """A row of the estimate table; ``low``/``high`` bound the all-in figures only."""

    label: str
    value: Num
    low: Num | None
    high: Num | None


@dataclass(frozen=True, kw_only=True, slots=True)
class VariantRow:
    """A simulated variant: wall days, GPU-hours and yield with their 10th-90th percentiles."""

    name: str
    policy: str
    why: str
    interval: Num
    days: Num
    days_low: Num
    days_high: Num
    hours: Num
    hours_low: Num
    hours_high: Num
    yield_: Num
    yield_low: Num
    yield_high: Num
    interruptions: Num
    saved: Num | None
    """Days saved against the plan (None for the plan itself)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Tick:
    """A day tick of the chart, at ``x`` pixels."""

    x: float
    label: str


@dataclass(frozen=True, kw_only=True, slots=True)
class Bar:
    """A variant's line in the chart: the percentile bar and the median dot, in pixels."""

    name: str
    y: int
    label_x: int
    x_low: float
    x_high: float
    x_median: float
    color: str


@dataclass(frozen=True, kw_only=True, slots=True)
class Chart:
    """The wall-days chart, drawn by the template as SVG from these coordinates."""

    width: int
    height: int
    ticks: list[Tick]
    bars: list[Bar]


@dataclass(frozen=True, kw_only=True, slots=True)
class PlanPage:
    """What the page says, for ``plan.html.j2``."""

    title: str
    css: str
    cluster: str
    planned_name: str
    headline: Num
    kpis: list[Kpi]
    estimate_rows: list[EstimateRow]
    estimate_note: str
    chart: Chart
    seeds: int
    variants: list[VariantRow]
    assumptions: list[str]
    rate: Num
    mtbf: Num
    table: str
    table_url: str
    version: str


def _n(key: str, value: float, fmt: str) -> Num:
    return Num(key=key, value=value, text=format(value, fmt))


def render_plan_html(result: PlanResult) -> str:
    """The HTML document of ``result``."""
    return environment().get_template("plan.html.j2").render(page=_page(result))


def write_plan_html(result: PlanResult, path: str | Path) -> Path:
    """Write the page to ``path``; returns it."""
    out = Path(path)
    out.write_text(render_plan_html(result), encoding="utf-8")
    return out


def _page(result: PlanResult) -> PlanPage:
    spec, planned = result.spec, result.planned
    saved = result.changes()
    css = resources.files("gpuyield").joinpath("data", "html", "report.css").read_text("utf-8")
    return PlanPage(
        title=f"Plan: {spec.params} parameters, {spec.tokens} tokens",
        css=css,
        cluster=f"{result.gpus:,} {spec.accelerator}",
        planned_name=planned.name,
        headline=_n("variants.0.wall_days.median", planned.wall_days.median, ".1f"),
        kpis=_kpis(result),
        estimate_rows=_estimate_rows(result.estimate),
        estimate_note=_estimate_note(result),
        chart=_chart(result.variants),
        seeds=spec.seeds,
        variants=[_variant_row(i, v, saved) for i, v in enumerate(result.variants)],
        assumptions=list(result.assumptions),
        rate=_n("failure_model.rate_per_gpu_hour", result.rate_per_gpu_hour, ".2e"),
        mtbf=_n("failure_model.mtbf_minutes", result.mtbf_minutes, ".0f"),
        table=result.table.id,
        table_url=result.table.url,
        version=metadata.version("gpuyield"),
    )


def _kpis(result: PlanResult) -> list[Kpi]:
    planned = result.planned
    return [
        Kpi(
            label="GPU-hours held",
            value=_n("variants.0.gpu_hours.median", planned.gpu_hours.median, ",.0f"),
        ),
        Kpi(
            label="yield",
            value=_n("variants.0.yield.median", planned.yield_.median, ".1%"),
        ),
        Kpi(
            label="expected GPU-hours (published runs)",
            value=_n(
                "estimate.gpu_hours_expected", result.estimate.gpu_hours_calibrated.central, ",.0f"
            ),
        ),
        Kpi(
            label="MTBF, minutes",
            value=_n("failure_model.mtbf_minutes", result.mtbf_minutes, ".0f"),
        ),
    ]


def _estimate_rows(est: TrainEstimate) -> list[EstimateRow]:
    hours, days = est.gpu_hours_calibrated, est.wall_days_calibrated
    assert days is not None  # a plan always has GPUs, so a calibrated wall time
    rows = [
        EstimateRow(
            label="GPU-hours, all-in (calibrated on published runs)",
            value=_n("estimate.gpu_hours_expected", hours.central, ",.0f"),
            low=_n("estimate.gpu_hours_interval.0", hours.low, ",.0f"),
            high=_n("estimate.gpu_hours_interval.1", hours.high, ",.0f"),
        ),
        EstimateRow(
            label="wall days, all-in",
            value=_n("estimate.wall_days_expected", days.central, ".1f"),
            low=_n("estimate.wall_days_interval.0", days.low, ".1f"),
            high=_n("estimate.wall_days_interval.1", days.high, ".1f"),
        ),
    ]
    for key, label, fmt, figure in (
        ("gpu_hours", "GPU-hours at the training-step MFU, no failures", ",.0f", est.gpu_hours),
        ("wall_days", "wall days at the training-step MFU, no failures", ".1f", est.wall_days),
    ):
        assert figure is not None
        # A range input makes the figure a {"low", "central", "high"} object: show its centre.
        path = f"estimate.{key}" if figure.is_point else f"estimate.{key}.central"
        rows.append(
            EstimateRow(label=label, value=_n(path, figure.central, fmt), low=None, high=None)
        )
    return rows


def _estimate_note(result: PlanResult) -> str:
    mfu = result.estimate.calibrated_mfu
    return (
        f"The all-in figures come from {mfu.support} leave-one-out residuals of "
        f"{mfu.basis} (stated coverage {mfu.coverage:.0%}): what runs like "
        "this one took, everything included. The simulation below adds failures, restarts and "
        f"planned stops to compute at the training-step MFU {result.spec.mfu:g}, and nothing else."
    )


def _variant_row(i: int, v: Variant, saved_days: dict[str, float]) -> VariantRow:
    p = f"variants.{i}"
    saved = saved_days.get(v.name)
    days, hours, yield_ = v.wall_days, v.gpu_hours, v.yield_
    return VariantRow(
        name=v.name,
        policy=v.policy.value,
        why=v.why,
        interval=Num(
            key=f"{p}.checkpoint_interval_s",
            value=v.checkpoint_interval_s,
            text=f"{v.checkpoint_interval_s} s",
        ),
        days=_n(f"{p}.wall_days.median", days.median, ".1f"),
        days_low=_n(f"{p}.wall_days.interval.0", days.low, ".1f"),
        days_high=_n(f"{p}.wall_days.interval.1", days.high, ".1f"),
        hours=_n(f"{p}.gpu_hours.median", hours.median, ",.0f"),
        hours_low=_n(f"{p}.gpu_hours.interval.0", hours.low, ",.0f"),
        hours_high=_n(f"{p}.gpu_hours.interval.1", hours.high, ",.0f"),
        yield_=_n(f"{p}.yield.median", yield_.median, ".1%"),
        yield_low=_n(f"{p}.yield.interval.0", yield_.low, ".1%"),
        yield_high=_n(f"{p}.yield.interval.1", yield_.high, ".1%"),
        interruptions=_n(f"{p}.interruptions_mean", v.interruptions_mean, ",.0f"),
        saved=None if saved is None else _n(f"days_saved_vs_plan.{v.name}", saved, "+.1f"),
    )


def _chart(variants: tuple[Variant, ...]) -> Chart:
    top = max(v.wall_days.high for v in variants) * 1.05
    span = _WIDTH - _LEFT - _RIGHT

    def x(days: float) -> float:
        return round(_LEFT + span * days / top, 1)

    step = _tick_step(top)
    ticks = [Tick(x=x(k * step), label=f"{k * step:g}") for k in range(int(top // step) + 1)]
    bars = [
        Bar(
            name=v.name,
            y=24 + i * _ROW,
            label_x=_LEFT - 10,
            x_low=x(v.wall_days.low),
            x_high=x(v.wall_days.high),
            x_median=x(v.wall_days.median),
            color=_COLORS[i % len(_COLORS)],
        )
        for i, v in enumerate(variants)
    ]
    return Chart(width=_WIDTH, height=24 + len(variants) * _ROW + 28, ticks=ticks, bars=bars)


def _tick_step(top: float) -> float:
    for step in (1, 2, 5, 10, 20, 50, 100, 200, 500):
        if top / step <= 8:
            return float(step)
    return 1000.0
