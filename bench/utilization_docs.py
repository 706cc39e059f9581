"""The utilization benchmark's figures as docs/benchmarks.md shows them, and where an ingest's
time goes (each SQL statement of one ingest, timed in-process).

The page's table is written from the benchmark's output (``markdown``, through ``bench/docs.py``),
between the markers ``<!-- bench:utilization:begin -->`` and ``<!-- bench:utilization:end -->``,
never typed.
"""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

from bench import docs_format

# Statements of an ingest by what they do (the first that matches names a statement).
PHASES = (
    ("INSERT INTO gy_series", "read the JSON (DuckDB's reader, checked per series)"),
    ("CREATE OR REPLACE TEMP TABLE gy_info", "series' order, ends and spacing"),
    ("INSERT INTO gpu_series", "write the samples as series"),
    ("INSERT INTO sample_groups", "attribute and group the samples"),
    ("COMMIT", "commit (write the store)"),
    ("SELECT ingest_id, count(*) FROM gpu_samples", "count what was stored"),
)

_PROFILE = r"""
import json, sys, time
from pathlib import Path
from gpuyield import store
from gpuyield.ingest.slurm import SlurmInputs, ingest_slurm
from gpuyield.ingest.utilization import ingest_utilization

class Timed:
    def __init__(self, con):
        self.con, self.log = con, []
    def execute(self, sql, *args, **kwargs):
        began = time.perf_counter()
        result = self.con.execute(sql, *args, **kwargs)
        self.log.append((" ".join(sql.split()), time.perf_counter() - began))
        return result
    def __getattr__(self, name):
        return getattr(self.con, name)

data = Path(sys.argv[1])
db = data / "breakdown.duckdb"
for stale in (db, db.with_name(db.name + ".wal")):
    stale.unlink(missing_ok=True)
ingest_slurm(db, SlurmInputs.from_dir(data))
con = store.connect(db)
timed = Timed(con)
began = time.perf_counter()
ingest_utilization(None, prom_json=sorted(data.glob("dcgm-*.json")), con=timed)
total = time.perf_counter() - began
con.close()
print(json.dumps({"total_s": total, "statements": timed.log}))
"""


def breakdown(num_gpus: int) -> dict[str, Any]:
    """Each statement of one ``ingest utilization`` of the size's data set, timed, by phase."""
    from bench.utilization import OUT, generate

    data, _ = generate(num_gpus, OUT)
    done = subprocess.run(
        [sys.executable, "-c", _PROFILE, str(data)], capture_output=True, text=True, check=True
    )
    found = json.loads(done.stdout.strip().splitlines()[-1])
    phases: dict[str, float] = {}
    for sql, seconds in found["statements"]:
        name = next((label for prefix, label in PHASES if sql.startswith(prefix)), "the rest")
        phases[name] = phases.get(name, 0.0) + seconds
    phases["the rest"] = phases.get("the rest", 0.0) + found["total_s"] - sum(phases.values())
    return {"total_s": round(found["total_s"], 2), "phases_s": _rounded(phases)}


def _rounded(values: dict[str, float]) -> dict[str, float]:
    return {k: round(v, 2) for k, v in sorted(values.items(), key=lambda kv: -kv[1])}


def _measured_line(figures: dict[str, Any]) -> str:
    """When, where and by what command the figures were measured (the line every benchmark's
    section opens with), and how the steps were run."""
    how = (
        "Each step a fresh process, medians of the rounds; ratios against the bare read of the "
        f"same round set; DuckDB {figures['machine']['duckdb']}."
    )
    if "recorded" not in figures:  # runs from before bench/runner.py's Recorded
        m = figures["machine"]
        return f"Measured {m['when']} on {m['cpus']} cores (load average {m['load_avg_1m']}). {how}"
    return f"{docs_format.recorded(figures)} {how}"


def markdown(figures: dict[str, Any]) -> str:
    """The section's text: the machine, a row per size, and the breakdowns when measured."""
    lines = [
        _measured_line(figures),
        "",
        "| GPUs | samples | JSON | bare read | ingest utilization | report | ingest + report "
        "| ratio | CPU: bare read, ingest + report, ratio | peak RSS | target (3x, 4 GB) |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for size in figures["sizes"]:
        wall = size["median_wall_s"]
        lines.append(
            f"| {size['gpus']:,} | {size['samples'] / 1e6:.1f}M | {size['sample_mb']:,.0f} MB "
            f"| {wall['bare_read']:.1f} s | {wall['ingest_utilization']:.1f} s "
            f"({size['ingest_ratio']:.1f}x) | {wall['report']:.1f} s ({size['report_ratio']:.1f}x) "
            f"| {size['ingest_and_report_s']:.1f} s | **{size['ratio_to_bare_read']:.2f}x** "
            f"| {_cpu_cell(size)} | {size['peak_rss_mb'] / 1024:.1f} GB "
            f"| {'met' if size['meets_target'] else 'not met'} |"
        )
    lines += _per_gigabyte(figures["sizes"])
    for size in figures["sizes"]:
        if "breakdown" in size:
            total = size["breakdown"]["total_s"]
            title = (
                f"Where one ingest's time went at {size['gpus']:,} GPUs ({total:.1f} s; wall "
                "seconds in-process, one more ingest after the rounds, `--breakdown`):"
            )
            lines += ["", title, ""]
            lines += ["| phase | seconds |", "|---|---:|"]
            lines += [f"| {k} | {v:.1f} |" for k, v in size["breakdown"]["phases_s"].items()]
    return "\n".join(lines)


def _per_gigabyte(sizes: list[dict[str, Any]]) -> list[str]:
    """CPU seconds per GB of JSON, each step: whether a step's cost grows faster than the data
    (the ratio can grow because the baseline gets cheaper per byte, not only because a step
    gets dearer)."""
    measured = [s for s in sizes if "median_cpu_s" in s and s.get("sample_mb")]
    if not measured:
        return []
    lines = [
        "",
        "CPU seconds per GB of JSON (the same runs):",
        "",
        "| GPUs | bare read | ingest utilization | report |",
        "|---:|---:|---:|---:|",
    ]
    for size in measured:
        cpu, gigabytes = size["median_cpu_s"], size["sample_mb"] / 1000
        lines.append(
            f"| {size['gpus']:,} | {cpu['bare_read'] / gigabytes:.1f} s "
            f"| {cpu['ingest_utilization'] / gigabytes:.1f} s | {cpu['report'] / gigabytes:.1f} s |"
        )
    return lines


def _cpu_cell(size: dict[str, Any]) -> str:
    """CPU seconds of the bare read and of ingest + report, and their ratio (runs from before
    the CPU time was kept show a dash)."""
    cpu = size.get("median_cpu_s")
    if cpu is None:
        return "-"
    joined = cpu["ingest_utilization"] + cpu["report"]
    return f"{cpu['bare_read']:.1f} s, {joined:.1f} s, {size['cpu_ratio_to_bare_read']:.2f}x"
