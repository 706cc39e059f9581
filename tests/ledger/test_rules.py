"""The ledger's boundary rules on small timelines whose answers are worked out by hand."""

from __future__ import annotations

from pathlib import Path

import ibis
import pytest

from gpuyield.errors import DataConsistencyError, InputError
from gpuyield.ingest.slurm import SlurmInputs, ingest_slurm
from gpuyield.ledger import compute_ledger
from gpuyield.ledger.ledger import backend_for
from gpuyield.store import connect
from tests.ledger.timeline import GPUS_PER_NODE, HOUR_S, T0_S, Cluster, Event, Job

WINDOW_S = 4 * HOUR_S
CKPT_S = 1000


def run_ledger(
    tmp_path: Path,
    cluster: Cluster,
    manifest: str | None = None,
    *,
    inventory: bool = True,
    **window: int,
):
    files = cluster.write(tmp_path / "in")
    inputs = SlurmInputs(
        sacct=files["sacct"], events=files["events"], nodes=files["nodes"] if inventory else None
    )
    if manifest is not None:
        path = tmp_path / "in" / "manifest.toml"
        path.write_text(manifest)
        inputs = SlurmInputs(
            sacct=inputs.sacct, events=inputs.events, nodes=inputs.nodes, manifest=path
        )
    db = tmp_path / "db.duckdb"
    # Captured (sacct -S) from T0, or from the window's start if the test asks about earlier.
    captured_s = T0_S + min(0, window.get("since", 0))
    ingest_slurm(db, inputs, since_s=captured_s, until_s=T0_S + WINDOW_S)
    con = connect(db, read_only=True)
    try:
        since = window.get("since")
        until = window.get("until")
        return compute_ledger(
            backend_for(con),
            since_s=None if since is None else T0_S + since,
            until_s=None if until is None else T0_S + until,
        )
    finally:
        con.close()


LINEAGE = f"""
[[releases]]
model = "m1"
runs = ["pt"]
[run_settings.pt]
checkpoint_interval_s = {CKPT_S}
"""


def test_installed_and_idle_without_jobs(tmp_path: Path) -> None:
    ledger = run_ledger(tmp_path, Cluster(num_nodes=2, jobs=[Job(1, 0, 10, gpus=0)]))
    assert ledger.installed_gpu_seconds == 2 * GPUS_PER_NODE * WINDOW_S
    assert ledger.categories["idle"] == ledger.installed_gpu_seconds


def test_completed_job_outside_lineage_is_experiment(tmp_path: Path) -> None:
    ledger = run_ledger(tmp_path, Cluster(jobs=[Job(1, 100, 1100, gpus=4)]))
    assert ledger.categories["experiment"] == 4 * 1000
    assert ledger.categories["idle"] == 2 * 8 * WINDOW_S - 4000


@pytest.mark.parametrize(
    ("state", "category", "sub"),
    [
        ("FAILED", "failed", "software"),
        ("NODE_FAIL", "failed", "hardware"),
        # Slurm's flag states for a node that could not be set up or start the job.
        ("LAUNCH_FAILED", "failed", "hardware"),
        ("RECONFIG_FAIL", "failed", "hardware"),
        ("OUT_OF_MEMORY", "failed", "oom"),
        ("TIMEOUT", "failed", "timeout"),
        ("CANCELLED by 1000", "cancelled", "user"),
        ("PREEMPTED", "cancelled", "preempted"),
    ],
)
def test_end_state_decides_category(tmp_path: Path, state: str, category: str, sub: str) -> None:
    ledger = run_ledger(tmp_path, Cluster(jobs=[Job(1, 0, 500, state=state, gpus=2)]))
    assert ledger.categories[category] == 1000
    assert ledger.subcategories[f"{category}.{sub}"] == 1000


@pytest.mark.parametrize("state", ["POWER_UP_NODE", "UPDATE_DB", "COMPLETING", "SUSPENDED"])
def test_states_of_a_job_still_in_progress_are_experiment(tmp_path: Path, state: str) -> None:
    # Flags Slurm prints while a job holds its nodes and its outcome is not known yet.
    ledger = run_ledger(tmp_path, Cluster(jobs=[Job(1, 0, 500, state=state, gpus=2)]))
    assert ledger.categories["experiment"] == 1000
    assert ledger.categories["failed"] == ledger.categories["cancelled"] == 0


def test_lineage_failure_loses_time_since_last_checkpoint(tmp_path: Path) -> None:
    # Elapsed 2500 s with checkpoints every 1000 s: the last was at 2000 s, so 500 s x 8 GPUs lost.
    jobs = [Job(1, 0, 2500, state="NODE_FAIL", run="pt"), Job(2, 3000, 5000, run="pt")]
    ledger = run_ledger(tmp_path, Cluster(jobs=jobs), LINEAGE)
    assert ledger.categories["failed"] == 500 * 8
    assert ledger.subcategories["failed.hardware"] == 500 * 8
    assert ledger.categories["released"] == (2000 + 2000) * 8
    assert ledger.estimated_lost_jobs == 1


def test_lineage_preemption_is_cancelled_and_timeout_is_planned(tmp_path: Path) -> None:
    jobs = [
        Job(1, 0, 1300, state="PREEMPTED", run="pt"),
        Job(2, 2000, 3100, state="TIMEOUT", run="pt"),
    ]
    ledger = run_ledger(tmp_path, Cluster(jobs=jobs), LINEAGE)
    assert ledger.subcategories["cancelled.preempted"] == 300 * 8
    # A TIMEOUT inside a lineage is a planned chunk: all of it stays released.
    assert ledger.categories["released"] == (1000 + 1100) * 8
    assert ledger.categories["failed"] == 0


def test_diverged_after_splits_a_job(tmp_path: Path) -> None:
    manifest = '[[diverged]]\nrun = "div"\nafter = "2026-01-01T00:10:00"\n'
    ledger = run_ledger(tmp_path, Cluster(jobs=[Job(1, 0, 1000, run="div", gpus=2)]), manifest)
    assert ledger.categories["diverged"] == (1000 - 600) * 2
    assert ledger.categories["experiment"] == 600 * 2


def test_down_counts_only_unallocated_gpus(tmp_path: Path) -> None:
    # n1 drains for 1000 s while a 4-GPU job keeps running on it: allocation wins over drain.
    cluster = Cluster(
        jobs=[Job(1, 0, 600, gpus=4, nodes="n1")],
        events=[
            Event("n1", 100, 1100, state="DRAIN", reason="ECC errors"),
            Event("n2", 0, 200, state="MAINT", reason="planned maintenance"),
        ],
    )
    ledger = run_ledger(tmp_path, cluster)
    unplanned = 1000 * 8 - 500 * 4
    assert ledger.subcategories["down.unplanned"] == unplanned
    assert ledger.subcategories["down.planned"] == 200 * 8
    assert ledger.categories["down"] == unplanned + 200 * 8


def test_overlapping_events_merge(tmp_path: Path) -> None:
    events = [Event("n1", 0, 600), Event("n1", 300, 900, state="DRAIN"), Event("n1", 900, 1000)]
    ledger = run_ledger(tmp_path, Cluster(jobs=[Job(1, 0, 1, gpus=0)], events=events))
    assert ledger.categories["down"] == 1000 * 8


def test_open_event_and_running_job_end_at_capture(tmp_path: Path) -> None:
    cluster = Cluster(
        jobs=[Job(1, HOUR_S, None, state="RUNNING", gpus=8, nodes="n2")],
        events=[Event("n1", WINDOW_S - 100, None)],
    )
    ledger = run_ledger(tmp_path, cluster)
    assert ledger.categories["down"] == 100 * 8
    assert ledger.categories["experiment"] == (WINDOW_S - HOUR_S) * 8


def test_failed_job_blamed_on_hardware_by_nearby_node_event(tmp_path: Path) -> None:
    cluster = Cluster(
        jobs=[
            Job(1, 0, 1000, state="FAILED", nodes="n1"),
            Job(2, 0, 1000, state="FAILED", nodes="n2"),
        ],
        events=[Event("n1", 1000 + 200, 2000)],  # 200 s after job 1 ended: inside the 5-min window
    )
    ledger = run_ledger(tmp_path, cluster)
    assert ledger.subcategories["failed.hardware"] == 1000 * 8
    assert ledger.subcategories["failed.software"] == 1000 * 8


def test_maintenance_blames_only_failures_that_ended_inside_it(tmp_path: Path) -> None:
    """Issue 25's case: a job that crashed (exit 1) 2.5 minutes before planned maintenance on its
    node is a software failure, not hardware; one the maintenance ended (its end inside the
    window) is hardware; a fault 2.5 minutes after a failure still blames it (Meta's rule)."""
    cluster = Cluster(
        num_nodes=3,
        jobs=[
            Job(1, 0, 1000, state="FAILED", nodes="n1"),
            Job(2, 0, 1500, state="FAILED", nodes="n2"),
            Job(3, 0, 1000, state="FAILED", nodes="n3"),
        ],
        events=[
            Event("n1", 1150, 2000, state="DRAIN", reason="scheduled maintenance"),
            Event("n2", 1200, 2000, state="MAINT", reason="reservation maint-n2"),
            Event("n3", 1150, 2000),  # a fault
        ],
    )
    ledger = run_ledger(tmp_path, cluster)
    assert ledger.subcategories["failed.software"] == 1000 * 8  # job 1
    assert ledger.subcategories["failed.hardware"] == 1500 * 8 + 1000 * 8  # jobs 2 and 3


def test_window_clips_jobs(tmp_path: Path) -> None:
    ledger = run_ledger(
        tmp_path, Cluster(jobs=[Job(1, 0, 3 * HOUR_S, gpus=1)]), since=HOUR_S, until=2 * HOUR_S
    )
    assert ledger.installed_gpu_seconds == 2 * 8 * HOUR_S
    assert ledger.categories["experiment"] == HOUR_S


def test_until_after_capture_is_refused(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="capture"):
        run_ledger(tmp_path, Cluster(jobs=[Job(1, 0, 10)]), until=WINDOW_S + 1)


def test_job_on_unknown_node_is_a_consistency_error(tmp_path: Path) -> None:
    with pytest.raises(DataConsistencyError, match="n9"):
        run_ledger(tmp_path, Cluster(jobs=[Job(1, 0, 10, nodes="n9")]))


def test_a_window_after_a_removed_node_left_needs_no_inventory_of_it(tmp_path: Path) -> None:
    # n9 ran a job in the first hour and is gone from the inventory: a window after it is exact.
    jobs = [Job(1, 0, 10, nodes="n9"), Job(2, 2 * HOUR_S, 2 * HOUR_S + 100, gpus=4)]
    ledger = run_ledger(tmp_path, Cluster(jobs=jobs), since=HOUR_S)
    assert ledger.categories["experiment"] == 4 * 100


def test_oversubscribed_node_is_a_consistency_error(tmp_path: Path) -> None:
    jobs = [Job(1, 0, 100, gpus=8, nodes="n1"), Job(2, 50, 150, gpus=8, nodes="n1")]
    with pytest.raises(DataConsistencyError, match="n1 held 16"):
        run_ledger(tmp_path, Cluster(jobs=jobs))


def test_back_to_back_jobs_are_not_oversubscription(tmp_path: Path) -> None:
    jobs = [Job(1, 0, 100, gpus=8, nodes="n1"), Job(2, 100, 200, gpus=8, nodes="n1")]
    assert run_ledger(tmp_path, Cluster(jobs=jobs)).categories["experiment"] == 1600


def test_multi_node_job_spreads_gpus(tmp_path: Path) -> None:
    cluster = Cluster(
        jobs=[Job(1, 0, 100, gpus=16, nodes="n[1-2]")], events=[Event("n2", 50, 150, state="DRAIN")]
    )
    ledger = run_ledger(tmp_path, cluster)
    assert ledger.categories["experiment"] == 1600
    # n2 drained 50..150; its 8 GPUs were held by the job until 100.
    assert ledger.categories["down"] == 100 * 8 - 50 * 8


def test_job_without_gpu_count_is_counted_not_zeroed(tmp_path: Path) -> None:
    ledger = run_ledger(tmp_path, Cluster(jobs=[Job(1, 0, 100, gpus=None, tres="")]))
    assert ledger.jobs_without_gpu_count == 1
    assert ledger.node_seconds_without_gpu_count == 100


def test_capacity_from_cluster_tres_without_inventory(tmp_path: Path) -> None:
    # No --nodes: the cluster's registered gres/gpu=16 on n[1-2] gives 8 GPUs per node.
    ledger = run_ledger(tmp_path, Cluster(jobs=[Job(1, 0, 100, nodes="n2")]), inventory=False)
    assert ledger.installed_gpu_seconds == 2 * GPUS_PER_NODE * WINDOW_S
    assert ledger.categories["experiment"] == 800


def test_oversubscription_is_found_on_its_own_node_only(tmp_path: Path) -> None:
    # The sweep sums every node's changes in one ordered pass: n1 busy to the window's end
    # must not leak GPUs into n2's sums, and n2's overlap must still be found.
    jobs = [
        Job(1, 0, None, state="RUNNING", gpus=8, nodes="n1"),
        Job(2, 10, 100, gpus=6, nodes="n2"),
        Job(3, 50, 150, gpus=4, nodes="n2"),
    ]
    with pytest.raises(DataConsistencyError, match=r"n2 held 10 of 8") as info:
        run_ledger(tmp_path, Cluster(num_nodes=3, jobs=jobs))
    assert "n1" not in str(info.value)


def test_down_and_busy_nodes_side_by_side(tmp_path: Path) -> None:
    # n1 runs a job through n2's outage and n3 drains under a job: each node's down time is its
    # own GPUs no job held while it was out (n2: 8 x 300; n3: 8 x 200 - 4 x 100).
    cluster = Cluster(
        num_nodes=3,
        jobs=[Job(1, 0, 1000, gpus=8, nodes="n1"), Job(2, 0, 300, gpus=4, nodes="n3")],
        events=[Event("n2", 100, 400), Event("n3", 200, 400, state="DRAIN", reason="maint")],
    )
    ledger = run_ledger(tmp_path, cluster)
    assert ledger.subcategories["down.unplanned"] == 8 * 300
    assert ledger.subcategories["down.planned"] == 8 * 200 - 4 * 100
    assert ledger.categories["experiment"] == 8 * 1000 + 4 * 300


def test_sweep_gives_the_same_rows_in_partitions_and_as_a_scan(tmp_path: Path) -> None:
    # Spark runs the sweep as windows per node, DuckDB as a streaming scan over batches:
    # all must give the same rows, wherever the batches split the changes.
    from gpuyield.ledger.down import (
        down_islands,
        job_node_allocations,
        node_sweep,
        sweep_changes,
    )
    from gpuyield.ledger.jobs import clipped_jobs
    from gpuyield.ledger.scan import scan_sweep
    from gpuyield.ledger.window import node_capacity, resolve_window

    cluster = Cluster(
        num_nodes=4,
        jobs=[
            Job(1, 0, 500, gpus=16, nodes="n[1-2]"),
            Job(2, 500, 900, gpus=3, nodes="n1"),
            Job(3, 0, None, state="RUNNING", gpus=8, nodes="n4"),
        ],
        events=[Event("n1", 400, 700), Event("n2", 450, None), Event("n3", 0, 50, reason="maint")],
    )
    files = cluster.write(tmp_path / "in")
    db = tmp_path / "db.duckdb"
    ingest_slurm(
        db, SlurmInputs(sacct=files["sacct"], events=files["events"], nodes=files["nodes"]),
        since_s=T0_S, until_s=T0_S + WINDOW_S,
    )  # fmt: skip
    con = connect(db, read_only=True)
    try:
        backend = backend_for(con)
        window = resolve_window(backend, since_s=None, until_s=None)
        capacity = node_capacity(backend, window).table
        manifest = compute_ledger(backend).manifest
        jobs = clipped_jobs(backend, window, manifest)
        allocations = job_node_allocations(backend, jobs, capacity)
        islands = down_islands(backend, capacity, window)
        columns = ["cluster", "node", "start_s", "end_s", "in_use", "down", "planned"]

        def listed(swept: ibis.Table) -> list[tuple]:
            table = swept.select(*columns).to_pyarrow().to_pylist()
            return sorted(tuple(r[c] for c in columns) for r in table)

        def rows(*, per_node: bool) -> list[tuple]:
            return listed(node_sweep(allocations, islands, capacity, per_node=per_node))

        def scanned(batch_rows: int) -> list[tuple]:
            changes = sweep_changes(allocations, islands, capacity)
            return listed(scan_sweep(backend, changes, capacity, batch_rows=batch_rows))

        one_pass = rows(per_node=False)
        assert one_pass == rows(per_node=True)
        num_changes = sweep_changes(allocations, islands, capacity).count().to_pyarrow().as_py()
        for batch_rows in (1, 2, 3, 7, num_changes - 1, num_changes, 1 << 20):
            assert scanned(batch_rows) == one_pass, batch_rows
        # n2 is down from 450 to the capture; job 1 held its 8 GPUs there until 500.
        n2 = [r[2:] for r in one_pass if r[1] == "n2"]
        assert n2 == [
            (T0_S + 450.0, T0_S + 500.0, 8.0, True, False),
            (T0_S + 500.0, float(T0_S + WINDOW_S), 0.0, True, False),
        ]
    finally:
        con.close()


def test_since_before_registration_is_said(tmp_path: Path) -> None:
    ledger = run_ledger(tmp_path, Cluster(jobs=[Job(1, 0, 100)]), since=-HOUR_S)
    assert ledger.window.start_s == T0_S - HOUR_S
    # Capacity counts from the registration at T0, and the report says why.
    assert ledger.installed_gpu_seconds == 2 * GPUS_PER_NODE * WINDOW_S
    assert any("before the cluster's registration" in w for w in ledger.window.warnings)


def test_kept_segments_are_the_segments(tmp_path: Path) -> None:
    # Kept segments are stored without their jobs' attributes, which a join brings back: the
    # same rows and columns as the segments computed on the fly, down segments included.
    cluster = Cluster(
        num_nodes=3,
        jobs=[
            Job(1, 0, 500, run="pt", nodes="n[1-2]", gpus=16),
            Job(2, 500, 900, state="FAILED", run="pt", account="research"),
            Job(3, 0, 800, run="div", nodes="n3", user="bob", gpus=4),
            Job(4, 100, None, state="RUNNING", gpus=4, nodes="n3", run=""),
        ],
        events=[Event("n1", 920, 990), Event("n2", 600, 700, state="DRAIN", reason="maint")],
    )
    manifest = LINEAGE + '[[diverged]]\nrun = "div"\nafter = "2026-01-01T00:10:00"\n'
    files = cluster.write(tmp_path / "in")
    (tmp_path / "in" / "manifest.toml").write_text(manifest)
    db = tmp_path / "db.duckdb"
    inputs = SlurmInputs(
        sacct=files["sacct"], events=files["events"], nodes=files["nodes"],
        manifest=tmp_path / "in" / "manifest.toml",
    )  # fmt: skip
    ingest_slurm(db, inputs, since_s=T0_S, until_s=T0_S + WINDOW_S)
    con = connect(db, read_only=True)
    try:
        backend = backend_for(con)

        def rows(keep: bool) -> tuple[list[str], list[tuple]]:
            segments = compute_ledger(backend, keep_segments=keep).segments
            table = segments.to_pyarrow()
            listed = [tuple(r.values()) for r in table.to_pylist()]
            return table.column_names, sorted(listed, key=repr)

        kept, computed = rows(True), rows(False)
        assert kept == computed
        columns, listed = kept
        categories = {r[columns.index("category")] for r in listed}
        assert {"released", "failed", "diverged", "experiment", "down"} <= categories
        accounts = {r[columns.index("account")] for r in listed}
        assert accounts == {"acct", "research", None}  # None: the down segments
    finally:
        con.close()


def test_heads_and_tails_give_the_same_rows_in_one_pass() -> None:
    # Spark pairs each job with a part number (its segment, a lineage job's lost tail) where
    # DuckDB unions two filtered copies: the same segments either way.
    from gpuyield.ledger.jobs import (
        SEGMENT_JOB_ATTRIBUTES,
        _heads_and_tails,
        _heads_and_tails_one_pass,
    )

    jobs = ibis.memtable(
        {
            "job_key": [1, 2, 3, 4],
            "cluster": ["c"] * 4,
            **{c: [None, None, None, None] for c in SEGMENT_JOB_ATTRIBUTES},
            "num_gpus": [8, 4, 2, 1],
            "loss_measured": [False, True, False, False],
            "lineage": [False, True, True, True],
            # Job 2 lost its last 30 s, job 3 nothing, job 4 more than its clipped time.
            "lost_s": [0.0, 30.0, 0.0, 500.0],
            "state_category": ["failed", "failed", "experiment", "cancelled"],
            "state_subcategory": ["software", "hardware", None, "user"],
            "clip_start_s": [0, 100, 100, 900],
            "clip_end_s": [50, 200, 300, 1000],
            "head_end_s": [50.0, 170.0, 300.0, 500.0],
        },
        schema={c: "string" for c in SEGMENT_JOB_ATTRIBUTES}
        | {"job_key": "int64", "cluster": "string", "num_gpus": "int64"}
        | {"loss_measured": "boolean", "lineage": "boolean", "lost_s": "float64"}
        | {"state_category": "string", "state_subcategory": "string"}
        | {"clip_start_s": "int64", "clip_end_s": "int64", "head_end_s": "float64"},
    )
    con = ibis.duckdb.connect()

    def rows(table: ibis.Table) -> list[tuple]:
        listed = con.to_pyarrow(table).to_pylist()
        return sorted((tuple(r.values()) for r in listed), key=repr)

    union = rows(_heads_and_tails(jobs))
    assert union == rows(_heads_and_tails_one_pass(jobs))
    assert len(union) == 6  # every job's segment, and the two lineage jobs' lost tails
    con.disconnect()
