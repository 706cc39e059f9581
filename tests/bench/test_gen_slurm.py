"""The bench's Slurm generator writes what real Slurm prints, never oversubscribing a node.

Formats are checked with the patterns of ``slurm_shapes``, which first have to accept the real
captures in /work/shared/data/slurm-local/. Capacity is checked by an independent sweep over every
node's allocation changes.
"""

from __future__ import annotations

import dataclasses
import itertools
import re
from collections import defaultdict
from datetime import UTC, datetime
from pathlib import Path

import duckdb
import numpy as np
import pytest
from bench.gen_slurm import (
    SACCT_FORMAT,
    ClusterSpec,
    Generated,
    GenParams,
    build_rows,
    cached,
    generate,
)
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.bench import slurm_shapes as shapes

_NODES = 1200  # big enough for multi-node lanes up to 64 nodes, small enough to generate in ms
_GPUS_PER_NODE = 8
_JOBS = 20_000
_PARAMS = GenParams(num_jobs=_JOBS, window_days=5.0, seed=7, cluster=ClusterSpec(num_nodes=_NODES))
_WINDOW_END_S = _PARAMS.window_start_s + 5 * 86_400
_REQUEUED_STATES = {"PREEMPTED", "NODE_FAIL", "REQUEUED"}


def epoch(text: str) -> int:
    return int(datetime.strptime(text, "%Y-%m-%dT%H:%M:%S").replace(tzinfo=UTC).timestamp())


def hosts(nodelist: str) -> list[int]:
    """Node numbers of a one-host or one-range hostlist (``n00042``, ``n[00001-00004]``)."""
    ranged = re.fullmatch(r"[a-z]+\[(\d+)-(\d+)\]", nodelist)
    if ranged:
        return list(range(int(ranged[1]), int(ranged[2]) + 1))
    return [int(re.fullmatch(r"[a-z]+(\d+)", nodelist)[1])]  # type: ignore[index]


def tres(text: str) -> dict[str, str]:
    return dict(item.split("=", 1) for item in text.split(","))


@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory) -> Generated:
    return generate(_PARAMS, tmp_path_factory.mktemp("gen"))


@pytest.fixture(scope="module")
def rows(generated: Generated) -> list[dict[str, str]]:
    return shapes.sacct_table(generated.sacct_path)


@pytest.mark.parametrize(
    "name", ["sacct-X-D-wide.psv", "sacct-X-wide.psv", "sacct-X-wide-pending-job16.psv"]
)
def test_field_patterns_accept_real_sacct(name: str) -> None:
    real_rows = shapes.sacct_table(shapes.REAL / name)
    assert real_rows
    assert [r["JobID"] for r in real_rows if shapes.bad_sacct_fields(r)] == []


def test_header_is_the_format_list_with_real_field_names(generated: Generated) -> None:
    header = generated.sacct_path.read_text().splitlines()[0]
    assert header == SACCT_FORMAT.replace(",", "|")
    real_header = (shapes.REAL / "sacct-X-D-wide.psv").read_text().splitlines()[0].split("|")
    assert set(header.split("|")) <= set(real_header)
    assert list(shapes.SACCT_FIELDS) == header.split("|")


def test_every_generated_field_looks_like_slurm(rows: list[dict[str, str]]) -> None:
    assert len(rows) == _JOBS
    bad = [(r["JobID"], shapes.bad_sacct_fields(r)) for r in rows if shapes.bad_sacct_fields(r)]
    assert bad == []


def test_times_elapsed_and_sizes_agree(rows: list[dict[str, str]]) -> None:
    for row in rows:
        start = epoch(row["Start"])
        end = _WINDOW_END_S if row["End"] == "Unknown" else epoch(row["End"])
        assert epoch(row["Submit"]) <= start <= end, row["JobID"]
        assert int(row["ElapsedRaw"]) == end - start, row["JobID"]
        assert end >= _PARAMS.window_start_s, "sacct -S returns only jobs that reach the window"
        assert (row["End"] == "Unknown") == (row["State"] == "RUNNING"), row["JobID"]
        alloc = tres(row["AllocTRES"])
        nodes = hosts(row["NodeList"])
        assert int(row["NNodes"]) == len(nodes) == int(alloc["node"]), row["JobID"]
        assert int(alloc["gres/gpu"]) % len(nodes) == 0, row["JobID"]
        assert int(alloc["gres/gpu"]) // len(nodes) <= _GPUS_PER_NODE, row["JobID"]
        assert all(1 <= n <= _NODES for n in nodes), row["JobID"]


def test_gpus_never_exceed_any_nodes_capacity(rows: list[dict[str, str]]) -> None:
    # +GPUs at start, -GPUs at end on every node of the job; ends sort before starts at the same
    # instant (intervals are half-open), so a running per-node sum is the allocation at each change.
    node, when, delta = [], [], []
    for row in rows:
        start = epoch(row["Start"])
        end = _WINDOW_END_S if row["End"] == "Unknown" else epoch(row["End"])
        nodes = hosts(row["NodeList"])
        per_node = int(tres(row["AllocTRES"])["gres/gpu"]) // len(nodes)
        for n in nodes:
            node += [n, n]
            when += [start, end]
            delta += [per_node, -per_node]
    node_a, when_a, delta_a = np.array(node), np.array(when), np.array(delta)
    order = np.lexsort((delta_a, when_a, node_a))
    allocated = np.cumsum(delta_a[order])
    assert allocated[-1] == 0
    assert allocated.min() >= 0
    assert allocated.max() <= _GPUS_PER_NODE
    assert allocated.max() == _GPUS_PER_NODE, "some node should be full at some point"


def test_requeued_runs_share_jobidraw_and_follow_each_other(rows: list[dict[str, str]]) -> None:
    runs = defaultdict(list)
    for row in rows:
        runs[row["JobIDRaw"]].append(row)
    requeued = [r for r in runs.values() if len(r) > 1]
    assert len(requeued) > _JOBS // 100, "RSC-1: ~10% preempted, 2% requeued"
    for chain in requeued:
        assert len({r["JobID"] for r in chain}) == 1
        for earlier, later in itertools.pairwise(chain):
            assert earlier["State"] in _REQUEUED_STATES
            assert later["Reason"] == "BeginTime"
            assert later["Submit"] == earlier["End"], "the rerun is submitted at the requeue"
            assert epoch(later["Start"]) >= epoch(earlier["End"])


def test_array_tasks_keep_the_array_id_on_the_last_task(rows: list[dict[str, str]]) -> None:
    arrays: dict[str, dict[int, str]] = defaultdict(dict)
    for row in rows:
        if "_" in row["JobID"]:
            array_id, task = row["JobID"].split("_")
            arrays[array_id][int(task)] = row["JobIDRaw"]
    assert arrays
    for array_id, tasks in arrays.items():
        assert sorted(tasks) == list(range(len(tasks)))
        assert tasks[max(tasks)] == array_id
        assert len(set(tasks.values())) == len(tasks), "each task has its own JobIDRaw"


def test_state_mix_has_the_rare_and_the_running(rows: list[dict[str, str]]) -> None:
    states = {r["State"].split(" ")[0] for r in rows}
    assert {"COMPLETED", "FAILED", "CANCELLED", "PREEMPTED", "TIMEOUT", "RUNNING"} <= states
    assert {"NODE_FAIL", "OUT_OF_MEMORY", "REQUEUED"} <= states
    running = sum(r["State"] == "RUNNING" for r in rows)
    assert 0 < running < _JOBS // 10


@pytest.mark.parametrize(
    "name",
    [
        "sacctmgr-event-format.psv",
        "nodes-snapshot-a-sacctmgr-event-format.psv",
        "nodes-snapshot-b-sacctmgr-event-format.psv",
    ],
)
def test_event_patterns_accept_real_sacctmgr(name: str) -> None:
    lines = (shapes.REAL / name).read_text().splitlines()
    assert lines[0] == shapes.EVENT_HEADER
    assert shapes.CLUSTER_EVENT.fullmatch(lines[1])
    assert all(shapes.NODE_EVENT.fullmatch(line) for line in lines[2:])


def test_events_look_like_sacctmgr_and_never_overlap_on_a_node(generated: Generated) -> None:
    lines = generated.events_path.read_text().splitlines()
    assert lines[0] == shapes.EVENT_HEADER
    registered = shapes.CLUSTER_EVENT.fullmatch(lines[1])
    assert registered
    assert int(registered["gpus"]) == _NODES * _GPUS_PER_NODE
    assert int(registered["nodes"]) == _NODES
    matches = [shapes.NODE_EVENT.fullmatch(line) for line in lines[2:]]
    assert all(matches)
    states = {m["state"] for m in matches if m}
    assert states == {"DOWN", "DOWN*", "DRAIN"}
    by_node: dict[str, list[tuple[int, int]]] = defaultdict(list)
    for m in matches:
        assert m
        end = _WINDOW_END_S if m["end"] == "Unknown" else epoch(m["end"])
        by_node[m["node"]].append((epoch(m["start"]), end))
    for spans in by_node.values():
        spans.sort()
        assert all(a_end <= b_start for (_, a_end), (b_start, _) in itertools.pairwise(spans))


def test_nodes_have_scontrols_keys_in_order(generated: Generated) -> None:
    real = (shapes.REAL / "scontrol-show-nodes-oneliner.txt").read_text().splitlines()
    real_keys = shapes.node_keys(real[0])
    lines = generated.nodes_path.read_text().splitlines()
    assert len(lines) == _NODES
    for line in lines:
        keys = shapes.node_keys(line)
        assert keys in (real_keys, [*real_keys, "Reason"]), line[:40]
        assert "Gres=gpu:8 " in line
    assert any("+DRAIN" in line or "State=DOWN" in line for line in lines)


def test_duckdb_reads_it_as_the_bench_does(generated: Generated) -> None:
    path = str(generated.sacct_path).replace("'", "''")
    with duckdb.connect() as con:
        cursor = con.execute(
            f"SELECT * FROM read_csv('{path}', delim='|', header=true, all_varchar=true, "
            "quote='', escape='')"
        )
        names = [d[0] for d in cursor.description]
        count = len(cursor.fetchall())
    assert names == SACCT_FORMAT.split(",")
    assert count == _JOBS


def test_same_parameters_same_bytes_and_cache_reuse(tmp_path: Path) -> None:
    small = GenParams(num_jobs=500, window_days=1.0, seed=3, cluster=ClusterSpec(num_nodes=64))
    first = generate(small, tmp_path / "a")
    second = generate(small, tmp_path / "b")
    other = generate(dataclasses.replace(small, seed=4), tmp_path / "c")
    assert first.sacct_path.read_bytes() == second.sacct_path.read_bytes()
    assert first.sacct_path.read_bytes() != other.sacct_path.read_bytes()
    hit = cached(small, tmp_path / "cache")
    mtime = hit.sacct_path.stat().st_mtime_ns
    again = cached(small, tmp_path / "cache")
    assert again.sacct_path.stat().st_mtime_ns == mtime
    assert again.num_rows == hit.num_rows == 500
    assert again.num_events == hit.num_events


def test_invalid_parameters_name_the_field() -> None:
    with pytest.raises(ValueError, match=r"gen\.num_jobs"):
        GenParams(num_jobs=0)
    with pytest.raises(ValueError, match=r"cluster\.num_nodes"):
        ClusterSpec(num_nodes=0)


@settings(max_examples=25, deadline=None)
@given(
    num_nodes=st.integers(min_value=1, max_value=700),
    num_jobs=st.integers(min_value=1, max_value=4000),
    window_days=st.floats(min_value=0.5, max_value=10.0),
    seed=st.integers(min_value=0, max_value=2**16),
)
def test_any_cluster_gets_exactly_its_jobs_and_no_node_overflows(
    num_nodes: int, num_jobs: int, window_days: float, seed: int
) -> None:
    params = GenParams(
        num_jobs=num_jobs, window_days=window_days, seed=seed,
        cluster=ClusterSpec(num_nodes=num_nodes),
    )  # fmt: skip
    cols = build_rows(params, np.random.default_rng(seed)).columns
    assert len(cols["raw_id"]) == num_jobs
    end = np.where(cols["end"] < 0, params.window_end_s, cols["end"])
    assert (cols["start"] <= end).all()
    assert (end >= params.window_start_s).all()
    assert (end <= params.window_end_s).all()
    # Per node sweep, as in the text-level test but over the numbers.
    nnodes = cols["num_nodes"]
    node = np.repeat(cols["first_node"], nnodes) + (
        np.arange(int(nnodes.sum())) - np.repeat(np.cumsum(nnodes) - nnodes, nnodes)
    )
    assert node.max() < num_nodes
    per_node = np.repeat(cols["gpus"] // nnodes, nnodes)
    starts, ends = np.repeat(cols["start"], nnodes), np.repeat(end, nnodes)
    keys = np.concatenate([node, node])
    times = np.concatenate([starts, ends])
    delta = np.concatenate([per_node, -per_node])
    order = np.lexsort((delta, times, keys))
    assert np.cumsum(delta[order]).max() <= _GPUS_PER_NODE
