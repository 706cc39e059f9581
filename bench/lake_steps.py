"""Where a Spark report's time goes, step by step, for ``bench.lake_run``: each query the ledger
runs (``to_pyarrow``) and each intermediate it caches (``ledger.plan``), with its wall time and
the CPU time the JVMs spent meanwhile (the driver's, and the executors' on the cluster).

Only timing wraps the calls; the report's work and result are unchanged.
"""

from __future__ import annotations

import functools
import os
import time
import traceback
from pathlib import Path
from typing import Any

_TICK = os.sysconf("SC_CLK_TCK")


def _jvm_cpu_s() -> float:
    """CPU seconds of the bench's Spark JVMs: those descending from the bench's process (this
    process's parent): this driver's JVM, the executors and daemons of the bench's cluster (idle
    while a report runs); not the JVMs of tests or other sessions on a shared machine."""
    bench = os.getppid()
    parents: dict[int, int] = {}
    cpu: dict[int, float] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        parents[int(entry.name)] = int(fields[1])
        if b"java" in cmdline:
            cpu[int(entry.name)] = (int(fields[11]) + int(fields[12])) / _TICK
    return sum(seconds for pid, seconds in cpu.items() if _descends(pid, bench, parents))


def _descends(pid: int, ancestor: int, parents: dict[int, int]) -> bool:
    seen = set()
    while pid in parents and pid not in seen:
        seen.add(pid)
        pid = parents[pid]
        if pid == ancestor:
            return True
    return False


class Steps:
    """Records the steps of the reports run while installed."""

    def __init__(self) -> None:
        self.steps: list[dict[str, Any]] = []

    def _timed(self, kind: str, call: Any) -> Any:
        @functools.wraps(call)
        def timed(*args: Any, **kwargs: Any) -> Any:
            where = [f.name for f in traceback.extract_stack()[-6:-1] if "gpuyield" in f.filename]
            name = args[1] if kind == "cache" else " < ".join(reversed(where[-3:]))
            began, cpu = time.perf_counter(), _jvm_cpu_s()
            try:
                return call(*args, **kwargs)
            finally:
                self.steps.append(
                    {
                        "kind": kind,
                        "step": name.rsplit("_", 1)[0] if kind == "cache" else name,
                        "wall_s": round(time.perf_counter() - began, 2),
                        "jvm_cpu_s": round(_jvm_cpu_s() - cpu, 2),
                    }
                )

        return timed

    def install(self) -> None:
        """Wrap the PySpark backend's queries and the ledger's Spark cache."""
        from ibis.backends.pyspark import Backend

        from gpuyield.lake.spark_results import ExactSparkBackend
        from gpuyield.ledger import plan

        Backend.execute = self._timed("query", Backend.execute)  # type: ignore[method-assign]
        ExactSparkBackend.to_pyarrow = self._timed(  # type: ignore[method-assign]
            "query", ExactSparkBackend.to_pyarrow
        )
        plan._cached = self._timed("cache", plan._cached)

    def largest(self, count: int = 12) -> list[dict[str, Any]]:
        """The steps that took longest, longest first."""
        return sorted(self.steps, key=lambda s: -s["wall_s"])[:count]

    def summary(self) -> dict[str, Any]:
        """How many queries and caches, their time together, and the largest steps."""
        queries = [s for s in self.steps if s["kind"] == "query"]
        return {
            "queries": len(queries),
            "caches": len(self.steps) - len(queries),
            # Every step together: the report's time in the ledger's and the report's queries and
            # caches (the JVMs' CPU time does not grow with other work on a shared machine).
            "steps_wall_s": round(sum(s["wall_s"] for s in self.steps), 2),
            "steps_jvm_cpu_s": round(sum(s["jvm_cpu_s"] for s in self.steps), 2),
            "steps": self.largest(),
        }
