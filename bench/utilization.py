"""Utilization benchmark: a cluster-day of per-GPU samples ingested and reported, beside DuckDB's read.

Issue 31's target: one cluster-day of 60 s samples at 8k, 20k and 100k GPUs, ``ingest utilization``
plus ``report`` within 3x DuckDB's bare read of the same JSON at every size (flat, not growing
with the cluster), and at most 4 GB peak RSS, on 2 cores. The data set
(``bench/out/data/util-<gpus>-<seed>-<nodes per file>/``) is a cluster of 8-GPU nodes running
back-to-back whole-node jobs for a day (30% of them idle for their first 10 minutes to 2 hours),
its Slurm files, and the DCGM exporter's ``DCGM_FI_DEV_GPU_UTIL`` as saved ``query_range``
responses, one file per 125 nodes (Prometheus caps the samples of one response), with
``hpc_job`` labels on even nodes only, so both attributions (by label, by whole node) run.

Each step runs in its own subprocess (wall time, peak RSS: ``bench.ledger.measure``), and each
size ``--repeat`` times, interleaved (bare read, ingest, report; again), figures are medians:

1. DuckDB reading the same samples: ``count(*)`` and ``sum`` of every point of the files (the
   baseline);
2. ``gpuyield ingest slurm`` (reported, not part of the target);
3. ``gpuyield ingest utilization --prom-json FILE...``: read, check, store as series, attribute;
4. ``gpuyield report --json``: the ledger over the attributed samples.

``--breakdown`` also times each SQL statement of one ingest in-process (where the time goes).

Run: ``python -m bench utilization [--quick]``, or ``python -m bench.utilization --gpus 8000 20000
100000 --docs docs/benchmarks.md`` (writes the figures into the page, between its markers);
``--from-json bench/out/utilization.json --docs docs/benchmarks.md`` rewrites the page from a run.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from typing import Any

import duckdb
import numpy as np

from bench.ledger import OUT, gpuyield_argv, machine, measure
from bench.runner import start_recording, write_figures
from bench.utilization_docs import breakdown

T0_S = 1_767_225_600  # 2026-01-01T00:00:00Z
DAY_S = 86_400
STEP_S = 60
GPUS_PER_NODE = 8
NODES_PER_FILE = 125
TARGET_RATIO = 3.0
TARGET_RSS_MB = 4096.0
QUICK_GPUS = 8_000
FULL_SIZES = (8_000, 20_000, 100_000)

_SACCT_HEADER = (
    "JobID|JobIDRaw|JobName|User|Account|Partition|State|Submit|Start|End|ElapsedRaw|"
    "AllocTRES|NodeList|NNodes|Comment"
)
_EVENT_HEADER = (
    "Cluster|Cluster Nodes|NodeName|Event|EventRaw|State|StateRaw|TimeStart|TimeEnd|"
    "Duration|Reason|User|TRES"
)


def _iso(epoch_s: int) -> str:
    return str(np.datetime64(int(epoch_s), "s"))


def _jobs(num_nodes: int, seed: int) -> dict[str, np.ndarray]:
    """Back-to-back whole-node jobs of 1 to 6 hours on every node, a minute apart."""
    rng = np.random.default_rng(seed)
    node, start, end, stall = [], [], [], []
    for n in range(num_nodes):
        t = T0_S + int(rng.integers(0, 3600))
        while t < T0_S + DAY_S:
            length = int(rng.integers(3600, 6 * 3600))
            idle = int(rng.integers(600, 7200)) if rng.random() < 0.3 else 0
            node.append(n)
            start.append(t)
            end.append(t + length)
            stall.append(min(idle, length))
            t += length + 60
    return {
        "node": np.array(node),
        "start": np.array(start),
        "end": np.array(end),
        "stall": np.array(stall),
        "job": np.arange(1, len(node) + 1),
    }


def _slurm_files(out: Path, num_nodes: int, jobs: dict[str, np.ndarray]) -> None:
    until = T0_S + DAY_S
    width = len(str(num_nodes))
    lines = [_SACCT_HEADER]
    for j, n, s, e in zip(jobs["job"], jobs["node"], jobs["start"], jobs["end"], strict=True):
        running = e > until
        lines.append(
            f"{j}|{j}|train{j}|u{n % 97}|a{n % 13}|gpu|{'RUNNING' if running else 'COMPLETED'}|"
            f"{_iso(s)}|{_iso(s)}|{'Unknown' if running else _iso(e)}|"
            f"{0 if running else e - s}|cpu=8,gres/gpu=8,node=1|g{n:0{width}d}|1|"
        )
    (out / "sacct.psv").write_text("\n".join(lines) + "\n")
    hosts = f"g[{0:0{width}d}-{num_nodes - 1:0{width}d}]"
    register = (
        f"lab|{hosts}||Cluster|1||0|{_iso(T0_S - 3600)}|Unknown||Cluster Registered TRES||"
        f"cpu={8 * num_nodes},gres/gpu={GPUS_PER_NODE * num_nodes}"
    )
    (out / "events.psv").write_text(f"{_EVENT_HEADER}\n{register}\n")
    (out / "nodes.txt").write_text(
        "".join(
            f"NodeName=g{n:0{width}d} Arch=x86_64 Gres=gpu:8 State=IDLE Partitions=gpu "
            f"CfgTRES=cpu=8,mem=4000M,gres/gpu=8\n"
            for n in range(num_nodes)
        )
    )


def _sample_files(
    out: Path, num_nodes: int, jobs: dict[str, np.ndarray], nodes_per_file: int
) -> list[Path]:
    """One query_range response per ``nodes_per_file`` nodes, written by DuckDB (Python would
    take minutes)."""
    con = duckdb.connect()
    con.execute("SET enable_progress_bar = false")
    con.register("jobs", {k: v for k, v in jobs.items()})
    width = len(str(num_nodes))
    until = T0_S + DAY_S
    paths = []
    for first in range(0, num_nodes, nodes_per_file):
        path = out / f"dcgm-{first:0{width}d}.json"
        paths.append(path)
        if path.exists():
            continue
        con.execute(
            f"""COPY (
            WITH pts AS (
                SELECT node, g.gpu, job, t,
                       CASE WHEN t - {STEP_S} < start + stall THEN 0
                            ELSE 40 + (hash(node, g.gpu, t) % 61) END AS v
                FROM jobs, range(0, {GPUS_PER_NODE}) g(gpu),
                     LATERAL (SELECT unnest(range(start - start % {STEP_S} + {STEP_S},
                                                  least("end", {until}) + {STEP_S}, {STEP_S})) AS t)
                WHERE node >= {first} AND node < {first + nodes_per_file}
            ), series AS (
                SELECT node, gpu, job, list(json_array(t, v::VARCHAR) ORDER BY t) AS vals
                FROM pts GROUP BY ALL
            )
            SELECT 'success' AS status,
                   {{'resultType': 'matrix', 'result': list({{
                       'metric': CASE WHEN node % 2 = 0
                           THEN MAP {{'__name__': 'DCGM_FI_DEV_GPU_UTIL',
                                      'Hostname': printf('g%0{width}d', node),
                                      'gpu': gpu::VARCHAR, 'hpc_job': job::VARCHAR}}
                           ELSE MAP {{'__name__': 'DCGM_FI_DEV_GPU_UTIL',
                                      'Hostname': printf('g%0{width}d', node),
                                      'gpu': gpu::VARCHAR}} END,
                       'values': vals}})}} AS data
            FROM series) TO '{path}' (FORMAT json)"""
        )
    con.close()
    return paths


def generate(
    num_gpus: int, out_dir: Path, seed: int = 15, nodes_per_file: int = NODES_PER_FILE
) -> tuple[Path, list[Path]]:
    """The data set (cached): its directory and the sample files."""
    num_nodes = num_gpus // GPUS_PER_NODE
    out = out_dir / "data" / f"util-{num_gpus}-{seed}-{nodes_per_file}"
    out.mkdir(parents=True, exist_ok=True)
    jobs = _jobs(num_nodes, seed)
    if not (out / "sacct.psv").exists():
        _slurm_files(out, num_nodes, jobs)
    return out, _sample_files(out, num_nodes, jobs, nodes_per_file)


def _bare_read(files: list[Path]) -> dict[str, Any]:
    listing = json.dumps([str(f) for f in files])
    size = max(f.stat().st_size for f in files) + 1
    script = (
        "import json, sys, time, duckdb\n"
        "con = duckdb.connect()\n"
        "con.execute('SET enable_progress_bar = false')\n"
        "began = time.perf_counter()\n"
        f"rows = con.execute('''SELECT count(*), sum(TRY_CAST(v->>1 AS DOUBLE)) FROM (\n"
        '  SELECT unnest(s."values") AS v FROM (SELECT unnest(data.result) AS s FROM read_json(\n'
        f"  {listing}, maximum_object_size={size}, columns={{'status': 'VARCHAR', 'data': "
        '\'STRUCT(resultType VARCHAR, result STRUCT(metric MAP(VARCHAR, VARCHAR), "values" '
        "JSON[])[])'})))''').fetchall()\n"
        "print(json.dumps({'rows': rows[0][0], 'query_s': time.perf_counter() - began}))\n"
    )
    run = measure([sys.executable, "-c", script])
    return {**run.figures(), **json.loads(run.stdout.strip().splitlines()[-1])}


def _fresh_store(data: Path) -> Path:
    db = data / "bench.duckdb"
    for stale in (db, db.with_name(db.name + ".wal")):
        stale.unlink(missing_ok=True)
    return db


def _once(data: Path, files: list[Path]) -> dict[str, Any]:
    """One round: the bare read, then gpuyield's ingests and report on a fresh store."""
    bare = _bare_read(files)
    db = _fresh_store(data)
    gy = gpuyield_argv()
    slurm = measure([*gy, "ingest", "slurm", "--dir", str(data), "--db", str(db), "--json"])
    util = measure(
        [*gy, "ingest", "utilization", "--db", str(db), "--json"]
        + [arg for f in files for arg in ("--prom-json", str(f))]
    )
    report = measure([*gy, "report", "--db", str(db), "--json"])
    for step in (slurm, util, report):
        if step.returncode != 0:
            raise RuntimeError(f"a step failed: {step.stderr_tail}")
    activity = json.loads(report.stdout).get("gpu_activity", {})
    return {
        "bare_read": bare,
        "ingest_slurm": slurm.figures(),
        "ingest_utilization": util.figures(),
        "report": report.figures(),
        "gpu_activity_samples": activity.get("samples"),
        "idle_allocated_gpu_seconds": activity.get("idle_allocated_gpu_seconds"),
    }


def bench_size(num_gpus: int, out_dir: Path = OUT, *, repeat: int = 1) -> dict[str, Any]:
    """Everything measured for one cluster size: ``repeat`` interleaved rounds, medians."""
    data, files = generate(num_gpus, out_dir)
    rounds = [_once(data, files) for _ in range(repeat)]
    wall = {
        step: statistics.median(r[step]["wall_s"] for r in rounds)
        for step in ("bare_read", "ingest_slurm", "ingest_utilization", "report")
    }
    cpu = {
        step: statistics.median(r[step]["cpu_s"] for r in rounds)
        for step in ("bare_read", "ingest_utilization", "report")
    }
    rss = max(
        max(r["ingest_utilization"]["peak_rss_mb"], r["report"]["peak_rss_mb"]) for r in rounds
    )
    joined_s = wall["ingest_utilization"] + wall["report"]
    figures: dict[str, Any] = {
        "gpus": num_gpus,
        "samples": int(rounds[0]["bare_read"]["rows"]),
        "sample_files": len(files),
        "sample_mb": round(sum(f.stat().st_size for f in files) / 1e6, 1),
        "repeat": repeat,
        "median_wall_s": {k: round(v, 2) for k, v in wall.items()},
        "ingest_and_report_s": round(joined_s, 1),
        "ratio_to_bare_read": round(joined_s / wall["bare_read"], 2),
        "ingest_ratio": round(wall["ingest_utilization"] / wall["bare_read"], 2),
        "report_ratio": round(wall["report"] / wall["bare_read"], 2),
        # CPU time (user + system) of each step's process: steadier than wall time when other
        # work shares the cores.
        "median_cpu_s": {k: round(v, 2) for k, v in cpu.items()},
        "cpu_ratio_to_bare_read": round(
            (cpu["ingest_utilization"] + cpu["report"]) / cpu["bare_read"], 2
        ),
        "peak_rss_mb": rss,
        "rounds": rounds,
    }
    figures["samples_per_s"] = round(figures["samples"] / joined_s) if joined_s else None
    figures["meets_target"] = figures["ratio_to_bare_read"] <= TARGET_RATIO and rss <= TARGET_RSS_MB
    return figures


def run(*, quick: bool = False) -> dict[str, Any]:
    """``python -m bench utilization``: the quick size, or the three sizes of the target."""
    sizes = [QUICK_GPUS] if quick else list(FULL_SIZES)
    results = {"machine": machine(), "sizes": [bench_size(g) for g in sizes]}
    print(json.dumps([_brief(s) for s in results["sizes"]], indent=2))
    return results


def _brief(size: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in size.items() if k != "rounds"}


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gpus", type=int, nargs="+", default=[QUICK_GPUS])
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--breakdown", action="store_true", help="time each SQL statement too")
    parser.add_argument("--docs", type=Path, help="write the figures into this page's section")
    parser.add_argument("--from-json", type=Path, help="take the figures of an earlier run")
    args = parser.parse_args(argv)
    if args.from_json is not None:
        figures = json.loads(args.from_json.read_text())
    else:
        started = start_recording(" ".join(["python -m bench.utilization", *argv]))
        figures = {"machine": machine(), "sizes": []}
        for gpus in args.gpus:
            size = bench_size(gpus, repeat=args.repeat)
            if args.breakdown:
                size["breakdown"] = breakdown(gpus)
            figures["sizes"].append(size)
            print(json.dumps(_brief(size), indent=2, default=str), flush=True)
        write_figures("utilization", figures, started)
    if args.docs is not None:
        from bench.docs import write_docs

        write_docs(args.docs, {"utilization": figures})
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
