"""The Markdown pieces every table of docs/benchmarks.md is made of: the line saying how a run
was recorded, a table, and how seconds, ratios and megabytes are written (``bench/docs_tables.py``
uses them for each benchmark)."""

from __future__ import annotations

from typing import Any

Figures = dict[str, Any]


def recorded(figures: Figures) -> str:
    """The line above a table: command, time, commit, CPUs, load average at start and end."""
    r = figures["recorded"]
    return (
        f"Measured {r['when']} at commit `{r['commit']}` by `{r['command']}` on {r['cpus']} "
        f"cores (1-minute load average {r['load_avg_1m_start']} at the start, "
        f"{r['load_avg_1m_end']} at the end; Python {r['python']})."
    )


def table(head: list[str], align: str, rows: list[list[str]]) -> str:
    """A Markdown table; ``align`` has one letter per column: ``l`` left, ``r`` right."""
    rule = "|".join("---:" if a == "r" else "---" for a in align)
    lines = ["| " + " | ".join(head) + " |", f"|{rule}|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def page(figures: Figures, *blocks: str) -> str:
    return "\n\n".join([recorded(figures), *blocks])


def secs(seconds: float | None, digits: int = 2) -> str:
    return "-" if seconds is None else f"{seconds:.{digits}f} s"


def times(ratio: float | None, digits: int = 2) -> str:
    return "-" if ratio is None else f"{ratio:.{digits}f}x"


def millis(ms: float) -> str:
    return f"{ms / 1000:,.1f} s" if ms >= 1000 else f"{ms:.1f} ms"


def megs(mb: float | None) -> str:
    return "-" if mb is None else f"{mb:,.0f} MB"


def jobs(n: int) -> str:
    return f"{n // 1_000_000}M" if n % 1_000_000 == 0 else f"{n // 1000:,}k"


def met(ok: bool) -> str:
    return "met" if ok else "**not met**"
