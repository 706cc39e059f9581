"""Properties: conservation on random clusters, idempotent re-ingest, atomic ingest."""

from __future__ import annotations

import tempfile
from pathlib import Path

import duckdb
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpuyield.ingest.slurm import SlurmInputs, ingest_slurm
from gpuyield.ledger import compute_ledger
from gpuyield.ledger.ledger import backend_for
from gpuyield.store import connect
from tests.ledger.timeline import GPUS_PER_NODE, HOUR_S, T0_S, Cluster, Event, Job

WINDOW_S = 2 * HOUR_S
NUM_NODES = 3
STATES = [
    "COMPLETED",
    "FAILED",
    "NODE_FAIL",
    "CANCELLED by 0",
    "PREEMPTED",
    "TIMEOUT",
    "OUT_OF_MEMORY",
    "RUNNING",
    "REQUEUED",
]


@st.composite
def clusters(draw: st.DrawFn) -> Cluster:
    """Random jobs packed on nodes without oversubscription, plus random overlapping node events."""
    jobs: list[Job] = []
    job_id = 1
    for node in range(1, NUM_NODES + 1):
        for lane_gpus in draw(st.lists(st.sampled_from([1, 2, 4]), max_size=3)):
            t = draw(st.integers(-600, 600))
            for _ in range(draw(st.integers(0, 4))):
                length = draw(st.integers(1, 3000))
                state = draw(st.sampled_from(STATES))
                end = None if state == "RUNNING" else t + length
                run = draw(st.sampled_from(["", "pt", "ft", "div", "x"]))
                jobs.append(
                    Job(job_id, t, end, state=state, gpus=lane_gpus, nodes=f"n{node}", run=run)
                )
                job_id += 1
                if end is None:
                    break
                t = end + draw(st.integers(0, 500))
    # Lanes on one node must fit its GPUs: drop jobs of lanes past capacity.
    jobs = _fit(jobs)
    events = [
        Event(
            f"n{draw(st.integers(1, NUM_NODES))}",
            s,
            None if open_ else s + draw(st.integers(0, 4000)),
            state=draw(st.sampled_from(["DOWN", "DRAIN", "MAINT", "DOWN*"])),
        )
        for s, open_ in draw(
            st.lists(st.tuples(st.integers(0, WINDOW_S), st.booleans()), max_size=5)
        )
    ]
    return Cluster(num_nodes=NUM_NODES, jobs=jobs or [Job(1, 0, 1, gpus=0)], events=events)


def _fit(jobs: list[Job]) -> list[Job]:
    kept: list[Job] = []
    for job in jobs:
        end = job.end_s if job.end_s is not None else WINDOW_S * 10
        peak = job.gpus or 0
        for other in kept:
            other_end = other.end_s if other.end_s is not None else WINDOW_S * 10
            if other.nodes == job.nodes and other.start_s < end and job.start_s < other_end:
                peak += other.gpus or 0
        if peak <= GPUS_PER_NODE and (job.end_s is None or job.end_s <= WINDOW_S):
            kept.append(job)
    return kept


MANIFEST = """
[[releases]]
model = "m"
runs = ["pt", "ft"]
[[diverged]]
run = "div"
after = "2026-01-01T00:30:00"
[run_settings.pt]
checkpoint_interval_s = 700
"""


def _ingest(directory: Path, cluster: Cluster, db: Path | None = None) -> duckdb.DuckDBPyConnection:
    files = cluster.write(directory)
    manifest = directory / "manifest.toml"
    runs = {j.run for j in cluster.jobs}
    manifest.write_text(MANIFEST if {"pt", "ft", "div"} <= runs else "")
    con = connect(db)
    ingest_slurm(
        db,
        SlurmInputs(
            sacct=files["sacct"], events=files["events"], nodes=files["nodes"], manifest=manifest
        ),
        until_s=T0_S + WINDOW_S,
        con=con,
    )
    return con


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cluster=clusters())
def test_categories_always_add_up_to_installed(cluster: Cluster) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        con = _ingest(Path(tmp), cluster)
        ledger = compute_ledger(backend_for(con))
        con.close()
    assert abs(sum(ledger.categories.values()) - ledger.installed_gpu_seconds) < 1e-6
    assert all(v >= -1e-6 for v in ledger.categories.values())
    # Independent check of allocated time: GPUs x clipped seconds of every job.
    window_end = T0_S + WINDOW_S
    expected = sum(
        (j.gpus or 0)
        * (
            min(T0_S + (j.end_s if j.end_s is not None else WINDOW_S), window_end)
            - max(T0_S + j.start_s, ledger.window.start_s)
        )
        for j in cluster.jobs
        if j.start_s is not None
        and min(T0_S + (j.end_s if j.end_s is not None else WINDOW_S), window_end)
        > max(T0_S + j.start_s, ledger.window.start_s)
    )
    assert abs(ledger.allocated_gpu_seconds - expected) < 1e-6


def _snapshot(con: duckdb.DuckDBPyConnection) -> dict[str, list[tuple[object, ...]]]:
    tables = ["jobs", "job_nodes", "node_events", "cluster_events", "nodes", "manifests", "rejects"]
    snap = {
        t: sorted(con.execute(f"SELECT * EXCLUDE (ingest_id) FROM {t}").fetchall(), key=repr)
        for t in tables
        if t not in ("job_nodes", "rejects", "manifests")
    }
    snap["job_nodes"] = sorted(con.execute("SELECT * FROM job_nodes").fetchall())
    snap["ingests"] = sorted(con.execute("SELECT ingest_id, sha256 FROM ingests").fetchall())
    return snap


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cluster=clusters())
def test_reingest_changes_nothing(cluster: Cluster) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        con = _ingest(Path(tmp), cluster)
        before = _snapshot(con)
        files = {
            k: Path(tmp) / v
            for k, v in (("sacct", "sacct.psv"), ("events", "events.psv"), ("nodes", "nodes.txt"))
        }
        summary = ingest_slurm(None, SlurmInputs(**files), until_s=T0_S + WINDOW_S, con=con)
        assert all(f.skipped for f in summary.files)
        assert _snapshot(con) == before
        con.close()


def test_overlapping_capture_replaces_rows_instead_of_adding(tmp_path: Path) -> None:
    first = Cluster(jobs=[Job(1, 0, None, state="RUNNING"), Job(2, 0, 100, gpus=2, nodes="n2")])
    con = _ingest(tmp_path / "a", first)
    later = Cluster(jobs=[Job(1, 0, 500), Job(2, 0, 100, gpus=2, nodes="n2")])
    files = later.write(tmp_path / "b")
    ingest_slurm(None, SlurmInputs(sacct=files["sacct"]), until_s=T0_S + WINDOW_S, con=con)
    rows = con.execute("SELECT job_id, state, end_s FROM jobs ORDER BY job_id").fetchall()
    con.close()
    assert rows == [("1", "COMPLETED", T0_S + 500), ("2", "COMPLETED", T0_S + 100)]


def test_failed_ingest_leaves_store_as_it_was(tmp_path: Path) -> None:
    db = tmp_path / "store.duckdb"
    con = _ingest(tmp_path / "a", Cluster(jobs=[Job(1, 0, 100)]), db=db)
    before = _snapshot(con)
    con.close()
    # Good events, then an sacct file whose last row is malformed: nothing of either may land.
    files = Cluster(jobs=[Job(5, 0, 50)], events=[Event("n1", 10, 20)]).write(tmp_path / "b")
    files["sacct"].write_text(files["sacct"].read_text() + "9|9|COMPLETED|garbage\n")
    try:
        ingest_slurm(
            db, SlurmInputs(sacct=files["sacct"], events=files["events"]), until_s=T0_S + WINDOW_S
        )
    except Exception as error:
        assert type(error).__name__ == "ParseError"
    else:
        raise AssertionError("malformed row accepted")
    con = connect(db)
    assert _snapshot(con) == before
    con.close()


def test_killed_ingest_leaves_store_as_it_was(tmp_path: Path) -> None:
    """SIGKILL inside the ingest's transaction: the store reopens with exactly its earlier rows."""
    import os
    import signal
    import subprocess
    import sys
    import time

    db = tmp_path / "store.duckdb"
    con = _ingest(tmp_path / "a", Cluster(jobs=[Job(1, 0, 100)]), db=db)
    before = _snapshot(con)
    con.close()
    big = tmp_path / "big.psv"
    with big.open("w") as handle:
        handle.write("JobID|JobIDRaw|State|Submit|Start|End|AllocTRES|NodeList\n")
        for i in range(2, 50_000):
            handle.write(
                f"{i}|{i}|COMPLETED|2026-01-01T00:00:00|2026-01-01T00:00:00|"
                f"2026-01-01T00:00:01|gres/gpu=1|n{i % 2 + 1}\n"
            )
    # The child announces each phase through the public Progress protocol; it waits to be killed
    # once the jobs are written, inside the transaction that has not committed yet.
    script = (
        "import sys, time; from pathlib import Path\n"
        "from gpuyield.ingest.slurm import SlurmInputs, ingest_slurm\n"
        "class Stop:\n"
        "    def phase(self, name, total=None):\n"
        "        print(name, flush=True)\n"
        "        if name.startswith('jobs stored'): time.sleep(600)\n"
        "    def advance(self, amount): pass\n"
        "ingest_slurm(sys.argv[1], SlurmInputs(sacct=Path(sys.argv[2])), progress=Stop())\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", script, str(db), str(big)], stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None
    phases = []
    for line in proc.stdout:
        phases.append(line.strip())
        if phases[-1].startswith("jobs stored"):
            break
    assert phases and phases[-1].startswith("jobs stored"), f"the ingest ended early: {phases}"
    time.sleep(0.5)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    proc.stdout.close()
    con = connect(db)
    assert _snapshot(con) == before
    con.close()
