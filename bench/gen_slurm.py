"""A format-faithful Slurm accounting generator for a large GPU cluster (default 100k GPUs).

Writes what the ledger ingests, in the exact shapes real Slurm 22.05 prints (compare with
/work/shared/data/slurm-local/, captured from a real cluster):

* ``sacct.psv``: ``sacct -a -P -X -D --format=<SACCT_FIELDS>`` with its header;
* ``events.psv``: ``sacctmgr -P show event All_Time format=...`` (one "Cluster Registered TRES" row,
  node DOWN / DOWN* / DRAIN events);
* ``nodes.txt``: ``scontrol -o show nodes``;
* ``manifest.toml``: a release manifest naming the lineage runs of the biggest jobs.

Placement: nodes are cut into *lanes* (a GPU slice of one node, or a contiguous node range), one
lane per job size; the jobs of a lane run back to back, so no node is ever oversubscribed. The job
mix follows Meta's RSC-1 end states (Kokolis et al., arXiv 2410.21680: 60% COMPLETED, 24% FAILED,
10% PREEMPTED, 2% REQUEUED, ...), node events follow its 6.5 failures per 1,000 node-days (see
/work/shared/reference/facts.md, section 3).

Usage: ``python -m bench.gen_slurm --jobs 1000000 --out DIR``. Numbers are built with numpy and the
text with DuckDB's ``COPY ... TO`` (string expressions), so 10M rows take well under a minute.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass, field
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa

from bench.gen_cluster import (
    LINEAGE_RUNS,
    S_CANCELLED,
    S_FAILED,
    S_NODE_FAIL,
    S_PREEMPTED,
    S_REQUEUED,
    S_RUNNING,
    S_TIMEOUT,
    STATES,
    build_events,
    event_lines,
    manifest_text,
    node_lines,
)

# Bump when the output changes, so cached files under bench/out/ are regenerated.
GENERATOR_VERSION = 2

SACCT_FORMAT = (
    "JobID,JobIDRaw,JobName,User,Account,Partition,QOS,State,ExitCode,Submit,Eligible,Start,End,"
    "ElapsedRaw,TimelimitRaw,AllocTRES,NodeList,NNodes,Comment,Reason,Cluster"
)

STATE_SHARES = (0.57, 0.24, 0.03, 0.10, 0.02, 0.02, 0.01, 0.01, 0.0, 0.0)
# ExitCode as sacct prints it per state (OUT_OF_MEMORY is 0:125 in Slurm; FAILED gets 1..3:0).
EXIT_CODES = ("0:0", "", "0:0", "0:0", "0:0", "0:0", "0:0", "0:125", "0:0", "1:0")

MIN_JOBS_PER_LANE = 3
JOB_NAMES = ("train", "eval", "sweep", "finetune", "bench", "debug", "data-prep", "infer")
REASONS = ("None", "None", "None", "Priority", "Resources")


@dataclass(frozen=True, kw_only=True, slots=True)
class ClusterSpec:
    """The cluster's hardware; defaults are a 100k-GPU H100 cluster (12,500 nodes x 8 GPUs)."""

    name: str = "cl100k"
    num_nodes: int = 12_500
    gpus_per_node: int = 8
    cpus_per_node: int = 112
    #: RealMemory in MB, as scontrol prints it.
    mem_mb_per_node: int = 2_000_000

    def __post_init__(self) -> None:
        for name in ("num_nodes", "gpus_per_node", "cpus_per_node", "mem_mb_per_node"):
            if getattr(self, name) <= 0:
                raise ValueError(f"cluster.{name} must be > 0")
        if self.num_nodes > 99_999:
            raise ValueError("cluster.num_nodes must be <= 99999 (node names have 5 digits)")

    @property
    def num_gpus(self) -> int:
        return self.num_nodes * self.gpus_per_node


@dataclass(frozen=True, kw_only=True, slots=True)
class JobClass:
    """One job size and the share of the cluster's nodes whose lanes run it."""

    gpus_per_job: int
    node_share: float
    #: Relative mean job length; only ratios matter (lanes are stretched to fill the window).
    mean_duration_h: float


# Many small jobs, a few huge ones; shares sum to 1 (the 8-GPU class takes any rounding remainder).
JOB_CLASSES = (
    JobClass(gpus_per_job=1, node_share=0.04, mean_duration_h=1.0),
    JobClass(gpus_per_job=2, node_share=0.04, mean_duration_h=1.5),
    JobClass(gpus_per_job=4, node_share=0.06, mean_duration_h=2.0),
    JobClass(gpus_per_job=8, node_share=0.12, mean_duration_h=3.0),
    JobClass(gpus_per_job=16, node_share=0.06, mean_duration_h=4.0),
    JobClass(gpus_per_job=32, node_share=0.06, mean_duration_h=5.0),
    JobClass(gpus_per_job=64, node_share=0.06, mean_duration_h=6.0),
    JobClass(gpus_per_job=128, node_share=0.06, mean_duration_h=8.0),
    JobClass(gpus_per_job=512, node_share=0.06, mean_duration_h=10.0),
    JobClass(gpus_per_job=1024, node_share=0.10, mean_duration_h=12.0),
    JobClass(gpus_per_job=4096, node_share=0.10, mean_duration_h=16.0),
    JobClass(gpus_per_job=16384, node_share=0.24, mean_duration_h=24.0),
)


@dataclass(frozen=True, kw_only=True, slots=True)
class GenParams:
    """What to generate; the same parameters always give the same bytes."""

    num_jobs: int
    #: Window start, epoch seconds UTC (default 2026-10-01T00:00:00).
    window_start_s: int = 1_790_812_800
    #: Window length; 0 means 30 days per million jobs (at least one day).
    window_days: float = 0.0
    seed: int = 0
    cluster: ClusterSpec = field(default_factory=ClusterSpec)

    def __post_init__(self) -> None:
        if self.num_jobs <= 0:
            raise ValueError("gen.num_jobs must be > 0")
        if self.window_days < 0:
            raise ValueError("gen.window_days must be >= 0")

    @property
    def window_s(self) -> int:
        days = self.window_days or max(1.0, 30.0 * self.num_jobs / 1_000_000)
        return int(days * 86_400)

    @property
    def window_end_s(self) -> int:
        return self.window_start_s + self.window_s

    def cache_key(self) -> str:
        c = self.cluster
        return (
            f"slurm-v{GENERATOR_VERSION}-j{self.num_jobs}-n{c.num_nodes}x{c.gpus_per_node}"
            f"-w{self.window_start_s}+{self.window_s}-s{self.seed}"
        )


@dataclass(frozen=True, kw_only=True, slots=True)
class Generated:
    """One generated data set: its directory (files named as ``OUTPUT_FILES``) and counts."""

    out_dir: Path
    num_rows: int
    num_events: int
    #: Time spent generating; 0.0 when the data set came from the cache.
    seconds: float

    @property
    def sacct_path(self) -> Path:
        return self.out_dir / "sacct.psv"

    @property
    def events_path(self) -> Path:
        return self.out_dir / "events.psv"

    @property
    def nodes_path(self) -> Path:
        return self.out_dir / "nodes.txt"

    @property
    def manifest_path(self) -> Path:
        return self.out_dir / "manifest.toml"


@dataclass(frozen=True, kw_only=True, slots=True)
class Lanes:
    """Disjoint slices of the cluster; each runs its jobs back to back."""

    first_node: np.ndarray  # int32, 0-based
    num_nodes: np.ndarray  # int32
    gpus: np.ndarray  # int32, GPUs of each job on this lane (total over its nodes)
    class_index: np.ndarray  # int16, index into JOB_CLASSES


def build_lanes(cluster: ClusterSpec) -> Lanes:
    """Cut the nodes into lanes, class by class, from node 0 upward."""
    gpn = cluster.gpus_per_node
    nodes_by_class = [int(c.node_share * cluster.num_nodes) for c in JOB_CLASSES]
    nodes_by_class[3] += cluster.num_nodes - sum(nodes_by_class)  # remainder to the 8-GPU class
    first, parts = 0, []
    for index, (cls, pool) in enumerate(zip(JOB_CLASSES, nodes_by_class, strict=True)):
        nodes_per_lane = max(1, cls.gpus_per_job // gpn)
        lanes_per_node = max(1, gpn // cls.gpus_per_job)
        count = (pool // nodes_per_lane) * lanes_per_node
        lane_first = first + (np.arange(count) // lanes_per_node) * nodes_per_lane
        gpus = min(cls.gpus_per_job, gpn) * nodes_per_lane
        parts.append((lane_first, nodes_per_lane, gpus, index))
        first += pool
    return Lanes(
        first_node=np.concatenate([p[0] for p in parts]).astype(np.int32),
        num_nodes=np.concatenate([np.full(len(p[0]), p[1]) for p in parts]).astype(np.int32),
        gpus=np.concatenate([np.full(len(p[0]), p[2]) for p in parts]).astype(np.int32),
        class_index=np.concatenate([np.full(len(p[0]), p[3]) for p in parts]).astype(np.int16),
    )


def assign_jobs_to_lanes(lanes: Lanes, num_jobs: int, rng: np.random.Generator) -> np.ndarray:
    """Lane of each job, sorted; a class gets jobs in proportion to lanes / mean job length.

    Every lane first gets MIN_JOBS_PER_LANE jobs (when there are enough jobs), so that the few huge
    lanes, which carry the release lineages, always have finished jobs.
    """
    mean_h = np.array([c.mean_duration_h for c in JOB_CLASSES])
    lanes_per_class = np.bincount(lanes.class_index, minlength=len(JOB_CLASSES))
    num_lanes = len(lanes.class_index)
    floor_per_lane = MIN_JOBS_PER_LANE if num_jobs >= 2 * MIN_JOBS_PER_LANE * num_lanes else 0
    weight = lanes_per_class / mean_h
    exact = (num_jobs - floor_per_lane * num_lanes) * weight / weight.sum()
    per_class = np.floor(exact).astype(np.int64)
    leftover = num_jobs - floor_per_lane * num_lanes - int(per_class.sum())
    per_class[np.argsort(per_class - exact)[:leftover]] += 1  # largest remainders
    lane_offset = np.concatenate([[0], np.cumsum(lanes_per_class)])
    picks = [np.repeat(np.arange(num_lanes), floor_per_lane)]
    picks += [
        lane_offset[c] + rng.integers(lanes_per_class[c], size=n) for c, n in enumerate(per_class)
    ]
    return np.sort(np.concatenate(picks)).astype(np.int32)


def group_starts(sorted_keys: np.ndarray) -> np.ndarray:
    """Boolean mask: True where a run of equal keys begins."""
    first = np.ones(len(sorted_keys), dtype=bool)
    first[1:] = sorted_keys[1:] != sorted_keys[:-1]
    return first


def lay_out_times(
    lane: np.ndarray, params: GenParams, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Start, end (epoch s) and a "still running" mask, jobs back to back within each lane.

    Each lane's jobs are stretched to fill [window start, window end - tail]; half the lanes have no
    tail, so their last job is still running at the window end. Most lanes' first job started before
    the window (sacct -S returns it because it ran into the window).
    """
    n = len(lane)
    duration = rng.lognormal(0.0, 1.0, n)
    gap = rng.exponential(0.15, n)
    first = group_starts(lane)
    last = np.roll(first, -1)
    busy = np.cumsum(duration + gap)
    base = np.maximum.accumulate(np.where(first, busy - duration - gap, 0.0))
    lane_total = np.repeat((busy - base)[last], np.diff(np.append(np.flatnonzero(first), n)))
    num_lanes = int(first.sum())
    tail = np.where(rng.random(num_lanes) < 0.5, 0.0, rng.uniform(0.0, 0.05, num_lanes))
    span = params.window_s * (1.0 - np.repeat(tail, np.bincount(np.cumsum(first) - 1)))
    scale = span / lane_total
    end_f = params.window_start_s + (busy - base) * scale
    start_f = end_f - duration * scale
    start, end = np.floor(start_f).astype(np.int64), np.floor(end_f).astype(np.int64)
    running = last & (end >= params.window_end_s - 1)
    end[running] = params.window_end_s
    early = first & (rng.random(n) < 0.7)
    back = np.minimum(end - start, 86_400)[early]  # at most a day before the window
    start[early] -= np.floor(rng.random(int(early.sum())) * back).astype(np.int64)
    return start, end, running


def draw_states(
    lane: np.ndarray, elapsed: np.ndarray, running: np.ndarray, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """Final state code of each row, and which rows are requeued (their successor is the rerun)."""
    n = len(lane)
    state = rng.choice(len(STATES), size=n, p=np.array(STATE_SHARES)).astype(np.int8)
    state[(state == S_TIMEOUT) & (elapsed < 120)] = S_FAILED  # a time limit is whole minutes
    state[running] = S_RUNNING
    last = np.roll(group_starts(lane), -1)
    coin = rng.random(n) < 0.5
    requeued = ~last & (
        (state == S_REQUEUED) | ((state == S_PREEMPTED) & coin) | ((state == S_NODE_FAIL) & coin)
    )
    return state, requeued


@dataclass(frozen=True, kw_only=True, slots=True)
class JobRows:
    """Numeric columns of sacct.psv, one row per allocation, in output order."""

    columns: dict[str, np.ndarray]

    @property
    def num_rows(self) -> int:
        return len(self.columns["raw_id"])


def build_rows(params: GenParams, rng: np.random.Generator) -> JobRows:
    """All numbers of sacct.psv: placement, times, states, ids, arrays and requeue chains."""
    lanes = build_lanes(params.cluster)
    lane = assign_jobs_to_lanes(lanes, params.num_jobs, rng)
    start, end, running = lay_out_times(lane, params, rng)
    state, requeued = draw_states(lane, end - start, running, rng)
    n = len(lane)
    # A rerun (the row after a requeued one) is the same job: it takes the chain head's identity.
    rerun = np.zeros(n, dtype=bool)
    rerun[1:] = requeued[:-1]
    head = np.maximum.accumulate(np.where(rerun, 0, np.arange(n)))
    wait = np.floor(rng.exponential(600.0, n)).astype(np.int64)
    submit = np.where(rerun, np.roll(end, 1), start - wait)
    order = np.lexsort((lane, submit))
    raw_id = np.zeros(n, dtype=np.int64)
    heads_in_order = order[~rerun[order]]
    raw_id[heads_in_order] = 1_000_001 + np.arange(len(heads_in_order))
    raw_id = raw_id[head]
    class_index = lanes.class_index[lane]
    array_id, array_task = make_arrays(raw_id, rerun, head, class_index, order)
    cls_small = class_index <= 3
    columns = {
        "raw_id": raw_id,
        "array_id": array_id,
        "array_task": array_task,
        "name": rng.integers(len(JOB_NAMES), size=n, dtype=np.int8)[head],
        "user": rng.integers(1, 401, size=n, dtype=np.int16)[head],
        "run": run_codes(lane, lanes, raw_id, rng)[head],
        "partition": np.where(cls_small & (rng.random(n) < 0.2), 1, 0).astype(np.int8)[head],
        "qos": rng.choice(3, size=n, p=[0.8, 0.15, 0.05]).astype(np.int8)[head],
        "state": state,
        "canceller": rng.integers(1000, 1400, size=n, dtype=np.int16),
        "fail_code": rng.integers(1, 4, size=n, dtype=np.int8),
        "submit": submit,
        "start": start,
        "end": np.where(running, -1, end),
        "elapsed": end - start,
        "timelimit_min": time_limits(state, end - start, rng),
        "gpus": lanes.gpus[lane],
        "num_nodes": lanes.num_nodes[lane],
        "first_node": lanes.first_node[lane],
        "reason": np.where(rerun, -1, rng.integers(len(REASONS), size=n)).astype(np.int8),
    }
    return JobRows(columns={k: v[order] for k, v in columns.items()})


def make_arrays(
    raw_id: np.ndarray,
    rerun: np.ndarray,
    head: np.ndarray,
    class_index: np.ndarray,
    order: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """Array job id and task index (-1: not an array): groups of 8 one-GPU jobs, 10% of groups.

    As in real Slurm (see the slurm-local README), task raw ids are not consecutive and the last
    task keeps the array's own id.
    """
    n = len(raw_id)
    candidates = order[(class_index[order] == 0) & ~rerun[order]]
    num_groups = len(candidates) // 8
    array_id = np.full(n, -1, dtype=np.int64)
    array_task = np.full(n, -1, dtype=np.int32)
    chosen = np.flatnonzero(np.arange(num_groups) % 10 == 3)
    for task in range(8):
        members = candidates[chosen * 8 + task]
        array_id[members] = raw_id[candidates[chosen * 8]]
        array_task[members] = 7 if task == 0 else task - 1
    return array_id[head], array_task[head]


def run_codes(
    lane: np.ndarray, lanes: Lanes, raw_id: np.ndarray, rng: np.random.Generator
) -> np.ndarray:
    """Run of each row as a code: 0..3 name LINEAGE_RUNS, -1 no comment, larger an experiment run.

    The biggest lanes carry the lineage runs (the manifest releases three, marks one diverged).
    """
    class_index = lanes.class_index[lane]
    lane_rank = lane - np.searchsorted(lanes.class_index, class_index)
    code = raw_id // 5 + 100  # experiments: about five jobs per run
    code = np.where(class_index == len(JOB_CLASSES) - 1, 0, code)
    code = np.where((class_index == len(JOB_CLASSES) - 2) & (lane_rank == 0), 1, code)
    code = np.where((class_index == len(JOB_CLASSES) - 3) & (lane_rank % 5 == 0), 2, code)
    code = np.where((class_index == len(JOB_CLASSES) - 3) & (lane_rank % 5 == 1), 3, code)
    return np.where(rng.random(len(lane)) < 0.05, -1, code)


def time_limits(state: np.ndarray, elapsed: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """TimelimitRaw in minutes (-1 prints UNLIMITED); a TIMEOUT ran just past its limit."""
    n = len(state)
    limit = np.ceil(elapsed * rng.uniform(1.1, 4.0, n) / 60).astype(np.int64) + 1
    limit = np.where(rng.random(n) < 0.2, -1, limit)
    return np.where(state == S_TIMEOUT, np.maximum(1, (elapsed - 30) // 60), limit)


def sacct_sql(params: GenParams) -> str:
    """The SELECT that turns the numeric columns into sacct -P text, one column per field."""
    c = params.cluster
    cpus_per_gpu = c.cpus_per_node // c.gpus_per_node
    mem_g_per_gpu = c.mem_mb_per_node // 1024 // c.gpus_per_node
    names = ", ".join(f"'{name}'" for name in JOB_NAMES)
    reasons = ", ".join(f"'{r}'" for r in REASONS)
    states = ", ".join(f"'{s}'" for s in STATES)
    exits = ", ".join(f"'{e}'" for e in EXIT_CODES)
    lineage = ", ".join(f"'{r}'" for r in LINEAGE_RUNS)

    def ts(col: str) -> str:
        return f"strftime(make_timestamp({col} * 1000000), '%Y-%m-%dT%H:%M:%S')"

    def host(col: str) -> str:
        return f"lpad(({col} + 1)::VARCHAR, 5, '0')"

    mem = f"gpus * {mem_g_per_gpu}"
    return f"""
    SELECT
      CASE WHEN array_id >= 0 THEN array_id::VARCHAR || '_' || array_task::VARCHAR
           ELSE raw_id::VARCHAR END AS "JobID",
      raw_id::VARCHAR AS "JobIDRaw",
      ([{names}])[name + 1] AS "JobName",
      'u' || lpad(user::VARCHAR, 4, '0') AS "User",
      'team' || lpad((user % 40)::VARCHAR, 2, '0') AS "Account",
      (['gpu', 'scavenger'])[partition + 1] AS "Partition",
      (['normal', 'high', 'low'])[qos + 1] AS "QOS",
      CASE WHEN state = {S_CANCELLED} THEN 'CANCELLED by ' || (canceller::INT)::VARCHAR
           ELSE ([{states}])[state + 1] END AS "State",
      CASE WHEN state = {S_FAILED} THEN fail_code::VARCHAR || ':0'
           ELSE ([{exits}])[state + 1] END AS "ExitCode",
      {ts("submit")} AS "Submit",
      {ts("submit")} AS "Eligible",
      {ts("start")} AS "Start",
      CASE WHEN "end" < 0 THEN 'Unknown' ELSE {ts('"end"')} END AS "End",
      elapsed::VARCHAR AS "ElapsedRaw",
      CASE WHEN timelimit_min < 0 THEN 'UNLIMITED' ELSE timelimit_min::VARCHAR END
        AS "TimelimitRaw",
      'billing=' || (gpus * {cpus_per_gpu})::VARCHAR || ',cpu=' || (gpus * {cpus_per_gpu})::VARCHAR
        || ',gres/gpu=' || gpus::VARCHAR || ',mem='
        || CASE WHEN ({mem}) % 1024 = 0 THEN (({mem}) // 1024)::VARCHAR || 'T'
                ELSE ({mem})::VARCHAR || 'G' END
        || ',node=' || num_nodes::VARCHAR AS "AllocTRES",
      CASE WHEN num_nodes = 1 THEN 'n' || {host("first_node")}
           ELSE 'n[' || {host("first_node")} || '-' || {host("first_node + num_nodes - 1")} || ']'
      END AS "NodeList",
      num_nodes::VARCHAR AS "NNodes",
      CASE WHEN run < 0 OR state = {S_RUNNING} THEN ''
           WHEN run < 100 THEN 'run=' || ([{lineage}])[run + 1]
           ELSE 'run=exp-' || run::VARCHAR END AS "Comment",
      CASE WHEN reason < 0 THEN 'BeginTime' ELSE ([{reasons}])[reason + 1] END AS "Reason",
      '{c.name}' AS "Cluster"
    FROM jobs
    """


def write_sacct(rows: JobRows, params: GenParams, path: Path) -> None:
    """Write sacct.psv with DuckDB: -P prints no quotes and no escapes."""
    table = pa.table(rows.columns)
    with duckdb.connect() as con:
        con.execute("SET preserve_insertion_order = true")
        con.register("jobs", table)
        con.execute(
            f"COPY ({sacct_sql(params)}) TO '{path}' "
            "(FORMAT csv, DELIMITER '|', HEADER true, QUOTE '', ESCAPE '')"
        )


# Node event kinds: (State, StateRaw, User, median hours, reasons). StateRaw values are Slurm's
# node state bits as the real sacctmgr printed them (DOWN 1, DOWN* 2049, idle+DRAIN 514).
OUTPUT_FILES = ("sacct.psv", "events.psv", "nodes.txt", "manifest.toml")


def generate(params: GenParams, out_dir: Path) -> Generated:
    """Write the OUTPUT_FILES into ``out_dir``."""
    began = time.perf_counter()
    out_dir.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(params.seed)
    rows = build_rows(params, rng)
    events = build_events(rows, params, rng)
    # Registered an hour (rounded) before the earliest job start, so capacity covers every job.
    registered_s = (int(rows.columns["start"].min()) // 3600 - 1) * 3600
    # sacct.psv goes last, under a temporary name, so an interrupted run leaves no complete-looking
    # set in the cache.
    (out_dir / "sacct.psv").unlink(missing_ok=True)
    (out_dir / "events.psv").write_text("\n".join(event_lines(events, params, registered_s)) + "\n")
    nodes = node_lines(rows, events, params, registered_s)
    (out_dir / "nodes.txt").write_text("\n".join(nodes) + "\n")
    (out_dir / "manifest.toml").write_text(manifest_text(rows))
    write_sacct(rows, params, out_dir / "sacct.tmp")
    (out_dir / "sacct.tmp").rename(out_dir / "sacct.psv")
    seconds = time.perf_counter() - began
    return Generated(
        out_dir=out_dir, num_rows=rows.num_rows, num_events=len(events.node), seconds=seconds
    )


def cached(params: GenParams, cache_root: Path) -> Generated:
    """The data set for ``params`` under ``cache_root/<key>``, generated only if missing."""
    out_dir = cache_root / params.cache_key()
    if not all((out_dir / name).exists() for name in OUTPUT_FILES):
        return generate(params, out_dir)
    with (out_dir / "sacct.psv").open("rb") as f:
        num_rows = sum(chunk.count(b"\n") for chunk in iter(lambda: f.read(1 << 24), b"")) - 1
    num_events = len((out_dir / "events.psv").read_text().splitlines()) - 2
    return Generated(out_dir=out_dir, num_rows=num_rows, num_events=num_events, seconds=0.0)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.gen_slurm", description=__doc__.split("\n")[0]
    )
    parser.add_argument(
        "--jobs", type=int, required=True, help="number of sacct rows (allocations)"
    )
    parser.add_argument("--out", type=Path, required=True, help="directory to write into")
    parser.add_argument("--nodes", type=int, default=12_500, help="nodes of 8 GPUs (default 12500)")
    parser.add_argument(
        "--days", type=float, default=0.0, help="window length (default 30 per 1M jobs)"
    )
    parser.add_argument("--seed", type=int, default=0, help="random seed")
    args = parser.parse_args(argv)
    params = GenParams(
        num_jobs=args.jobs,
        window_days=args.days,
        seed=args.seed,
        cluster=ClusterSpec(num_nodes=args.nodes),
    )
    result = generate(params, args.out)
    size_mb = result.sacct_path.stat().st_size / 1e6
    print(
        f"{result.num_rows} sacct rows ({size_mb:.0f} MB), {result.num_events} node events, "
        f"{params.cluster.num_gpus} GPUs, {params.window_s / 86_400:g} days -> {args.out} "
        f"in {result.seconds:.1f} s"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
