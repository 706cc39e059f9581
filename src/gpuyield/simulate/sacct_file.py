"""``sacct.psv``: every job row of a simulation in submit order, written in streamed batches.

Lineage rows are few (a run's requeues) and formatted one at a time. Research rows are millions
in a cluster-year: they are formatted ``BATCH_ROWS`` at a time as Arrow columns
(``slurm_columns``) and written as one buffer per batch, with the lineage rows cut in where their
submit time puts them. Memory holds one batch of text, not the file; the bytes are those the
one-row-at-a-time writer printed (the goldens in ``tests/golden/`` hold them).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

import numpy as np
import pyarrow as pa

from gpuyield.simulate import slurm_columns as sc
from gpuyield.simulate import slurm_text as st
from gpuyield.simulate.cluster import SimulationResult
from gpuyield.simulate.fleet_types import is_typed, model_of
from gpuyield.simulate.records import JobRow
from gpuyield.simulate.research_states import S_CANCELLED, S_PENDING, S_RUNNING, STATE_NAMES

#: Research rows formatted per batch: about 20 MB of text, large enough that Arrow's per-call cost
#: vanishes, small enough that memory does not grow with the cluster (and that the allocator
#: reuses a batch's memory for the next instead of mapping fresh pages: 100k rows were slower).
BATCH_ROWS = 50_000
_EXIT = {"FAILED": "1:0", "OUT_OF_MEMORY": "0:125", "CANCELLED": "0:15"}
#: Row key in the file: submit time, job id, then the row's place among the job's rows.
_Key = tuple[int, int, int]


def write_sacct(path: Path, result: SimulationResult) -> None:
    """Write ``sacct.psv`` (``sacct -X -D -P`` with ``slurm_text.SACCT_FIELDS``)."""
    lineage = list(_lineage_lines(result))
    submit, job_id, order = _research_order(result)
    # Lineage and research job ids never collide (research ids follow the lineage runs'), so a
    # lineage row goes before the first research row with a later (submit, job id).
    at = _insertion_points(submit, job_id, [key for key, _ in lineage])
    with path.open("wb") as fh:
        fh.write(("|".join(st.SACCT_FIELDS) + "\n").encode())
        cut = 0
        for first in range(0, order.size, BATCH_ROWS):
            batch = order[first : first + BATCH_ROWS]
            cut = _write_batch(fh, _research_batch(result, batch), first, at, lineage, cut)
        for _, line in lineage[cut:]:
            fh.write(line.encode() + b"\n")


def _write_batch(
    fh: BinaryIO,
    lines: pa.Array,
    first: int,
    at: np.ndarray,
    lineage: list[tuple[_Key, str]],
    cut: int,
) -> int:
    """Write one batch of research lines with the lineage lines that fall inside it; returns the
    index of the first lineage line not written yet."""
    text = sc.text_buffer(lines)
    done = int(text.offsets[0])
    while cut < len(lineage) and at[cut] < first + len(lines):
        upto = int(text.offsets[int(at[cut]) - first])
        fh.write(text.data[done:upto])
        fh.write(lineage[cut][1].encode() + b"\n")
        done, cut = upto, cut + 1
    fh.write(text.data[done : int(text.offsets[-1])])
    return cut


def _insertion_points(submit: np.ndarray, job_id: np.ndarray, keys: list[_Key]) -> np.ndarray:
    """For each lineage key (in order), how many research rows come before it in the file."""
    points = np.empty(len(keys), dtype=np.int64)
    for i, (at_s, jid, _) in enumerate(keys):
        lo = int(np.searchsorted(submit, at_s, side="left"))
        hi = int(np.searchsorted(submit, at_s, side="right"))
        points[i] = lo + int(np.searchsorted(job_id[lo:hi], jid, side="left"))
    return points


def _research_order(result: SimulationResult) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Research rows in file order: (submit times, job ids, row indices), all in that order."""
    rows, jobs = result.rows, result.jobs
    if rows is None or jobs is None or len(rows) == 0:
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty, empty
    job_id = jobs.job_id[rows.job]
    order = np.lexsort((np.arange(len(rows)), job_id, rows.submit_s))
    return rows.submit_s[order], job_id[order], order


def _research_batch(result: SimulationResult, idx: np.ndarray) -> pa.Array:
    """The sacct lines (each ending in a newline) of research rows ``idx``, in that order."""
    rows, jobs, scenario = result.rows, result.jobs, result.scenario
    assert rows is not None and jobs is not None
    job = rows.job[idx]
    user, state, num_gpus = jobs.user[job], rows.state[idx], rows.num_gpus[idx]
    start, stop = rows.start_s[idx], rows.end_s[idx]
    num_nodes = rows.num_nodes[idx]
    started = state != S_PENDING
    running = (state == S_RUNNING) | ~started
    elapsed = np.where(started, np.where(running, scenario.end_s, stop) - start, 0)
    cpus = num_gpus * st.CPUS_PER_GPU
    job_id = sc.ints(jobs.job_id[job])
    submitted = sc.times(rows.submit_s[idx])
    fields = (
        job_id,
        job_id,
        sc.lookup(lambda g: f"exp-{g}g", num_gpus),
        sc.lookup(_user_fields, user),
        sc.lookup(_state_fields, state, user),
        submitted,
        submitted,
        sc.choose(started, sc.times(np.where(start >= 0, start, 0)), "Unknown"),
        sc.choose(running, "Unknown", sc.times(np.where(stop >= 0, stop, 0))),
        sc.ints(elapsed),
        sc.durations(elapsed),
        sc.lookup(lambda m: f"{m}|{st.duration(m * 60)}", jobs.time_limit_s[job] // 60),
        sc.lookup(
            lambda g, n, s: _allocation_fields(g, n, s, _gres_type(result, research=True)),
            num_gpus,
            num_nodes,
            started,
        ),
        _node_lists(result, idx, started, num_nodes),
        sc.lookup(lambda n: f"{n}|{n}", num_nodes),
        sc.join("run=r", job_id),
        sc.lookup(lambda r: _reason_fields(bool(r), scenario.cluster), rows.requeued[idx]),
        sc.lookup(lambda u: f"/home/u{u:02d}", user),
        sc.join(_sbatch_prefix(num_gpus), job_id, " exp.sh"),
        "",
        sc.join(sc.ints(elapsed * cpus), "\n"),
    )
    return sc.join(*fields, sep="|")


def _user_fields(user: int) -> str:
    """User, UID, Group, Account, Partition, QOS of a research user."""
    return f"u{user:02d}|{2000 + user}|u{user:02d}|research|research|normal"


def _state_fields(state: int, user: int) -> str:
    """State, ExitCode, DerivedExitCode of a state code: a cancelled job names the user who
    cancelled it."""
    name = STATE_NAMES[state]
    text = f"CANCELLED by {2000 + user}" if state == S_CANCELLED else name
    return f"{text}|{_EXIT.get(name, '0:0')}|0:0"


def _allocation_fields(num_gpus: int, num_nodes: int, started: int, gres: str = "") -> str:
    """AllocTRES, ReqTRES, AllocCPUS, ReqCPUS, ReqMem: a job that never started has requested
    resources and no allocated ones; a typed fleet's TRES name the GPU type."""
    req = st.tres(num_gpus, num_nodes, gres)
    cpus = num_gpus * st.CPUS_PER_GPU
    alloc, alloc_cpus = (req, cpus) if started else ("", 0)
    return f"{alloc}|{req}|{alloc_cpus}|{cpus}|{num_gpus * st.MEM_GB_PER_GPU}G"


def _reason_fields(requeued: bool, cluster: str) -> str:
    """Reason, Flags, Priority, Cluster: a rerun of a requeued job waited for its BeginTime."""
    return f"{'BeginTime' if requeued else 'None'}|SchedMain,StartRecieved|4294900000|{cluster}"


def _sbatch_prefix(num_gpus: np.ndarray) -> pa.Array:
    return sc.lookup(lambda g: f"sbatch --gres=gpu:{g} --comment=run=r", num_gpus)


def _node_lists(
    result: SimulationResult, idx: np.ndarray, started: np.ndarray, num_nodes: np.ndarray
) -> pa.Array:
    """NodeList of research rows ``idx``: the rows' slices of the node array, gathered in order."""
    rows = result.rows
    assert rows is not None
    counts = np.where(started, num_nodes, 0)
    ends = np.cumsum(counts)
    first = rows.node_ptr[idx]
    gather = np.repeat(first - (ends - counts), counts) + np.arange(
        int(ends[-1]) if ends.size else 0
    )
    naming = st.node_namer(result.scenario.fleet.node_prefix, result.scenario.fleet.num_nodes)
    return sc.hostlists(rows.nodes[gather], counts, naming.prefix, naming.width)


def _lineage_lines(result: SimulationResult) -> Iterator[tuple[_Key, str]]:
    """Lineage rows in file order, with their keys."""
    rows = sorted(
        ((row.submit_s, row.job_id, i), row)
        for run in result.lineage
        for i, row in enumerate(run.rows)
    )
    end = result.scenario.end_s
    cluster = result.scenario.cluster
    gpn = result.scenario.fleet.gpus_per_node
    node_lists = _lineage_node_lists(result, [row for _, row in rows])
    gres = _gres_type(result, research=False)
    for (key, row), node_list in zip(rows, node_lists, strict=True):
        yield key, _lineage_line(row, end, node_list, cluster, gpn, gres)


def _gres_type(result: SimulationResult, *, research: bool) -> str:
    """A typed fleet's GRES type of the train or research nodes (fleet_types.py), else ""."""
    fleet = result.scenario.fleet
    return model_of(fleet, research=research) if is_typed(fleet) else ""


def _lineage_node_lists(result: SimulationResult, rows: list[JobRow]) -> list[str]:
    """NodeList of lineage rows, formatted together (a row of a 24k-GPU run holds 3k nodes)."""
    held = [
        np.unique(np.asarray(row.nodes if row.start_s is not None else (), dtype=np.int64))
        for row in rows
    ]
    naming = st.node_namer(result.scenario.fleet.node_prefix, result.scenario.fleet.num_nodes)
    nodes = np.concatenate(held) if held else np.zeros(0, dtype=np.int64)
    counts = np.array([h.size for h in held], dtype=np.int64)
    texts: list[str] = sc.hostlists(nodes, counts, naming.prefix, naming.width).to_pylist()
    return texts


def _lineage_line(
    row: JobRow, end: int, node_list: str, cluster: str, gpn: int, gres: str = ""
) -> str:
    started = row.start_s is not None
    elapsed = 0
    if row.start_s is not None:
        elapsed = (row.end_s if row.end_s is not None else end) - row.start_s
    nodes = len(row.nodes) if started else row.num_gpus // gpn
    alloc = st.tres(row.num_gpus, nodes, gres) if started else ""
    cpus = row.num_gpus * st.CPUS_PER_GPU
    return st.sacct_line(
        (
            row.job_id,
            row.job_id,
            row.name,
            row.user,
            row.uid,
            row.user,
            row.account,
            row.partition,
            "normal",
            row.state,
            row.exit_code,
            "0:0",
            st.time1(row.submit_s),
            st.time1(row.eligible_s),
            st.time1(row.start_s),
            st.time1(row.end_s),
            elapsed,
            st.duration(elapsed),
            "UNLIMITED",
            "UNLIMITED",
            alloc,
            st.tres(row.num_gpus, nodes, gres),
            cpus if started else 0,
            cpus,
            f"{row.num_gpus * st.MEM_GB_PER_GPU}G",
            node_list,
            nodes,
            nodes,
            f"run={row.run}",
            row.reason,
            "SchedMain,StartRecieved",
            4294901000,
            cluster,
            f"/home/{row.user}/{row.run}",
            f"sbatch -J {row.name} --comment=run={row.run} train.sh",
            "",
            elapsed * cpus,
        )
    )
