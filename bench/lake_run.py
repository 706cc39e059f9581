"""Timed reports for ``bench.lake``, run in a fresh interpreter: ``python -m bench.lake_run
ENGINE SOURCE REPORTS [MASTER]``.

``store`` reads a DuckDB store, ``duckdb`` and ``spark`` a lake. Prints one JSON line: the time
to open the engine (Spark: the driver's JVM and the cluster's executors), each report's time (a
second one runs the same report again in the same process: warm caches and JIT), and the report's
SHA-256, which must be the same from all three. ``REPORTS`` 0 only opens (the bench subtracts its
CPU time).
"""

from __future__ import annotations

import hashlib
import json
import sys
import time
from pathlib import Path


def main(argv: list[str]) -> int:
    engine, source, reports = argv[0], Path(argv[1]), int(argv[2])
    master = argv[3] if len(argv) > 3 else None
    from gpuyield.lake import LakeSource
    from gpuyield.report.document import report_json_text
    from gpuyield.report.summary import build_report_with_breakdown

    steps = None
    if engine == "spark" and reports:
        from bench.lake_steps import Steps

        steps = Steps()
        steps.install()
    began = time.perf_counter()
    session = None
    if engine == "spark":
        from gpuyield.lake.spark import spark_session

        opened = spark_session(master)
        session = opened.__enter__()
    opened_s = time.perf_counter() - began
    where = source if engine == "store" else LakeSource(path=source, engine=engine)
    times, text = [], ""
    for _ in range(reports):
        t0 = time.perf_counter()
        result = build_report_with_breakdown(where)
        text = report_json_text(result.report, result.breakdown)
        times.append(time.perf_counter() - t0)
    if session is not None:
        opened.__exit__(None, None, None)
    print(
        json.dumps(
            {
                "open_s": round(opened_s, 3),
                "report_s": [round(t, 3) for t in times],
                "sha256": hashlib.sha256(text.encode()).hexdigest() if times else None,
                **(steps.summary() if steps is not None else {}),
            }
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
