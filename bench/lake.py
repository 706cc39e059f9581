"""Lake benchmark: one report from a DuckDB store, from DuckDB reading its lake, and from a Spark
standalone cluster reading the lake, in the same run on the same cores.

Two cases, each ingested once into a store (cached under ``bench/out/data/``) and exported to a lake:

* ``jobs``: ``bench.gen_slurm``'s 100k-GPU cluster, 10M jobs (``--quick``: 100k);
* ``utilization``: ``bench.utilization``'s cluster-day of per-GPU samples, one a minute, for 8,000
  GPUs (11.5M samples; ``--quick``: 800 GPUs).

Each engine runs ``bench.lake_run`` in a process of its own: time to open (Spark: the driver's JVM
and an executor on the cluster), the first report, the same report again, and the peak resident
memory of every process it used (Spark: the driver's Python and JVM, and the executor, summed).
The three reports' SHA-256 must agree. The Spark cluster is one master and one worker of 2 cores
(``tests/spark_cluster.py``; executor 4 GB, driver 2 GB). Figures: seconds per million rows per
core (report time x cores / rows), and Spark's and DuckDB-on-lake's ratio to the store.
Run: ``python -m bench lake [--quick]``; heavy at full size: run it with ``nice``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from bench.gen_slurm import GenParams, cached
from bench.ledger import OUT, gpuyield_argv, machine, measure

CORES = 2
FULL_JOBS, QUICK_JOBS = 10_000_000, 100_000
FULL_GPUS, QUICK_GPUS = 8_000, 800
TARGET_RATIO = 5.0
EXECUTOR_MEMORY, DRIVER_MEMORY, WORKER_MEMORY = "4g", "2g", "4g"


def _store_and_lake(case: str, size: int) -> tuple[Path, Path, int, dict[str, Any]]:
    """The case's store and lake (built once, cached) and its rows (jobs, or samples)."""
    gy = gpuyield_argv()
    if case == "jobs":
        data = cached(GenParams(num_jobs=size), OUT / "data").out_dir
        ingest = [[*gy, "ingest", "slurm", "--dir", str(data), "--json", "-q"]]
        rows = size
    else:
        from bench.utilization import generate

        data, files = generate(size, OUT)
        ingest = [
            [*gy, "ingest", "slurm", "--dir", str(data), "-q"],
            [*gy, "ingest", "utilization", *[a for f in files for a in ("--prom-json", str(f))]],
        ]
        rows = size * 1440
    db, lake = data / "lake-bench.duckdb", data / "lake"
    built: dict[str, Any] = {}
    if not db.exists():
        for argv in ingest:
            run = measure([*argv, "--db", str(db)])
            assert run.returncode == 0, run.stderr_tail
    if not (lake / "_gpuyield").exists():
        built["export"] = measure([*gy, "lake", "export", "--db", str(db), "--lake", str(lake)])
        assert built["export"].returncode == 0, built["export"].stderr_tail
        built["export"] = built["export"].figures()
    return db, lake, rows, built


class _TreeMemory:
    """Peak resident memory of a process and its descendants, plus Spark executors (children of
    the worker, not of the driver), summed; polled every 0.2 s from ``/proc``."""

    def __init__(self, pid: int, executors_under: Path | None) -> None:
        self.pid, self.executors_under, self.peak_mb = pid, executors_under, 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)
        self._thread.start()

    def _pids(self) -> set[int]:
        parents: dict[int, int] = {}
        executors = set()
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                stat = (entry / "stat").read_text()
                cmdline = (entry / "cmdline").read_bytes().decode(errors="replace")
            except OSError:
                continue
            parents[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])
            if self.executors_under and "CoarseGrainedExecutorBackend" in cmdline:
                executors.add(int(entry.name))
        tree, frontier = {self.pid}, [self.pid]
        while frontier:
            parent = frontier.pop()
            children = [p for p, pp in parents.items() if pp == parent and p not in tree]
            tree.update(children)
            frontier += children
        return tree | executors

    def _poll(self) -> None:
        while not self._stop.wait(0.2):
            total = 0.0
            for pid in self._pids():
                try:
                    status = Path(f"/proc/{pid}/status").read_text()
                except OSError:
                    continue
                line = next((x for x in status.splitlines() if x.startswith("VmRSS")), None)
                total += int(line.split()[1]) / 1024 if line else 0.0
            self.peak_mb = max(self.peak_mb, total)

    def stop(self) -> float:
        self._stop.set()
        self._thread.join()
        return round(self.peak_mb, 1)


def _engine(engine: str, source: Path, master: str | None, env: dict[str, str]) -> dict[str, Any]:
    argv = [sys.executable, "-m", "bench.lake_run", engine, str(source)]
    argv += [master] if master else []
    began = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env)  # fmt: skip
    memory = _TreeMemory(proc.pid, Path("/") if engine == "spark" else None)
    out, err = proc.communicate()
    peak = memory.stop()
    figures: dict[str, Any] = {"wall_s": round(time.perf_counter() - began, 2), "peak_rss_mb": peak}
    if proc.returncode != 0:
        return {**figures, "returncode": proc.returncode, "stderr_tail": err[-3000:]}
    return {**figures, **json.loads(out.strip().splitlines()[-1])}


def _spark_env(work: Path) -> dict[str, str]:
    """The driver's settings, as a user would give them: a spark-defaults.conf."""
    conf = work / "conf"
    conf.mkdir(parents=True, exist_ok=True)
    (conf / "spark-defaults.conf").write_text(
        f"spark.driver.memory {DRIVER_MEMORY}\nspark.executor.memory {EXECUTOR_MEMORY}\n"
        f"spark.executor.cores {CORES}\nspark.cores.max {CORES}\nspark.ui.enabled false\n"
        "spark.driver.host 127.0.0.1\nspark.driver.bindAddress 127.0.0.1\n"
    )
    return {**os.environ, "SPARK_CONF_DIR": str(conf), "SPARK_LOCAL_IP": "127.0.0.1",
            "PYSPARK_PYTHON": sys.executable}  # fmt: skip


def bench_case(case: str, size: int, master: str, env: dict[str, str]) -> dict[str, Any]:
    """One case on the three engines, and what the figures say."""
    db, lake, rows, built = _store_and_lake(case, size)
    figures: dict[str, Any] = {"case": case, "rows": rows, **built}
    figures["store"] = _engine("store", db, None, dict(os.environ))
    figures["duckdb_lake"] = _engine("duckdb", lake, None, dict(os.environ))
    figures["spark"] = _engine("spark", lake, master, env)
    hashes = {figures[e].get("sha256") for e in ("store", "duckdb_lake", "spark")}
    figures["same_report"] = len(hashes) == 1 and None not in hashes
    for engine in ("store", "duckdb_lake", "spark"):
        seconds = figures[engine].get("report_s")
        if seconds:
            figures[engine]["s_per_million_rows_per_core"] = round(seconds * CORES / rows * 1e6, 3)
    store_s = figures["store"].get("report_s")
    for engine in ("duckdb_lake", "spark"):
        seconds = figures[engine].get("report_s")
        if store_s and seconds:
            figures[f"{engine}_ratio"] = round(seconds / store_s, 2)
    return figures


def run(*, quick: bool = False) -> dict[str, Any]:
    """``python -m bench lake``: both cases on the three engines."""
    from tests.spark_cluster import running_cluster

    cases = [("jobs", QUICK_JOBS if quick else FULL_JOBS),
             ("utilization", QUICK_GPUS if quick else FULL_GPUS)]  # fmt: skip
    results: dict[str, Any] = {"machine": machine(), "cores": CORES, "cases": []}
    with tempfile.TemporaryDirectory(prefix="bench-lake-") as tmp:
        work = Path(tmp)
        with running_cluster(work / "cluster", worker_memory=WORKER_MEMORY) as cluster:
            env = _spark_env(work)
            for case, size in cases:
                results["cases"].append(bench_case(case, size, cluster.master_url, env))
                print(json.dumps(results["cases"][-1], indent=2), flush=True)
    results["target_ratio"] = TARGET_RATIO
    return results


if __name__ == "__main__":
    quick = "--quick" in sys.argv
    figures = run(quick=quick)
    OUT.mkdir(exist_ok=True)
    (OUT / "lake.json").write_text(json.dumps(figures, indent=2) + "\n")
