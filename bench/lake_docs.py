"""Spark settings measured against each other: several ``python -m bench lake --jobs N
[--spark-conf KEY=VALUE ...]`` runs as one table of docs/scale.md, never typed.

Each run is one ``bench/out/lake.json`` (copy it aside between runs); this module gathers them
into ``bench/out/lake_settings.json`` and renders the section between
``<!-- bench:lake_settings:begin -->`` and ``<!-- bench:lake_settings:end -->``:

    python -m bench.lake_docs RUN.json [RUN.json ...] --docs docs/scale.md
    python -m bench.docs --from bench/out docs/scale.md lake_settings     # from the gathered file
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from bench import docs_format
from bench.runner import OUT

Figures = dict[str, Any]
NAME = "lake_settings"


def gather(runs: list[Figures]) -> Figures:
    """The runs as one set of figures (each kept whole, in the order given)."""
    for run in runs:
        if len(run.get("cases", [])) != 1 or run["cases"][0]["case"] != "jobs":
            raise ValueError("each run must be `python -m bench lake --jobs N` (one jobs case)")
    return {"runs": runs}


def _settings(run: Figures) -> str:
    conf = run.get("spark_conf") or {}
    if not conf:
        return "none (JVM defaults)"
    return "<br>".join(f"`{key}={value}`" for key, value in sorted(conf.items()))


def _row(run: Figures) -> list[str]:
    case = run["cases"][0]
    store, spark = case["store"], case["spark"]
    steps = sorted(spark.get("steps", []), key=lambda s: -s["jvm_cpu_s"])[:2]
    largest = "; ".join(f"`{s['step']}` {s['jvm_cpu_s']:.0f} s" for s in steps)
    return [
        docs_format.jobs(case["rows"]),
        _settings(run),
        f"{run['recorded']['when']}, `{run['recorded']['commit']}`, load "
        f"{run['recorded']['load_avg_1m_start']}",
        f"{store['first_report_s']:.1f} s, {store['report_cpu_s']:.1f} s",
        f"{spark['first_report_s']:.1f} s, {spark['report_cpu_s']:.1f} s, "
        f"{spark['open_cpu_s']:.1f} s",
        f"{spark['ratio_wall']:.1f}x, {spark['ratio_cpu']:.1f}x",
        largest,
        "yes" if case["same_report"] else "**no**",
    ]


def markdown(figures: Figures) -> str:
    """The section: a row per run, in the order gathered."""
    head = [
        "jobs",
        "Spark settings added",
        "run (UTC), commit, load",
        "store: report, CPU",
        "Spark: report, CPU, opening's CPU",
        "Spark / store: wall, CPU",
        "largest Spark steps (JVM CPU)",
        "same report",
    ]
    rows = [_row(run) for run in figures["runs"]]
    intro = (
        "Each row one `python -m bench lake --jobs N [--spark-conf KEY=VALUE ...]` run on the "
        "same 2 cores (store, DuckDB on the lake and Spark, one after the other), gathered by "
        "`python -m bench.lake_docs`."
    )
    return intro + "\n\n" + docs_format.table(head, "rlllrrll", rows)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.lake_docs", description=__doc__)
    parser.add_argument("runs", nargs="+", type=Path, help="saved bench/out/lake.json files")
    parser.add_argument("--docs", type=Path, help="write the section of this page")
    args = parser.parse_args(argv)
    figures = gather([json.loads(p.read_text(encoding="utf-8")) for p in args.runs])
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / f"{NAME}.json").write_text(json.dumps(figures, indent=2), encoding="utf-8")
    if args.docs is not None:
        from bench.docs import write_docs

        write_docs(args.docs, {NAME: figures})
    else:
        print(markdown(figures))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
