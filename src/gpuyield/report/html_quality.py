"""Section 6 of the HTML report, data quality: what the numbers were built from and how far to trust them.

Coverage counts, how each figure was obtained (measured or estimated), every ingest with its file's
SHA-256, the captured time, the utilization samples, divergence evidence and the first rejected rows;
every value keyed to its ``--json`` key.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from gpuyield.report.chart_style import COLORS
from gpuyield.report.figures import ReportFigures
from gpuyield.report.html_cells import group, hours_text, keyed, share_text, table, td, tr
from gpuyield.report.page_model import Block, Cell, Row, Table, TableGroup


def quality_blocks(figures: ReportFigures, data: dict[str, Any]) -> list[Block]:
    counts = _coverage_rows(figures, data)
    how = [
        tr([td(name), td(text, keyed(f"figures.{name}", text))])
        for name, text in data["figures"].items()
    ]
    fields = ("ingest_id", "source", "path", "sha256", "rows_read", "rows_rejected", "rows_skipped")
    sources = _source_rows(data, fields)
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
    parts.append(_captured_table(data))
    if "gpu_activity" in data:
        parts.append(activity_tables(data["gpu_activity"]))
    evidence = _evidence_table(data.get("divergence_evidence", []))
    if evidence:
        parts.append(evidence)
    if rejects:
        parts.append(
            table(
                f"First rejected rows (of {data['rejected_rows']})",
                ["file", "line", "field", "why"],
                rejects,
            )
        )
    return parts


def activity_tables(activity: dict[str, Any]) -> TableGroup:
    """What the utilization samples measured: per category, and how the samples were attributed."""

    def cell(key: str, text: str, value: Any) -> Cell:
        return td(text, keyed(f"gpu_activity.{key}", value), num=True)

    rows = []
    for c, a in activity["categories"].items():
        k = f"categories.{c}"
        rows.append(
            tr(
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


def _sample_rows(activity: dict[str, Any], cell: Callable[[str, str, Any], Cell]) -> list[Row]:
    counts = [
        tr([td(k.replace("_", " ")), cell(f"samples.{k}", f"{v:,}", v)])
        for k, v in activity["samples"].items()
    ]
    threshold = activity["idle_threshold"]
    counts.append(
        tr(
            [
                td("idle threshold (activity over a sample)"),
                cell("idle_threshold", f"{threshold:.0%}", threshold),
            ]
        )
    )
    idle = activity["idle_allocated_gpu_seconds"]
    counts.append(
        tr(
            [
                td("allocated GPU-hours measured idle (idle.allocated)"),
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
            cells = [td(label)]
            cells += [
                td(str(span[f]), keyed(f"{key}.{i}.{f}", span[f]))
                for f in ("cluster", "start", "end")
            ]
            duration = span.get("duration_s")
            cells.append(
                td("", num=True)
                if duration is None
                else td(hours_text(duration), keyed(f"{key}.{i}.duration_s", duration), num=True)
            )
            rows.append(tr(cells))
    return table(
        "Captured time (report windows stay inside it)",
        ["", "cluster", "from", "to", "hours"],
        rows,
    )


def _coverage_rows(figures: ReportFigures, data: dict[str, Any]) -> list[Row]:
    return [
        tr(
            [
                td("rejected input rows"),
                td(
                    str(data["rejected_rows"]),
                    keyed("rejected_rows", data["rejected_rows"]),
                    num=True,
                ),
            ]
        ),
        tr(
            [
                td("jobs that ran without a GPU count (their time is idle)"),
                td(
                    str(data["jobs_without_gpu_count"]),
                    keyed("jobs_without_gpu_count", data["jobs_without_gpu_count"]),
                    num=True,
                ),
            ]
        ),
        tr(
            [
                td("node-hours of those jobs"),
                td(hours_text(figures.quality.node_seconds_without_gpu_count), num=True),
            ]
        ),
    ]


def _source_rows(data: dict[str, Any], fields: tuple[str, ...]) -> list[Row]:
    return [
        tr(
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
