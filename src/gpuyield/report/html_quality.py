"""Section 6 of the HTML report, data quality: what the numbers were built from and how far to trust them.

Coverage counts, how each figure was obtained (measured or estimated), every ingest with its file's
SHA-256, the captured time, the utilization samples, divergence evidence and the first rejected rows;
every value keyed to its ``--json`` key.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from gpuyield.categories import Category
from gpuyield.ledger.coverage import CoverageSpan
from gpuyield.ledger.sums import json_number
from gpuyield.ledger.utilization import UtilizationSummary
from gpuyield.report.chart_style import COLORS
from gpuyield.report.figures import ReportFigures
from gpuyield.report.html_cells import group, hours_text, keyed, share_text, table, td, tr
from gpuyield.report.page_model import Block, Cell, Row, Table, TableGroup
from gpuyield.report.summary import SAMPLE_FIELDS, IngestSource, YieldReport


def quality_blocks(figures: ReportFigures) -> list[Block]:
    report = figures.report
    counts = _coverage_rows(figures)
    how = [
        tr([td(name), td(text, keyed(f"figures.{name}", text))])
        for name, text in report.figures.items()
    ]
    fields = ("ingest_id", "source", "path", "sha256", "rows_read", "rows_rejected", "rows_skipped")
    sources = _source_rows(report.sources, fields)
    rejects = [
        tr(
            [
                td(r.path),
                td("" if r.line is None else str(r.line), num=True),
                td(r.field or ""),
                td(r.message),
            ]
        )
        for r in figures.quality.rejected
    ]
    parts: list[Block] = [
        group(
            table("Coverage", ["what", "count"], counts),
            table("Measured or estimated", ["figure", "how"], how),
        ),
        table("Sources (every ingest, with the SHA-256 of the file read)", list(fields), sources),
    ]
    parts.append(_captured_table(report.coverage, report.not_captured))
    if report.activity is not None:
        parts.append(activity_tables(report, report.activity))
    evidence = _evidence_table(report.divergence_evidence)
    if evidence:
        parts.append(evidence)
    if rejects:
        parts.append(
            table(
                f"First rejected rows (of {report.rejected_rows})",
                ["file", "line", "field", "why"],
                rejects,
            )
        )
    return parts


def activity_tables(report: YieldReport, activity: UtilizationSummary) -> TableGroup:
    """What the utilization samples measured: per category, and how the samples were attributed;
    each figure as ``--json`` prints it in ``gpu_activity``."""

    def cell(key: str, text: str, value: float | None) -> Cell:
        return td(text, keyed(f"gpu_activity.{key}", value), num=True)

    def hours(key: str, gpu_seconds: float) -> Cell:
        value = json_number(gpu_seconds)
        return cell(key, hours_text(value), value)

    def share(key: str, value: float | None) -> Cell:
        return cell(key, share_text(value), value)

    rows = []
    for c, a in activity.activity.items():
        k = f"categories.{c}"
        rows.append(
            tr(
                [
                    Cell(text=c, swatch=COLORS.get(Category(c))),
                    hours(f"{k}.measured_gpu_seconds", a.measured_gpu_seconds),
                    share(f"{k}.measured_share", report.measured_share(c)),
                    hours(f"{k}.idle_gpu_seconds", a.idle_gpu_seconds),
                    share(f"{k}.active_share", a.active_share),
                    share(f"{k}.tensor_share", a.tensor_share),
                ]
            )
        )
    headers = [
        "category",
        "measured GPU-hours",
        "measured",
        "idle GPU-hours",
        "graphics engine",
        "tensor pipes",
    ]
    return group(
        table("Measured GPU activity of job time (utilization samples)", headers, rows),
        table(
            "Utilization samples (unattributed ones are counted, not guessed)",
            ["samples", "count"],
            _sample_rows(activity, cell),
        ),
    )


def _sample_rows(
    activity: UtilizationSummary, cell: Callable[[str, str, float | None], Cell]
) -> list[Row]:
    samples = activity.samples
    counts = [
        tr([td(k.replace("_", " ")), cell(f"samples.{k}", f"{v:,}", v)])
        for k in SAMPLE_FIELDS
        for v in (getattr(samples, k),)
    ]
    threshold = activity.threshold
    counts.append(
        tr(
            [
                td("idle threshold (activity over a sample)"),
                cell("idle_threshold", f"{threshold:.0%}", threshold),
            ]
        )
    )
    idle = json_number(activity.idle_allocated_gpu_seconds)
    counts.append(
        tr(
            [
                td("allocated GPU-hours measured idle (idle.allocated)"),
                cell("idle_allocated_gpu_seconds", hours_text(idle), idle),
            ]
        )
    )
    return counts


def _captured_table(
    coverage: tuple[CoverageSpan, ...], not_captured: tuple[CoverageSpan, ...]
) -> Table:
    """The store's coverage, and the gaps left out of installed (``--allow-gaps``)."""
    rows = []
    spans = (
        ("coverage", "captured", coverage),
        ("not_captured", "not captured (not idle)", not_captured),
    )
    for key, label, listed in spans:
        for i, span in enumerate(listed):
            shown = span.to_dict()
            cells = [td(label)]
            cells += [
                td(shown[f], keyed(f"{key}.{i}.{f}", shown[f])) for f in ("cluster", "start", "end")
            ]
            # Only a gap's duration is in the JSON.
            duration = span.duration_s
            cells.append(
                td("", num=True)
                if key == "coverage"
                else td(hours_text(duration), keyed(f"{key}.{i}.duration_s", duration), num=True)
            )
            rows.append(tr(cells))
    return table(
        "Captured time (report windows stay inside it)",
        ["", "cluster", "from", "to", "hours"],
        rows,
    )


def _count_row(label: str, key: str, count: int) -> Row:
    """A count the report's JSON also carries, under ``key``."""
    return tr([td(label), td(str(count), keyed(key, count), num=True)])


def _coverage_rows(figures: ReportFigures) -> list[Row]:
    report = figures.report
    return [
        _count_row("rejected input rows", "rejected_rows", report.rejected_rows),
        _count_row(
            "jobs that ran without a GPU count (their time is idle)",
            "jobs_without_gpu_count",
            report.jobs_without_gpu_count,
        ),
        tr(
            [
                td("node-hours of those jobs"),
                td(hours_text(figures.quality.node_seconds_without_gpu_count), num=True),
            ]
        ),
    ]


def _source_rows(sources: tuple[IngestSource, ...], fields: tuple[str, ...]) -> list[Row]:
    return [
        tr(
            [
                Cell(
                    text=str(value),
                    code=f == "sha256",
                    keyed=keyed(f"sources.{i}.{f}", value),
                    num=isinstance(value, int),
                )
                for f in fields
                for value in (getattr(s, f),)
            ]
        )
        for i, s in enumerate(sources)
    ]


def _evidence_table(evidence: tuple[dict[str, Any], ...]) -> Table | None:
    """Divergence-watch findings from run telemetry, one row each (columns as the JSON has them)."""
    if not evidence:
        return None
    columns = list(dict.fromkeys(k for item in evidence for k in item))
    rows = [
        tr(
            [
                td(
                    str(item.get(c, "")),
                    keyed(f"divergence_evidence.{i}.{c}", item[c]) if c in item else None,
                )
                for c in columns
            ]
        )
        for i, item in enumerate(evidence)
    ]
    return table("Divergence evidence in run telemetry", columns, rows)
