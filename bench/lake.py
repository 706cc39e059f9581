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
``--jobs N``: the jobs case alone at N jobs (minutes at a few hundred thousand: before and after
a change to the ledger's plan); it writes no costs (they need two sizes of both cases).
"""

from __future__ import annotations

import argparse
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
from bench.runner import start_recording, write_figures

CORES = 2
# Two sizes per input at full size: the report's fixed part and its cost per row are the line
# through them (``fitted``); one at --quick, which writes no costs.
FULL_JOBS, QUICK_JOBS = (1_000_000, 10_000_000), (100_000,)
FULL_GPUS, QUICK_GPUS = (800, 8_000), (800,)
COSTS = Path(__file__).resolve().parents[1] / "src/gpuyield/data/calibration/lake-costs.toml"
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


def _descends(pid: int, ancestor: int, parents: dict[int, int]) -> bool:
    """Whether ``ancestor`` is among ``pid``'s parents, grandparents, ..."""
    seen = set()
    while pid in parents and pid not in seen:
        seen.add(pid)
        pid = parents[pid]
        if pid == ancestor:
            return True
    return False


class _TreeUsage:
    """Peak resident memory and CPU time of a process and its descendants, plus Spark executors
    (children of the worker, not of the driver), polled every 0.2 s from ``/proc``. CPU time,
    unlike wall time, does not grow when other work shares the cores."""

    def __init__(self, pid: int, executors: bool) -> None:
        self.pid, self.executors, self.peak_mb = pid, executors, 0.0
        self.cpu_s: dict[int, float] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)
        self._thread.start()

    def _processes(self) -> dict[int, str]:
        """Every process's ``stat`` line, by pid, of the tree (and the executors)."""
        stats: dict[int, str] = {}
        parents: dict[int, int] = {}
        executors = set()
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                stat = (entry / "stat").read_text()
                cmdline = (entry / "cmdline").read_bytes()
            except OSError:
                continue
            pid = int(entry.name)
            stats[pid] = stat
            parents[pid] = int(stat.rsplit(")", 1)[1].split()[1])
            if self.executors and b"CoarseGrainedExecutorBackend" in cmdline:
                executors.add(pid)
        # The bench's own cluster's executors only (its worker is this process's child): tests
        # and other sessions on a shared machine run clusters of their own.
        executors = {p for p in executors if _descends(p, os.getpid(), parents)}
        tree, frontier = {self.pid}, [self.pid]
        while frontier:
            parent = frontier.pop()
            children = [p for p, pp in parents.items() if pp == parent and p not in tree]
            tree.update(children)
            frontier += children
        return {p: stats[p] for p in tree | executors if p in stats}

    def _poll(self) -> None:
        tick = os.sysconf("SC_CLK_TCK")
        while not self._stop.wait(0.2):
            total = 0.0
            for pid, stat in self._processes().items():
                fields = stat.rsplit(")", 1)[1].split()
                self.cpu_s[pid] = max(
                    self.cpu_s.get(pid, 0.0), (int(fields[11]) + int(fields[12])) / tick
                )
                total += int(fields[21]) * os.sysconf("SC_PAGE_SIZE") / 2**20  # rss pages
            self.peak_mb = max(self.peak_mb, total)

    def stop(self) -> dict[str, float]:
        self._stop.set()
        self._thread.join()
        return {"peak_rss_mb": round(self.peak_mb, 1), "cpu_s": round(sum(self.cpu_s.values()), 1)}


def _engine(
    engine: str, source: Path, master: str | None, env: dict[str, str], reports: int
) -> dict[str, Any]:
    """``bench.lake_run`` in a process of its own: its figures, wall time, peak memory, CPU."""
    argv = [sys.executable, "-m", "bench.lake_run", engine, str(source), str(reports)]
    argv += [master] if master else []
    began = time.perf_counter()
    proc = subprocess.Popen(
        argv,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=Path(__file__).resolve().parents[1],
    )
    usage = _TreeUsage(proc.pid, executors=engine == "spark")
    out, err = proc.communicate()
    figures: dict[str, Any] = {"wall_s": round(time.perf_counter() - began, 2), **usage.stop()}
    if proc.returncode != 0:
        return {**figures, "returncode": proc.returncode, "stderr_tail": err[-3000:]}
    return {**figures, **json.loads(out.strip().splitlines()[-1])}


def _measured(engine: str, source: Path, master: str | None, env: dict[str, str]) -> dict[str, Any]:
    """One engine: opened only (its start-up's CPU time), then opened and one report; the
    report's CPU time is the difference."""
    opened = _engine(engine, source, master, env, 0)
    figures = _engine(engine, source, master, env, 1)
    if figures.get("report_s") and "cpu_s" in opened:
        figures["first_report_s"] = figures["report_s"][0]
        figures["open_cpu_s"] = opened["cpu_s"]
        figures["report_cpu_s"] = round(max(figures["cpu_s"] - opened["cpu_s"], 0.0), 1)
    return figures


def _spark_env(work: Path, extra_conf: dict[str, str] | None = None) -> dict[str, str]:
    """The driver's settings, as a user would give them: a spark-defaults.conf (``extra_conf``:
    more of them, ``--spark-conf``, to measure a setting against the defaults)."""
    conf = work / "conf"
    conf.mkdir(parents=True, exist_ok=True)
    extra = "".join(f"{key} {value}\n" for key, value in (extra_conf or {}).items())
    (conf / "spark-defaults.conf").write_text(
        f"spark.driver.memory {DRIVER_MEMORY}\nspark.executor.memory {EXECUTOR_MEMORY}\n"
        f"spark.executor.cores {CORES}\nspark.cores.max {CORES}\nspark.ui.enabled false\n"
        "spark.driver.host 127.0.0.1\nspark.driver.bindAddress 127.0.0.1\n" + extra
    )
    return {
        **os.environ,
        "SPARK_CONF_DIR": str(conf),
        "SPARK_LOCAL_IP": "127.0.0.1",
        "PYSPARK_PYTHON": sys.executable,
    }


ENGINES = ("store", "duckdb_lake", "spark")


def bench_case(case: str, size: int, master: str, env: dict[str, str]) -> dict[str, Any]:
    """One case at one size on the three engines; the reports must be one (same SHA-256)."""
    db, lake, rows, built = _store_and_lake(case, size)
    figures: dict[str, Any] = {"case": case, "size": size, "rows": rows, **built}
    figures["store"] = _measured("store", db, None, dict(os.environ))
    figures["duckdb_lake"] = _measured("duckdb", lake, None, dict(os.environ))
    figures["spark"] = _measured("spark", lake, master, env)
    hashes = {figures[e].get("sha256") for e in ENGINES}
    figures["same_report"] = len(hashes) == 1 and None not in hashes
    base = figures["store"]
    for engine in ENGINES:
        run = figures[engine]
        if "first_report_s" not in run:
            continue
        run["s_per_million_rows_per_core"] = round(run["first_report_s"] * CORES / rows * 1e6, 3)
        if engine != "store" and "first_report_s" in base:
            run["ratio_wall"] = round(run["first_report_s"] / base["first_report_s"], 2)
            run["ratio_cpu"] = round(run["report_cpu_s"] / max(base["report_cpu_s"], 0.1), 2)
    return figures


def fitted(small: dict[str, Any], large: dict[str, Any]) -> dict[str, dict[str, float]]:
    """Per engine, the line through two sizes: a fixed part (start-up included) and seconds per
    million rows on one core (the slope on ``CORES`` cores, times ``CORES``); peak memory per
    million rows at the larger size."""
    lines = {}
    for engine in ENGINES:
        a, b = small[engine], large[engine]
        slope = (b["first_report_s"] - a["first_report_s"]) / (large["rows"] - small["rows"])
        fixed = a["first_report_s"] - slope * small["rows"] + a["open_s"]
        lines[engine] = {
            "fixed_s": round(max(fixed, 0.0), 2),
            "s_per_million_per_core": round(slope * 1e6 * CORES, 3),
            "peak_mb_per_million": round(b["peak_rss_mb"] / large["rows"] * 1e6, 1),
        }
    return lines


def write_costs(results: dict[str, Any]) -> Path:
    """The fitted lines, for ``gpuyield lake size`` (written by a TOML library)."""
    import tomli_w

    by_case: dict[str, list[dict[str, Any]]] = {}
    for case in results["cases"]:
        by_case.setdefault(case["case"], []).append(case)
    data = {
        "source": {
            "command": "python -m bench lake",
            "measured_on": results["machine"]["when"],
            "machine": f"{results['machine']['cpus']} CPUs (shared, load "
            f"{results['machine']['load_avg_1m']}), Spark standalone: 1 worker of {CORES} cores",
        },
        "jobs": fitted(*sorted(by_case["jobs"], key=lambda c: c["rows"])),
        "samples": fitted(*sorted(by_case["utilization"], key=lambda c: c["rows"])),
    }
    header = "# Written by `python -m bench lake` (bench/lake.py); read by gpuyield.lake.sizing.\n"
    COSTS.write_text(header + tomli_w.dumps(data), encoding="utf-8")
    return COSTS


def run(
    *, quick: bool = False, jobs: int | None = None, spark_conf: dict[str, str] | None = None
) -> dict[str, Any]:
    """``python -m bench lake``: both cases on the three engines (``jobs``: the jobs case alone,
    at that many jobs; no costs written; ``spark_conf``: settings added to the driver's)."""
    from tests.spark_cluster import running_cluster

    if jobs is not None:
        cases = [("jobs", jobs)]
    else:
        cases = [("jobs", n) for n in (QUICK_JOBS if quick else FULL_JOBS)]
        cases += [("utilization", n) for n in (QUICK_GPUS if quick else FULL_GPUS)]
    results: dict[str, Any] = {"machine": machine(), "cores": CORES, "cases": []}
    results["spark_conf"] = dict(spark_conf or {})
    with tempfile.TemporaryDirectory(prefix="bench-lake-") as tmp:
        work = Path(tmp)
        with running_cluster(work / "cluster", worker_memory=WORKER_MEMORY) as cluster:
            env = _spark_env(work, spark_conf)
            for case, size in cases:
                results["cases"].append(bench_case(case, size, cluster.master_url, env))
                print(json.dumps(results["cases"][-1], indent=2), flush=True)
    results["target_ratio"] = TARGET_RATIO
    if not quick and jobs is None and not spark_conf:
        results["costs"] = str(write_costs(results))
    return results


def main(argv: list[str]) -> int:
    """``python -m bench lake [--quick | --jobs N]``; figures to ``bench/out/lake.json``."""
    parser = argparse.ArgumentParser(
        prog="python -m bench.lake",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="Figures go to bench/out/lake.json.",
    )
    size = parser.add_mutually_exclusive_group()
    size.add_argument("--quick", action="store_true", help="the small configuration (minutes)")
    size.add_argument("--jobs", type=int, metavar="N", help="only the jobs case, at N jobs")
    parser.add_argument(
        "--spark-conf",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a Spark setting added to the driver's spark-defaults.conf (repeatable; the fitted "
        "costs are then not written: they are the defaults')",
    )
    args = parser.parse_args(argv)
    spark_conf = dict(_setting(item) for item in args.spark_conf)
    started = start_recording(" ".join(["python -m bench.lake", *argv]))
    figures = run(quick=args.quick, jobs=args.jobs, spark_conf=spark_conf)
    write_figures("lake", figures, started)
    return 0


def _setting(item: str) -> tuple[str, str]:
    key, sep, value = item.partition("=")
    if not sep or not key.strip():
        raise SystemExit(f"--spark-conf takes KEY=VALUE, not {item!r}")
    return key.strip(), value.strip()


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
