"""Collect benchmark: one day's ``gpuyield collect`` into a large store vs that day alone.

From a generated data set (``bench.gen_slurm``: 30 days per million jobs, so about 33k jobs a day at
any size) it cuts two captures, as Slurm would have printed them:

* the history, ``sacct`` at the start of the last day (``D0``): jobs submitted before it, those
  still running then printed RUNNING without an end; ingested once into the base store
  (``--since`` the registration, ``--until D0``);
* the day, ``sacct -S D0-1h -E D1``: every job that ran in it, finished where it finished.

Then, each in its own subprocess (wall time and peak RSS its own, as in ``bench.ledger``):

1. ``gpuyield report --json`` on the base store;
2. ``gpuyield collect --until D1`` into a copy of it, the Slurm commands being scripts that print
   the day's captures (a recorded Slurm): jobs new and updated come from its JSON;
3. ``gpuyield ingest slurm`` of the same day alone into an empty store (the baseline);
4. ``gpuyield report --json`` on the store after the collect.

Each timed command runs three times (each collect into a fresh copy of the base store, each day
alone into a fresh empty store); the fastest run counts, every wall time is kept.

Figures of merit (issue 13): collect at most 5 s and at most 2x the day alone (O(new rows), not
O(store)); report time after the collect within 10% of before.
Run: ``python -m bench collect [--quick]`` or ``python -m bench.collect --jobs 1000000``.
"""

from __future__ import annotations

import argparse
import json
import shlex
import shutil
import sys
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench.gen_slurm import Generated, GenParams, cached
from bench.ledger import OUT, measure
from bench.runner import start_recording, write_figures
from gpuyield.hostlist import expand_hostlist

QUICK_SIZES = (100_000,)
FULL_SIZES = (10_000_000,)
DAY_S = 86_400
OVERLAP_S = 3_600
TARGET_COLLECT_S = 5.0
TARGET_RATIO = 2.0
TARGET_REPORT_GROWTH = 0.10
REPEATS = 3
_TIME = "%Y-%m-%dT%H:%M:%S"


def _epoch(text: str) -> int | None:
    if text in ("Unknown", "None", ""):
        return None
    return int(datetime.strptime(text, _TIME).replace(tzinfo=UTC).timestamp())


def _text(epoch_s: int) -> str:
    return datetime.fromtimestamp(epoch_s, UTC).strftime(_TIME)


def split_captures(data: Generated, out: Path, day_start_s: int) -> dict[str, int]:
    """Write ``history.psv``, ``history-events.psv`` and ``day.psv`` into ``out``; their counts."""
    counts = {"history_rows": 0, "running_at_day_start": 0, "day_rows": 0}
    with (
        data.sacct_path.open(encoding="utf-8") as source,
        (out / "history.psv").open("w", encoding="utf-8") as history,
        (out / "day.psv").open("w", encoding="utf-8") as day,
    ):
        header = source.readline()
        history.write(header)
        day.write(header)
        names = header.rstrip("\n").split("|")
        at = {name: names.index(name) for name in ("State", "Submit", "Start", "End")}
        for line in source:
            fields = line.rstrip("\n").split("|")
            submit, start = _epoch(fields[at["Submit"]]), _epoch(fields[at["Start"]])
            end = _epoch(fields[at["End"]])
            if end is None or end >= day_start_s - OVERLAP_S:
                day.write(line)
                counts["day_rows"] += 1
            if submit is None or submit >= day_start_s:
                continue
            if start is not None and start < day_start_s and (end is None or end >= day_start_s):
                fields[at["State"]], fields[at["End"]] = "RUNNING", "Unknown"
                counts["running_at_day_start"] += 1
            elif start is None or start >= day_start_s:
                fields[at["State"]], fields[at["Start"]], fields[at["End"]] = (
                    "PENDING", "Unknown", "Unknown",
                )  # fmt: skip
            history.write("|".join(fields) + "\n")
            counts["history_rows"] += 1
    lines = data.events_path.read_text().splitlines()
    starts = lines[0].split("|").index("TimeStart")
    kept = [lines[0]] + [
        line for line in lines[1:] if (_epoch(line.split("|")[starts]) or 0) < day_start_s
    ]
    (out / "history-events.psv").write_text("\n".join(kept) + "\n")
    return counts


# One record of `scontrol -d -o show job` (Slurm 22.05.8), field for field as the recording in
# tests/ingest/fixtures/jobs-detail/scontrol-d-o-show-job.txt prints a running job; the job's own
# values go in the braces. One ``Nodes=`` group: every node of a job holds the same GPUs here.
_JOB_RECORD = (
    "JobId={job} JobName={name} UserId={user}({uid}) GroupId={user}({uid}) MCS_label=N/A "
    "Priority=4294901759 Nice=0 Account={account} QOS={qos} JobState=RUNNING Reason=None "
    "Dependency=(null) Requeue=1 Restarts=0 BatchFlag=1 Reboot=0 ExitCode=0:0 "
    "DerivedExitCode=0:0 RunTime={run_time} TimeLimit=UNLIMITED TimeMin=N/A SubmitTime={submit} "
    "EligibleTime={submit} AccrueTime={submit} StartTime={start} EndTime=Unknown Deadline=N/A "
    "PreemptEligibleTime={start} PreemptTime=None SuspendTime=None SecsPreSuspend=0 "
    "LastSchedEval={start} Scheduler=Main Partition={partition} AllocNode:Sid=login1:4242 "
    "ReqNodeList=(null) ExcNodeList=(null) NodeList={nodes} BatchHost={batch_host} "
    "NumNodes={num_nodes} NumCPUs={num_nodes} NumTasks={num_nodes} CPUs/Task=1 "
    "ReqB:S:C:T=0:0:*:* TRES={tres} Socks/Node=* NtasksPerN:B:S:C=0:0:*:* CoreSpec=* "
    "JOB_GRES=gpu:{gpus}   Nodes={nodes} CPU_IDs=0 Mem=256 GRES=gpu:{per_node}(IDX:{indices}) "
    "MinCPUsNode=1 MinMemoryCPU=256M MinTmpDiskNode=0 Features=(null) DelayBoot=00:00:00 "
    "OverSubscribe=OK Contiguous=0 Licenses=(null) Network=(null) Command=(null) "
    "WorkDir=/home/{user} StdErr=/home/{user}/slurm-{job}.out StdIn=/dev/null "
    "StdOut=/home/{user}/slurm-{job}.out Power= TresPerNode=gres:gpu:{per_node} "
)


def jobs_detail_text(day_psv: Path, capture_s: int) -> str:
    """``scontrol -d -o show job`` at ``capture_s``: the day's RUNNING jobs with the GPU indices
    they hold. The generator never oversubscribes a node, so a node's running jobs take its GPUs
    in turn (job order) and their indices never overlap."""
    lines = day_psv.read_text(encoding="utf-8").splitlines()
    names = lines[0].split("|")
    taken: dict[str, int] = {}
    records = []
    for line in lines[1:]:
        row = dict(zip(names, line.split("|"), strict=True))
        if row["State"] != "RUNNING":
            continue
        nodes = expand_hostlist(row["NodeList"])
        gpus = int(row["AllocTRES"].split("gres/gpu=")[1].split(",")[0])
        per_node = gpus // len(nodes)
        first = max(taken.get(node, 0) for node in nodes)
        for node in nodes:
            taken[node] = first + per_node
        records.append(_job_record(row, nodes, first, per_node, capture_s))
    # What scontrol prints when no job is in the system (src/scontrol/info_job.c).
    return "\n".join(records) + "\n" if records else "No jobs in the system\n"


def _job_record(
    row: dict[str, str], nodes: list[str], first: int, per_node: int, capture_s: int
) -> str:
    """One running job's record; it holds GPUs ``first`` to ``first + per_node - 1`` of each node."""
    start = _epoch(row["Start"]) or capture_s
    return _JOB_RECORD.format(
        job=row["JobIDRaw"],
        name=row["JobName"],
        user=row["User"],
        uid=2000,
        account=row["Account"],
        qos=row["QOS"],
        partition=row["Partition"],
        run_time=_run_time(capture_s - start),
        submit=row["Submit"],
        start=row["Start"],
        nodes=row["NodeList"],
        batch_host=nodes[0],
        num_nodes=len(nodes),
        tres=row["AllocTRES"],
        gpus=per_node * len(nodes),
        per_node=per_node,
        indices=f"{first}-{first + per_node - 1}" if per_node > 1 else str(first),
    )


def _run_time(seconds: int) -> str:
    days, rest = divmod(max(seconds, 0), DAY_S)
    clock = f"{rest // 3600:02d}:{rest // 60 % 60:02d}:{rest % 60:02d}"
    return f"{days}-{clock}" if days else clock


def recorded_slurm(out: Path, data: Generated, capture_s: int) -> Path:
    """sacct, sacctmgr and scontrol printing the day's captures (``scontrol -d -o show job``:
    the jobs running at ``capture_s``; ``scontrol -o show nodes``: the nodes)."""
    bin_dir = out / "bin"
    bin_dir.mkdir(exist_ok=True)
    (out / "jobs-detail.txt").write_text(jobs_detail_text(out / "day.psv", capture_s))
    header = "Cluster|Name|TimeStart|TimeEnd|Flags|NodeName"
    scripts = {
        "sacct": f"cat {shlex.quote(str(out / 'day.psv'))}",
        "sacctmgr": f'case "$*" in *event*) cat {shlex.quote(str(data.events_path))};; '
        f"*) echo '{header}';; esac",
        "scontrol": f'case "$*" in *job*) cat {shlex.quote(str(out / "jobs-detail.txt"))};; '
        f"*) cat {shlex.quote(str(data.out_dir / 'nodes.txt'))};; esac",
    }
    for name, body in scripts.items():
        (bin_dir / name).write_text(f"#!/bin/sh\n{body}\n")
        (bin_dir / name).chmod(0o755)
    return bin_dir


def _gpuyield(*args: str | Path) -> list[str]:
    return [sys.executable, "-m", "gpuyield", *map(str, args)]


def _checked(name: str, argv: list[str]) -> dict[str, Any]:
    run = measure(argv)
    if run.returncode:
        raise RuntimeError(f"{name} failed ({run.returncode}): {run.stderr_tail}")
    return {**run.figures(), "stdout": run.stdout}


def _best_of(name: str, argv: list[str], fresh: Callable[[], None]) -> dict[str, Any]:
    """The fastest of REPEATS runs, each on a fresh store (``fresh``): the bench machine is shared,
    and one slow run says more about the neighbours than about the command. Every wall time kept."""
    runs = []
    for _ in range(REPEATS):
        fresh()
        runs.append(_checked(name, argv))
    best = min(runs, key=lambda r: r["wall_s"])
    return {**best, "all_wall_s": [r["wall_s"] for r in runs]}


def bench_size(params: GenParams, root: Path = OUT) -> dict[str, Any]:
    """Every figure for one data set (generated under ``root/data``, worked on in
    ``root/collect``)."""
    num_jobs = params.num_jobs
    data = cached(params, root / "data")
    out = root / "collect" / params.cache_key()
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    cluster = params.cluster.name
    day_end_s = params.window_end_s
    day_start_s = day_end_s - DAY_S
    counts = split_captures(data, out, day_start_s)
    events = data.events_path.read_text().splitlines()
    registered = events[1].split("|")[events[0].split("|").index("TimeStart")]
    base = out / "base.duckdb"
    ingest = _checked("base ingest", _gpuyield(
        "ingest", "slurm", "--db", base, "--quiet", "--sacct", out / "history.psv",
        "--events", out / "history-events.psv", "--nodes", data.out_dir / "nodes.txt",
        "--manifest", data.out_dir / "manifest.toml", "--cluster", cluster,
        "--since", registered, "--until", _text(day_start_s)))  # fmt: skip
    report_before = _best_of(
        "report before", _gpuyield("report", "--db", base, "--json"), lambda: None
    )
    collected, alone_db = out / "collected.duckdb", out / "day-alone.duckdb"
    collect = _best_of("collect", _gpuyield(
        "collect", "--db", collected, "--slurm-bin", recorded_slurm(out, data, day_end_s),
        "--cluster", cluster, "--until", _text(day_end_s), "--json"),
        lambda: shutil.copyfile(base, collected))  # fmt: skip
    alone = _best_of("day alone", _gpuyield(
        "ingest", "slurm", "--db", alone_db, "--quiet",
        "--sacct", out / "day.psv", "--events", data.events_path,
        "--nodes", data.out_dir / "nodes.txt", "--cluster", cluster,
        "--since", _text(day_start_s - OVERLAP_S), "--until", _text(day_end_s)),
        lambda: alone_db.unlink(missing_ok=True))  # fmt: skip
    report_after = _best_of(
        "report after", _gpuyield("report", "--db", collected, "--json"), lambda: None
    )
    outcome = json.loads(collect.pop("stdout"))
    for run in (ingest, report_before, alone, report_after):
        run.pop("stdout")
    ratio = collect["wall_s"] / alone["wall_s"]
    growth = report_after["wall_s"] / report_before["wall_s"] - 1
    return {
        "jobs": num_jobs,
        **counts,
        "jobs_new": outcome["jobs_new"],
        "jobs_updated": outcome["jobs_updated"],
        "jobs_unchanged": outcome["jobs_unchanged"],
        "base_ingest": ingest,
        "report_before": report_before,
        "collect": collect,
        "day_alone": alone,
        "report_after": report_after,
        "collect_over_day_alone": round(ratio, 3),
        "report_growth": round(growth, 3),
        "targets": {
            "collect_s": TARGET_COLLECT_S,
            "collect_over_day_alone": TARGET_RATIO,
            "report_growth": TARGET_REPORT_GROWTH,
        },
        "targets_met": {
            "collect_at_most_5_s": collect["wall_s"] <= TARGET_COLLECT_S,
            "collect_at_most_2x_day_alone": ratio <= TARGET_RATIO,
            "report_growth_at_most_10_percent": growth <= TARGET_REPORT_GROWTH,
        },
    }


def run(*, quick: bool = False, sizes: tuple[int, ...] | None = None) -> dict[str, Any]:
    """``python -m bench collect``: every size, printed as it goes."""
    figures: dict[str, Any] = {}
    for num_jobs in sizes or (QUICK_SIZES if quick else FULL_SIZES):
        result = bench_size(GenParams(num_jobs=num_jobs))
        figures[str(num_jobs)] = result
        print(
            f"{num_jobs:>11,} jobs: day {result['day_rows']:,} rows "
            f"({result['jobs_new']:,} new, {result['jobs_updated']:,} updated); "
            f"collect {result['collect']['wall_s']:.2f} s, day alone "
            f"{result['day_alone']['wall_s']:.2f} s ({result['collect_over_day_alone']:.2f}x); "
            f"report {result['report_before']['wall_s']:.2f} -> "
            f"{result['report_after']['wall_s']:.2f} s ({result['report_growth']:+.1%})"
        )
    return figures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.collect", description=__doc__.split("\n")[0]
    )
    parser.add_argument("--jobs", type=int, action="append", help="data set size (repeatable)")
    parser.add_argument("--quick", action="store_true", help="100k jobs")
    args = parser.parse_args(argv)
    started = start_recording(
        " ".join(["python -m bench.collect", *(sys.argv[1:] if argv is None else argv)])
    )
    figures = run(quick=args.quick, sizes=tuple(args.jobs) if args.jobs else None)
    write_figures("collect", figures, started)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
