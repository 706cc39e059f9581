"""Ledger benchmark: ingest + ledger + report of a 100k-GPU cluster's sacct vs DuckDB's bare read.

For each size (100k jobs with ``--quick``; 1M and 10M otherwise) it generates (or reuses, from
``bench/out/data/``) a format-faithful data set with ``bench.gen_slurm``, then times, each in its
own subprocess so that wall time and peak RSS are that command's alone:

1. DuckDB merely reading ``sacct.psv``: ``count(*)`` over ``read_csv(..., all_varchar=true)``,
   the largest value of every field, the same read materialised (``CREATE TABLE t AS SELECT *
   ...``, in memory), and the same table created in a DuckDB file (what loading the file into a
   store costs DuckDB itself, before any typing or checking); and, not a read but a floor, the
   twelve fields a ledger needs, typed the cheapest way, in a DuckDB file (``floor_store_sql``);
2. ``gpuyield ingest slurm --db DB --sacct ... --events ... --nodes ... --manifest ...
   --until ...``;
3. ``gpuyield report --db DB --json``.

The figure of merit is (ingest + report) / bare read, wall times of whole subprocesses (both pay a
Python start-up); targets (issue 2): at most 3x, at most 4 GB peak RSS, on 2 cores. Issue 31's
figures set the ingest alone against ``into_file``: at most 1.5x its wall time, and a peak RSS at
most 1 GB above the peak DuckDB's own load reached (``ingest_to_into_file``,
``ingest_rss_over_into_file_mb``; the table's ``file RSS``, ``ing RSS`` and ``ing/file``), and
the same ratio of CPU seconds (``ingest_cpu_to_into_file``, ``cpu/file``), which moves less than
wall time when other work shares the machine.
Run: ``python -m bench ledger [--quick]`` or ``python -m bench.ledger --jobs 1000000``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import pstats
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb

from bench.gen_cluster import slurm_time
from bench.gen_slurm import Generated, GenParams, cached
from bench.runner import start_recording, write_figures

OUT = Path(__file__).parent / "out"
QUICK_SIZES = (100_000,)
FULL_SIZES = (1_000_000, 10_000_000)
TARGET_RATIO = 3.0
TARGET_RSS_MB = 4096.0
# Issue 31: the ingest alone against DuckDB storing the same file as text (``into_file``): at most
# 1.5x its wall time, and a peak RSS at most 1 GB above DuckDB's own in that load.
TARGET_INGEST_TO_FILE = 1.5
TARGET_INGEST_RSS_OVER_FILE_MB = 1024.0
# A hung command must not hang `make bench`.
TIMEOUT_S = 3600.0
# The bench machine is shared (24 GB, other people's tests): a command past this is killed and
# reported as such, rather than left to push the machine into the OOM killer.
RSS_CAP_MB = 12_288.0

READ_OPTIONS = "delim='|', header=true, all_varchar=true, quote='', escape=''"
# Runs in a fresh interpreter; prints the query's own time, so start-up can be told apart. Given a
# DuckDB file (argv[2]), it runs there, and closing the file (its checkpoint) is timed too.
_TIMED_QUERY = (
    "import sys, time, duckdb\n"
    "into = sys.argv[2] if len(sys.argv) > 2 else None\n"
    "con = duckdb.connect(into or ':memory:')\n"
    "con.execute('SET enable_progress_bar = false')\n"
    "t0 = time.perf_counter()\n"
    "con.execute(sys.argv[1]).fetchall()\n"
    "if into:\n"
    "    con.close()\n"
    "print(time.perf_counter() - t0)\n"
)


@dataclass(frozen=True, kw_only=True, slots=True)
class Measured:
    """One subprocess: its wall time, peak resident memory and exit status."""

    wall_s: float
    peak_rss_mb: float
    returncode: int
    stdout: str
    stderr_tail: str
    #: Why the bench killed it ("timeout", "rss cap"), or "" when it exited by itself.
    killed: str = ""
    #: CPU seconds (user + system, every thread) the command used: on a shared machine, where
    #: wall times move with the other work, a steadier measure of what the command costs.
    cpu_s: float = 0.0

    def figures(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "wall_s": round(self.wall_s, 3),
            "cpu_s": round(self.cpu_s, 3),
            "peak_rss_mb": self.peak_rss_mb,
        }
        if self.killed:
            out["killed"] = self.killed
        if self.returncode:
            out["returncode"] = self.returncode
            out["stderr_tail"] = self.stderr_tail
        return out


def measure(
    argv: list[str], *, timeout_s: float = TIMEOUT_S, rss_cap_mb: float = RSS_CAP_MB
) -> Measured:
    """Run ``argv``; wall time from spawn to exit, peak RSS polled from ``/proc/<pid>/status``.

    Peak RSS is the child's ``VmHWM`` (its high-water mark since exec), read every few ms until it
    exits. Not ``ru_maxrss``: Linux carries the parent's high-water mark into a forked child's, so
    after generating 10M rows every child "peaked" at the generator's 3 GB (``RUSAGE_CHILDREN`` is
    worse still: the largest child so far). Growth in the last poll interval is missed.
    """
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        began = time.perf_counter()
        proc = subprocess.Popen(argv, stdout=out, stderr=err, text=True)
        deadline, killed, peak_mb, polls = began + timeout_s, "", 0.0, 0
        while True:
            rss_mb, hwm_mb = _memory_mb(proc.pid)
            peak_mb = max(peak_mb, hwm_mb)
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            if not killed and time.perf_counter() > deadline:
                killed = "timeout"
            elif not killed and rss_mb > rss_cap_mb:
                killed = f"rss cap {rss_cap_mb:.0f} MB"
            if killed:
                os.kill(proc.pid, signal.SIGKILL)
            polls += 1
            time.sleep(0.002 if polls < 200 else 0.02)  # short commands: poll fast at first
        wall_s = time.perf_counter() - began
        proc.returncode = os.waitstatus_to_exitcode(status)  # reaped by wait4, not by Popen
        out.seek(0)
        err.seek(0)
        return Measured(
            wall_s=wall_s,
            cpu_s=usage.ru_utime + usage.ru_stime,
            peak_rss_mb=round(peak_mb, 1),
            returncode=proc.returncode,
            stdout=out.read(),
            stderr_tail=err.read()[-2000:],
            killed=killed,
        )


def _memory_mb(pid: int) -> tuple[float, float]:
    """Current and peak resident memory of ``pid`` (VmRSS, VmHWM); zeros once it has exited."""
    try:
        with open(f"/proc/{pid}/status") as f:
            fields = dict(line.split(":", 1) for line in f if line.startswith(("VmRSS", "VmHWM")))
    except (FileNotFoundError, ProcessLookupError):
        return 0.0, 0.0
    # A zombie has no memory lines left.
    kib = [int(fields.get(k, "0 kB").split()[0]) for k in ("VmRSS", "VmHWM")]
    return kib[0] / 1024, kib[1] / 1024


def bare_reads(sacct: Path, db: Path) -> dict[str, Any]:
    """DuckDB merely reading the file, four ways, and the floor under storing it.

    ``count``: ``count(*)``, which only finds the line ends; ``all_fields``: the largest value of
    every field, which splits every field but keeps none; ``materialise``: the whole file into an
    in-memory table of text columns; ``into_file``: the same table in a fresh DuckDB file ``db``;
    ``floor_store`` (when the file has the fields): ``floor_store_sql`` into a fresh ``db``.
    """
    path = str(sacct).replace("'", "''")
    with sacct.open(encoding="utf-8") as f:
        names = f.readline().rstrip("\r\n").split("|")
    every_field = ", ".join(f'max("{n}")' for n in names)
    queries = {
        "count": f"SELECT count(*) FROM read_csv('{path}', {READ_OPTIONS})",
        "all_fields": f"SELECT {every_field} FROM read_csv('{path}', {READ_OPTIONS})",
        "materialise": f"CREATE TABLE t AS SELECT * FROM read_csv('{path}', {READ_OPTIONS})",
    }
    runs = {name: [sys.executable, "-c", _TIMED_QUERY, query] for name, query in queries.items()}
    runs["into_file"] = [sys.executable, "-c", _TIMED_QUERY, queries["materialise"], str(db)]
    floor = floor_store_sql(path, names)
    if floor is not None:
        runs["floor_store"] = [sys.executable, "-c", _TIMED_QUERY, floor, str(db)]
    figures: dict[str, Any] = {}
    for name, argv in runs.items():
        _fresh(db)
        run = measure(argv)
        if run.returncode:
            raise RuntimeError(f"bare read {name} failed: {run.stderr_tail}")
        figures[name] = {**run.figures(), "query_s": round(float(run.stdout.split()[-1]), 3)}
    _fresh(db)
    return figures


# What any ledger of the file must keep: the key (id, submit time), state, times, GPUs, nodes, the
# run tag (comment, name) and the --by groups (user, account, partition).
FLOOR_FIELDS = ("JobIDRaw", "Submit", "Start", "End", "State", "AllocTRES", "NodeList", "User",
                 "Account", "Partition", "Comment", "JobName")  # fmt: skip


def floor_store_sql(path: str, names: list[str]) -> str | None:
    """DuckDB's cheapest typing of just the ledger's fields into a table, or None when the file
    lacks one: no check, no line numbers, no provenance. Stored in a DuckDB file (``into_file``'s
    way), it is the floor under any ingest that keeps what the ledger reads."""
    if not set(FLOOR_FIELDS) <= set(names):
        return None
    time = lambda name: f'TRY_CAST("{name}" AS TIMESTAMP) AS {name.lower()}_at'  # noqa: E731
    return f"""CREATE TABLE jobs AS SELECT "JobIDRaw", {time("Submit")}, {time("Start")},
        {time("End")}, split_part("State", ' ', 1) AS state,
        TRY_CAST(split_part(split_part("AllocTRES", 'gres/gpu=', 2), ',', 1) AS INTEGER) AS gpus,
        "NodeList", "User", "Account", "Partition", "Comment", "JobName"
        FROM read_csv('{path}', {READ_OPTIONS})"""


def cli_flags(command: list[str]) -> set[str] | None:
    """The ``--flags`` a gpuyield command accepts, or None when it does not run (not built yet)."""
    run = measure([*command, "--help"], timeout_s=60)
    if run.returncode:
        return None
    return {word.strip(",") for word in run.stdout.split() if word.startswith("--")}


def gpuyield_argv() -> list[str]:
    """The ``gpuyield`` console script of this interpreter's environment."""
    return [str(Path(sys.executable).with_name("gpuyield"))]


def ledger_argv(data: Generated, params: GenParams, db: Path) -> list[list[str]] | None:
    """The ingest and report command lines, or None when the CLI does not run yet."""
    gy = gpuyield_argv()
    ingest_flags = cli_flags([*gy, "ingest", "slurm"])
    report_flags = cli_flags([*gy, "report"])
    if ingest_flags is None or report_flags is None:
        return None
    argv = [*gy, "ingest", "slurm", "--db", str(db), "--sacct", str(data.sacct_path)]
    argv += ["--events", str(data.events_path), "--nodes", str(data.nodes_path)]
    if "--manifest" in ingest_flags:
        argv += ["--manifest", str(data.manifest_path)]
    if "--until" in ingest_flags:
        argv += ["--until", slurm_time(params.window_end_s)]
    if "--now" in ingest_flags:  # generated data may run past this machine's clock
        argv += ["--now", slurm_time(params.window_end_s)]
    return [argv, [*gy, "report", "--db", str(db), "--json"]]


def _fresh(db: Path) -> None:
    for stale in (db, db.with_name(db.name + ".wal")):
        stale.unlink(missing_ok=True)


def ledger_runs(data: Generated, params: GenParams, db: Path) -> dict[str, Any]:
    """``gpuyield ingest slurm`` into a fresh ``db``, then ``gpuyield report --json``."""
    commands = ledger_argv(data, params, db)
    if commands is None:
        return {"error": "gpuyield ingest slurm / report not runnable yet (--help failed)"}
    _fresh(db)
    ingest = measure(commands[0])
    figures: dict[str, Any] = {"ingest": ingest.figures(), "ingest_argv": commands[0][1:]}
    if ingest.returncode:
        return figures
    report = measure(commands[1])
    figures["report"] = report.figures()
    figures["db_mb"] = round(db.stat().st_size / 1e6, 1)
    if not report.returncode:
        figures["report_json"] = json.loads(report.stdout)
    return figures


def profile_runs(data: Generated, params: GenParams, db: Path) -> dict[str, list[str]]:
    """Ingest and report again under cProfile: gpuyield's functions by cumulative time.

    A separate pass, because profiling slows the run; it says which phase (parse, store, ledger,
    report) the time goes to, whatever the code's structure is by then.
    """
    commands = ledger_argv(data, params, db)
    if commands is None:
        return {}
    _fresh(db)
    phases: dict[str, list[str]] = {}
    for name, argv in zip(("ingest", "report"), commands, strict=True):
        stats_path = db.with_suffix(f".{name}.prof")
        run = measure([sys.executable, "-m", "cProfile", "-o", str(stats_path), "-m", "gpuyield",
                       *argv[1:]])  # fmt: skip
        if run.returncode:
            phases[name] = [f"failed: {run.stderr_tail.strip()[-200:]}"]
            break
        phases[name] = top_functions(stats_path)
        stats_path.unlink()
    return phases


def top_functions(stats_path: Path, count: int = 15) -> list[str]:
    """``seconds  module:function`` for gpuyield's own functions, by cumulative time."""
    stats = pstats.Stats(str(stats_path)).stats  # type: ignore[attr-defined]
    rows = [
        (cum_s, f"{Path(file).stem}:{line}:{func}")
        for (file, line, func), (_, _, _, cum_s, _) in stats.items()
        if "/gpuyield/" in file and "/cli/" not in file and func != "<module>"
    ]
    return [f"{cum_s:8.2f}  {where}" for cum_s, where in sorted(rows, reverse=True)[:count]]


def bench_size(params: GenParams, out_dir: Path = OUT, *, profile: bool = False) -> dict[str, Any]:
    """Everything measured for one data set (cached under ``out_dir/data``)."""
    data = cached(params, out_dir / "data")
    size_mb = data.sacct_path.stat().st_size / 1e6
    _warm_page_cache(data.sacct_path)
    figures: dict[str, Any] = {
        "load_avg_1m_before": round(os.getloadavg()[0], 2),
        "jobs": data.num_rows,
        "node_events": data.num_events,
        "gpus": params.cluster.num_gpus,
        "window_days": params.window_s / 86_400,
        "sacct_mb": round(size_mb, 1),
        "generate_s": round(data.seconds, 2) if data.seconds else "cached",
    }
    db = out_dir / f"ledger-{params.cache_key()}.duckdb"
    figures["bare_read"] = bare_reads(data.sacct_path, db)
    figures |= ledger_runs(data, params, db)
    if profile:
        figures["profile"] = profile_runs(data, params, db)
    db.unlink(missing_ok=True)  # a 10M-job store is large; its size is in the figures
    if "report" in figures and not figures["report"].get("returncode"):
        figures |= derived(figures, size_mb)
    return figures


def derived(figures: dict[str, Any], size_mb: float) -> dict[str, Any]:
    """Throughput, the ratio to the bare reads, and whether the targets are met."""
    total_s = figures["ingest"]["wall_s"] + figures["report"]["wall_s"]
    peak_mb = max(figures["ingest"]["peak_rss_mb"], figures["report"]["peak_rss_mb"])
    bare = figures["bare_read"]
    ratio = total_s / bare["count"]["wall_s"]
    return {
        "ledger_wall_s": round(total_s, 3),
        "jobs_per_s": round(figures["jobs"] / total_s),
        "mb_per_s": round(size_mb / total_s, 1),
        "ratio_to_count": round(ratio, 2),
        "ratio_to_materialise": round(total_s / bare["materialise"]["wall_s"], 2),
        **(
            {"ratio_to_into_file": round(total_s / bare["into_file"]["wall_s"], 2)}
            if "into_file" in bare
            else {}
        ),
        **_ingest_to_into_file(figures["ingest"], bare.get("into_file")),
        **(
            {"ratio_to_all_fields": round(total_s / bare["all_fields"]["wall_s"], 2)}
            if "all_fields" in bare
            else {}
        ),
        **(
            {
                "ratio_to_floor_store": round(total_s / bare["floor_store"]["wall_s"], 2),
                # Above the target ratio, no ingest that stores the ledger's fields can meet it.
                "floor_store_to_count": round(
                    bare["floor_store"]["wall_s"] / bare["count"]["wall_s"], 2
                ),
            }
            if "floor_store" in bare
            else {}
        ),
        "peak_rss_mb": peak_mb,
        "meets_targets": ratio <= TARGET_RATIO and peak_mb <= TARGET_RSS_MB,
    }


def _ingest_to_into_file(
    ingest: dict[str, Any], into_file: dict[str, Any] | None
) -> dict[str, Any]:
    """Issue 31's figures: the ingest alone over DuckDB's load of the same file into a DuckDB file
    (wall time), its peak RSS above that load's, and whether both targets are met."""
    if into_file is None:
        return {}
    out: dict[str, Any] = {"ingest_to_into_file": round(ingest["wall_s"] / into_file["wall_s"], 2)}
    if into_file.get("cpu_s") and "cpu_s" in ingest:
        out["ingest_cpu_to_into_file"] = round(ingest["cpu_s"] / into_file["cpu_s"], 2)
    if "peak_rss_mb" in into_file:
        over_mb = round(ingest["peak_rss_mb"] - into_file["peak_rss_mb"], 1)
        out["ingest_rss_over_into_file_mb"] = over_mb
        out["meets_ingest_targets"] = (
            out["ingest_to_into_file"] <= TARGET_INGEST_TO_FILE
            and over_mb <= TARGET_INGEST_RSS_OVER_FILE_MB
        )
    return out


def _warm_page_cache(path: Path) -> None:
    """Read the file once so the first timed command does not pay for the disk alone."""
    with path.open("rb") as f:
        while f.read(1 << 24):
            pass


def machine() -> dict[str, Any]:
    return {
        "cpus": os.cpu_count(),
        # Other work on the machine slows every figure; the 1-minute load average says how much.
        "load_avg_1m": round(os.getloadavg()[0], 2),
        "python": platform.python_version(),
        "duckdb": duckdb.__version__,
        "platform": platform.platform(),
        "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }


def print_table(sizes: list[dict[str, Any]]) -> None:
    head = (
        f"{'jobs':>10} {'MB':>7} {'count s':>8} {'fields s':>8} {'CTAS s':>8} {'file s':>8} "
        f"{'floor s':>8} "
        f"{'ingest s':>9} "
        f"{'report s':>9} "
        f"{'ratio':>6} {'jobs/s':>9} {'MB/s':>6} {'RSS MB':>8} "
        # Issue 31: the ingest alone against DuckDB's load into a file, time and peak RSS.
        f"{'file RSS':>8} {'ing RSS':>8} {'ing/file':>8} {'file cpu':>8} {'ing cpu':>8} {'cpu/file':>8}"
    )
    print(head)
    for f in sizes:
        bare = f["bare_read"]
        if "ledger_wall_s" not in f:
            print(f"{f['jobs']:>10} {f['sacct_mb']:>7} {bare['count']['wall_s']:>8} "
                  f"{bare['all_fields']['wall_s']:>8} {bare['materialise']['wall_s']:>8} "
                  f"{bare['into_file']['wall_s']:>8} {_floor(bare):>8}  ledger: {_failure(f)}")  # fmt: skip
            continue
        print(
            f"{f['jobs']:>10} {f['sacct_mb']:>7} {bare['count']['wall_s']:>8} "
            f"{bare['all_fields']['wall_s']:>8} {bare['materialise']['wall_s']:>8} "
            f"{bare['into_file']['wall_s']:>8} {_floor(bare):>8} {f['ingest']['wall_s']:>9} "
            f"{f['report']['wall_s']:>9} {f['ratio_to_count']:>6} {f['jobs_per_s']:>9} "
            f"{f['mb_per_s']:>6} {f['peak_rss_mb']:>8} "
            f"{bare['into_file'].get('peak_rss_mb', '-'):>8} {f['ingest']['peak_rss_mb']:>8} "
            f"{f.get('ingest_to_into_file', '-'):>8} {bare['into_file'].get('cpu_s', '-'):>8} "
            f"{f['ingest'].get('cpu_s', '-'):>8} {f.get('ingest_cpu_to_into_file', '-'):>8}"
        )


def _floor(bare: dict[str, Any]) -> str:
    return str(bare["floor_store"]["wall_s"]) if "floor_store" in bare else "-"


def _failure(figures: dict[str, Any]) -> str:
    if "error" in figures:
        return str(figures["error"])
    failed = "report" if "report" in figures else "ingest"
    if figures[failed].get("killed"):
        return f"{failed} killed ({figures[failed]['killed']}) after {figures[failed]['wall_s']} s"
    tail = figures[failed].get("stderr_tail", "").strip().splitlines()
    return f"{failed} failed: {tail[-1] if tail else '?'}"


def run(
    quick: bool, sizes: tuple[int, ...] | None = None, *, profile: bool = False
) -> dict[str, Any]:
    """The benchmark contract of bench/__main__.py: measure, print a table, return the figures."""
    chosen = sizes or (QUICK_SIZES if quick else FULL_SIZES)
    results = [bench_size(GenParams(num_jobs=n), profile=profile) for n in chosen]
    print_table(results)
    for figures in results:
        for phase, lines in figures.get("profile", {}).items():
            print(f"-- {figures['jobs']} jobs, {phase}: gpuyield functions by cumulative seconds")
            print("\n".join(lines))
    return {
        "machine": machine(),
        "targets": {
            "ratio_to_count": TARGET_RATIO,
            "peak_rss_mb": TARGET_RSS_MB,
            "ingest_to_into_file": TARGET_INGEST_TO_FILE,
            "ingest_rss_over_into_file_mb": TARGET_INGEST_RSS_OVER_FILE_MB,
        },
        "sizes": results,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.ledger", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--jobs", type=int, action="append", help="a size to run (repeatable)")
    parser.add_argument("--quick", action="store_true", help="100k jobs only")
    parser.add_argument("--profile", action="store_true", help="also rerun both under cProfile")
    args = parser.parse_args(argv)
    started = start_recording(
        " ".join(["python -m bench.ledger", *(sys.argv[1:] if argv is None else argv)])
    )
    figures = run(args.quick, tuple(args.jobs) if args.jobs else None, profile=args.profile)
    write_figures("ledger", figures, started)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
