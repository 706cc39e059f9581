"""The report in a weight (``report --weight``): breakdowns in H100-equivalents, FLOPs or dollars,
and the words and numbers the table, the HTML page and ``serve`` show for them.

The weighted ledger itself is ``ledger/weights``; this module groups it by a job attribute the way
``breakdown.py`` groups GPU-seconds (the same cut of the largest groups), each job's time split
over the GPU types it held and multiplied by their weights. Rows add up to the weighted installed
total: down and idle time is one ``(not allocated)`` row, as in every breakdown.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import ibis
import pyarrow as pa

from gpuyield.categories import Category
from gpuyield.errors import FieldError, InputError
from gpuyield.ledger.ledger import Ledger, materialize
from gpuyield.ledger.weights import UNITS, WASTE, FleetYield, GpuClass, WeightedLedger
from gpuyield.ledger.weights.split import job_shares, node_class_table
from gpuyield.report.breakdown import (
    _COLUMN,
    DEFAULT_TOP,
    NO_VALUE,
    OTHERS,
    UNALLOCATED,
    Breakdown,
    BreakdownRow,
    _largest_first,
    _ordered,
)

#: The ``--by`` dimensions a weighted breakdown takes (a job attribute: each job's GPU types known).
WEIGHTED_DIMENSIONS = ("account", "user", "partition", "run")
_LABELS = {
    "gpu_seconds": "GPU-hours",
    "h100_equiv_seconds": "H100-equivalent hours",
    "flops": "FLOPs paid for",
    "dollars": "dollars",
}


def unit_of(weight: str) -> str:
    """The ``weighted`` key of a ``--weight`` name; an InputError naming the choices."""
    if weight not in UNITS:
        raise FieldError(
            "report.weight",
            f": unknown weight {weight!r}",
            hint=f"choose one of {', '.join(UNITS)}",
        )
    return UNITS[weight]


def unit_label(unit: str) -> str:
    """How a table heads a column in this unit."""
    return _LABELS[unit]


def in_unit(value: float, unit: str) -> str:
    """A value as the table prints it: hours for seconds, money for dollars, FLOPs in e-notation."""
    if unit in ("gpu_seconds", "h100_equiv_seconds"):
        return f"{value / 3600:,.1f}"
    if unit == "dollars":
        return money(value)
    return f"{value:.3g}"


def money(usd: float) -> str:
    """``$3.2M``, ``$41.2k``, ``$980``, ``$0.32``."""
    for scale, suffix in ((1e9, "B"), (1e6, "M"), (1e3, "k")):
        if abs(usd) >= scale:
            return f"${usd / scale:,.1f}{suffix}"
    return f"${usd:,.2f}" if abs(usd) < 100 else f"${usd:,.0f}"


def waste_sentence(fleet: FleetYield | None, start_s: int, end_s: int) -> str | None:
    """The cost of waste, the report's first line when prices are known: "November 2026: 41%
    of $3.2M went to idle and failed GPUs (...)"; None without ``[prices]``."""
    dollars = None if fleet is None else fleet.weighted.get("dollars")
    if dollars is None or dollars.installed <= 0:
        return None
    period = period_words(start_s, end_s)
    parts = sorted(
        ((dollars.categories[c.value], c.value) for c in WASTE if dollars.categories[c.value] > 0),
        reverse=True,
    )
    if not parts:
        return f"{period}: none of {money(dollars.installed)} went to down, idle or failed GPUs"
    names = [name for _, name in parts]
    listed = names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]
    share = dollars.waste / dollars.installed
    detail = ", ".join(f"{name} {money(value)}" for value, name in parts)
    return f"{period}: {share:.0%} of {money(dollars.installed)} went to {listed} GPUs ({detail})"


def period_words(start_s: int, end_s: int) -> str:
    """A window as a person names it: "November 2026" for a calendar month, "2026-11-01 ..
    2026-11-04" for whole days, else its instants (UTC)."""
    start, end = (datetime.fromtimestamp(t, UTC) for t in (start_s, end_s))
    midnight = all((t.hour, t.minute, t.second) == (0, 0, 0) for t in (start, end))
    next_month = (start.replace(day=28) + timedelta(days=4)).replace(day=1)
    if midnight and start.day == 1 and end == next_month:
        return start.strftime("%B %Y")
    if midnight:
        return f"{start:%Y-%m-%d} .. {end:%Y-%m-%d}"
    return f"{start:%Y-%m-%dT%H:%M:%S} .. {end:%Y-%m-%dT%H:%M:%S}Z"


def yield_phrase(yield_: float | None, fleet: FleetYield | None) -> str:
    """``Yield 4.6%``, or ``Yield 4.6% of GPU-seconds, 6.0% of FLOPs`` when they differ."""
    base = "n/a" if yield_ is None else f"{yield_:.1%}"
    flops = None if fleet is None else fleet.weighted.get("flops")
    if flops is None or flops.yield_ is None or yield_ is None:
        return f"Yield {base}"
    if f"{flops.yield_:.1%}" == base:
        return f"Yield {base}"
    return f"Yield {base} of GPU-seconds, {flops.yield_:.1%} of FLOPs paid for"


def weighted_breakdown(
    ledger: Ledger, fleet: FleetYield, by: str, weight: str, *, top: int | None
) -> Breakdown:
    """``report --by BY --weight WEIGHT``: each group's categories in the weight's unit."""
    unit = unit_of(weight)
    if by not in WEIGHTED_DIMENSIONS:
        raise InputError(
            f"report.weight {weight} works with report.by {', '.join(WEIGHTED_DIMENSIONS)}, "
            f"not report.by {by}",
            hint="drop report.weight for a breakdown in GPU-hours",
        )
    weights = {c.class_id: w for c in fleet.classes if (w := c.weight(unit)) is not None}
    if not weights:
        raise InputError(
            f"no GPU of the window has a {weight} weight (model or price unknown)",
            hint="add [prices] or [[gpu_models]] to the manifest (docs/weights.md)",
        )
    top = DEFAULT_TOP.get(by) if top is None else top
    grouped = _weighted_groups(ledger, fleet, by, weights)
    # In the weight's unit, summed as floats: micro-units would round small weights (dollars) away.
    cut = _largest_first(grouped, "label", top or None, exact=False)
    ordered, groups = _ordered(cut, exact=False)
    rows = [BreakdownRow(key=OTHERS if k is None else k, categories=c) for k, c in ordered]
    stated = fleet.weighted.get(unit)
    return Breakdown(
        by=by,
        rows=[*rows, _unallocated(fleet.classes, weights)],
        groups=groups,
        top=top if top and groups > top else None,
        unit=unit,
        weights={} if stated is None else stated.weights,
    )


def _weighted_groups(
    ledger: Ledger, fleet: FleetYield, by: str, weights: dict[int, float]
) -> ibis.Table:
    """``label, category, gpu_s`` with ``gpu_s`` in the weight's unit."""
    backend = ibis.get_backend(ledger.capacity)
    segments = ledger.segments.filter(
        ledger.segments.job_key.notnull() & (ledger.segments.category != Category.DOWN.value)
    )
    label = segments[_COLUMN[by]].fill_null(NO_VALUE).name("label")
    gpu_s = (segments.end_s - segments.start_s) * segments.gpus
    per_job = segments.group_by(["job_key", label, "category"]).aggregate(gpu_s=gpu_s.sum())
    if len(fleet.classes) == 1:
        (weight,) = weights.values()
        return per_job.group_by(["label", "category"]).aggregate(
            gpu_s=(per_job.gpu_s * weight).sum()
        )
    shares = job_shares(backend, ledger, node_class_table(fleet.node_classes))
    table = pa.table(
        {
            "class_id": pa.array(list(weights), pa.int64()),
            "weight": pa.array(list(weights.values()), pa.float64()),
        }
    )
    weighted = shares.join(ibis.memtable(table), "class_id")
    per_job_weight = materialize(
        backend,
        "gy_job_weights",
        weighted.group_by("job_key").aggregate(weight=(weighted.share * weighted.weight).sum()),
    )
    joined = per_job.join(per_job_weight, "job_key")
    return joined.group_by(["label", "category"]).aggregate(
        gpu_s=(joined.gpu_s * joined.weight).sum()
    )


def _unallocated(classes: tuple[GpuClass, ...], weights: dict[int, float]) -> BreakdownRow:
    """Down and unallocated idle time of every weighted class, in the weight's unit."""
    categories = {c.value: 0.0 for c in Category}
    for part in classes:
        weight = weights.get(part.class_id)
        if weight is None:
            continue
        totals = part.totals
        categories["down"] += totals.categories["down"] * weight
        allocated_idle = totals.subcategories.get(f"{Category.IDLE.value}.allocated", 0.0)
        categories["idle"] += (totals.categories["idle"] - allocated_idle) * weight
    return BreakdownRow(key=UNALLOCATED, categories=categories)


def weighted_rows(fleet: FleetYield | None, unit: str) -> WeightedLedger | None:
    """The ledger in ``unit`` (None: no weight of that kind, e.g. dollars without prices)."""
    if fleet is None:
        return None
    return fleet.weighted.get(unit)


def type_lines(fleet: FleetYield | None, installed: float) -> list[str]:
    """One line per GPU type: its nodes, model, weights and where each came from."""
    if fleet is None:
        return []
    lines = []
    for key, t in fleet.by_gpu_type.items():
        share = t.installed_gpu_seconds / installed if installed else 0.0
        if t.accelerator is None:
            lines.append(
                f"{key}: {t.nodes} node(s), {share:.0%} of installed: model unknown, not weighted "
                f"({'; '.join(t.model_sources)})"
            )
            continue
        prices = ", ".join(f"${p.usd_per_gpu_hour:g}/GPU-h ({p.source})" for p in t.prices)
        lines.append(
            f"{key}: {t.nodes} node(s), {share:.0%} of installed, {t.accelerator.peak_tflops_bf16:g} "
            f"TFLOP/s BF16 = {t.h100_equiv:.3g} H100-equivalent" + (f", {prices}" if prices else "")
        )
    return lines


#: Showback dimensions of the HTML page, and how many groups each shows.
SHOWBACK_BY = ("account", "user", "partition")
SHOWBACK_TOP = 12


def showback_of(ledger: Ledger, fleet: FleetYield | None) -> tuple[Breakdown, ...]:
    """The HTML page's showback: dollars by account, user and partition (H100-equivalent hours
    where no GPU-hour has a price; nothing where no GPU's model is known either)."""
    if fleet is None:
        return ()
    for weight in ("dollars", "h100-equiv"):
        if any(c.weight(UNITS[weight]) is not None for c in fleet.classes):
            return tuple(
                weighted_breakdown(ledger, fleet, by, weight, top=SHOWBACK_TOP)
                for by in SHOWBACK_BY
            )
    return ()


def weighted_accounts(ledger: Ledger, fleet: FleetYield | None, top: int) -> tuple[Breakdown, ...]:
    """``serve``'s per-account series in H100-equivalents and dollars (each where some GPU has
    that weight), cut at the same number of accounts as its GPU-seconds."""
    if fleet is None:
        return ()
    return tuple(
        weighted_breakdown(ledger, fleet, "account", weight, top=top)
        for weight in ("h100-equiv", "dollars")
        if any(c.weight(UNITS[weight]) is not None for c in fleet.classes)
    )
