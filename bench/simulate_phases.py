"""One simulator run, phase by phase: ``python -m bench.simulate_phases --days D [--utilization]``.

Run by ``bench.simulate`` in a child process (with ``--baseline-src``, against another checkout's
code too, so it uses only what every version has: ``simulate``, ``write_outputs``,
``write_utilization``). Each phase's wall time and peak RSS are its own: before a phase the
kernel's high-water mark is reset (``/proc/self/clear_refs``), so the writer's peak is not the
simulation's. Prints one JSON line.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import re
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

_T = TypeVar("_T")
_MB = 2**20


def memory_mb(field: str) -> float:
    """``VmHWM`` (peak resident memory since the last reset) or ``VmRSS`` (now) of this process."""
    status = Path("/proc/self/status").read_text()
    match = re.search(rf"{field}:\s+(\d+) kB", status)
    return int(match.group(1)) / 1024 if match else float("nan")


def reset_peak() -> None:
    """Start a new high-water mark at the current resident memory (Linux; elsewhere a no-op,
    and every phase's peak is then the process's so far)."""
    with contextlib.suppress(OSError):
        Path("/proc/self/clear_refs").write_text("5")


def phase(figures: dict[str, Any], name: str, fn: Callable[[], _T]) -> _T:
    """Run ``fn`` as phase ``name``: its wall and CPU time (the machine is shared: CPU time
    says what the phase cost when neighbours slow the wall clock), the resident memory it
    started from and its peak (``<name>_s``, ``<name>_cpu_s``, ``<name>_start_rss_mb``,
    ``<name>_peak_rss_mb``) into ``figures``."""
    reset_peak()
    figures[f"{name}_start_rss_mb"] = memory_mb("VmRSS")
    began, began_cpu = time.perf_counter(), time.process_time()
    out = fn()
    figures[f"{name}_s"] = time.perf_counter() - began
    figures[f"{name}_cpu_s"] = time.process_time() - began_cpu
    figures[f"{name}_peak_rss_mb"] = memory_mb("VmHWM")
    return out


def run(days: float, *, utilization: bool, out_dir: Path) -> dict[str, Any]:
    """Simulate ``cluster-100k-year`` for ``days``, write it into ``out_dir``, copy its sacct.psv."""
    from gpuyield.simulate.cluster import simulate
    from gpuyield.simulate.output import write_outputs
    from gpuyield.simulate.scenario import load_scenario

    scenario = load_scenario("cluster-100k-year").with_overrides(days=days)
    figures: dict[str, Any] = {"days": days, "gpus": scenario.fleet.num_gpus}
    result = phase(figures, "simulate", lambda: simulate(scenario))
    truth = phase(figures, "write", lambda: write_outputs(result, out_dir))
    sizes = {str(p.relative_to(out_dir)): p.stat().st_size for p in out_dir.rglob("*.*")}
    figures["written_mb"] = sum(sizes.values()) / _MB
    figures["write_mb_per_s"] = figures["written_mb"] / figures["write_s"]
    figures["files_mb"] = {name: size / _MB for name, size in sorted(sizes.items())}
    sacct = out_dir / "sacct.psv"
    phase(figures, "copy", lambda: shutil.copyfile(sacct, out_dir / "copy.psv"))
    figures["copy_mb_per_s"] = sacct.stat().st_size / _MB / figures["copy_s"]
    (out_dir / "copy.psv").unlink()
    figures["sacct_rows"] = _lines(sacct) - 1
    figures["research_jobs"] = 0 if result.jobs is None else int(result.jobs.job_id.size)
    figures["events"] = result.num_events
    figures["yield"] = truth.yield_
    if utilization:
        from gpuyield.simulate.utilization import write_utilization

        phase(
            figures,
            "utilization",
            lambda: write_utilization(out_dir, window_end_s=truth.window_end_s, seed=scenario.seed),
        )
        figures["utilization_mb"] = (out_dir / "utilization.json").stat().st_size / _MB
    return figures


def _lines(path: Path) -> int:
    count = 0
    with path.open("rb") as fh:
        while block := fh.read(1 << 24):
            count += block.count(b"\n")
    return count


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.simulate_phases", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--days", type=float, required=True, help="days of cluster-100k-year")
    parser.add_argument("--utilization", action="store_true", help="also write utilization.json")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bench-simulate-") as tmp:
        figures = run(args.days, utilization=args.utilization, out_dir=Path(tmp))
    print(json.dumps(figures))
    return 0


if __name__ == "__main__":
    sys.exit(main())
