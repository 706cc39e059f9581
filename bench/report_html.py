"""HTML report benchmark: the simulated 16k-GPU llama3-405b store's page, in time and size.

Run: ``python -m bench report_html [--quick]`` (figures also go to ``bench/out/report_html.json``).

Question (issue 24): on the store ``gpuyield simulate llama3-405b`` writes (2,048 nodes, 54 days,
453 lineage jobs cut into some 16,000 kept/lost/overhead parts), is ``report --html`` under 15 s
and its page under 1 MB? Before, the release-lineage chart drew one bar per part: 250-280 s and
7.9 MB, 7.5 MB of it one chart that rendered as a black band. Baseline, same run and store:
``report --json`` (the ledger alone), so the ratio says what the page costs over the numbers.

Each command is a subprocess (wall time from spawn to exit, Python start-up included; peak RSS
polled from ``/proc``, as the ledger benchmark does). ``--quick`` simulates 14 days instead of 54.
"""

from __future__ import annotations

import os
import resource
import tempfile
from pathlib import Path
from typing import Any

from bench.ledger import Measured, gpuyield_argv, machine, measure

TARGET_S = 15.0
TARGET_BYTES = 1_000_000
RUNS = 3


def _prepare(work: Path, days: int) -> Path:
    """Simulate the scenario and ingest it; returns the store."""
    out, db = work / "llama", work / "llama.duckdb"
    cli = gpuyield_argv()
    steps = [
        [*cli, "simulate", "llama3-405b", "--out", str(out), "--days", str(days)],
        [*cli, "ingest", "slurm", "--dir", str(out), "--db", str(db), "--json"],
    ]
    for argv in steps:
        done = measure(argv, timeout_s=600)
        if done.returncode:
            raise SystemExit(f"{' '.join(argv)} failed: {done.stderr_tail}")
    return db


def _timed(argv: list[str]) -> tuple[Measured, float]:
    """The run and its CPU seconds (user + system): on a shared machine the wall time measures
    the neighbours too, the CPU time only the command."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = measure(argv)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if done.returncode:
        raise SystemExit(f"{' '.join(argv)} failed: {done.stderr_tail}")
    return done, cpu


def run(*, quick: bool = False) -> dict[str, Any]:
    """Build the page ``RUNS`` times beside the JSON report; print and return the figures."""
    days = 14 if quick else 54
    with tempfile.TemporaryDirectory(prefix="bench-report-html-") as tmp:
        work = Path(tmp)
        db = _prepare(work, days)
        cli = gpuyield_argv()
        page = work / "report.html"
        html = [_timed([*cli, "report", "--db", str(db), "--html", str(page)]) for _ in range(RUNS)]
        json_runs = [_timed([*cli, "report", "--db", str(db), "--json"]) for _ in range(RUNS)]
        size = page.stat().st_size
    best_html = min(r.wall_s for r, _ in html)
    best_json = min(r.wall_s for r, _ in json_runs)
    figures = {
        "store": f"gpuyield simulate llama3-405b --days {days}",
        "html_wall_s": [round(r.wall_s, 2) for r, _ in html],
        "html_cpu_s": [round(cpu, 2) for _, cpu in html],
        "html_peak_rss_mb": max(r.peak_rss_mb for r, _ in html),
        "json_wall_s": [round(r.wall_s, 2) for r, _ in json_runs],
        "json_cpu_s": [round(cpu, 2) for _, cpu in json_runs],
        "json_peak_rss_mb": max(r.peak_rss_mb for r, _ in json_runs),
        "html_best_s": round(best_html, 2),
        "ratio_html_to_json": round(best_html / best_json, 2),
        "page_bytes": size,
        "target_s": TARGET_S,
        "target_bytes": TARGET_BYTES,
        "within_targets": best_html < TARGET_S and size < TARGET_BYTES,
        "load_1m": os.getloadavg()[0],
        "machine": machine(),
    }
    print(
        f"report --html {best_html:.1f} s (runs {figures['html_wall_s']}, CPU "
        f"{figures['html_cpu_s']}), page {size / 1e6:.2f} "
        f"MB, peak {figures['html_peak_rss_mb']:.0f} MB; report --json {best_json:.1f} s; "
        f"ratio {figures['ratio_html_to_json']}x; targets 15 s, 1 MB: "
        f"{'met' if figures['within_targets'] else 'NOT met'}"
    )
    return figures


if __name__ == "__main__":
    import sys

    from bench.runner import benchmark_main

    raise SystemExit(benchmark_main("report_html", run, sys.argv[1:]))
