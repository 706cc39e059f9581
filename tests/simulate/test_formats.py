"""The written files look like Slurm 22.05 output (shared/data/slurm-local is the reference)."""

from __future__ import annotations

import re
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as hs

from gpuyield.hostlist import expand_hostlist
from gpuyield.simulate.api import RunSummary
from gpuyield.simulate.slurm_text import duration, hostlist
from tests.simulate.conftest import window_end
from tests.simulate.reference_ledger import epoch, read_psv

# First line of shared/data/slurm-local/sacct-X-D-wide.psv (real `sacct -a -P -X -D --format=...`).
REAL_SACCT_HEADER = (
    "JobID|JobIDRaw|JobName|User|UID|Group|Account|Partition|QOS|State|ExitCode|DerivedExitCode|"
    "Submit|Eligible|Start|End|ElapsedRaw|Elapsed|TimelimitRaw|Timelimit|AllocTRES|ReqTRES|"
    "AllocCPUS|ReqCPUS|ReqMem|NodeList|NNodes|NTasks|Comment|Reason|Flags|Priority|Cluster|WorkDir|"
    "SubmitLine|MaxRSS|CPUTimeRAW"
)
# First line of shared/data/slurm-local/sacctmgr-event-format.psv.
REAL_EVENT_HEADER = (
    "Cluster|Cluster Nodes|NodeName|Event|EventRaw|State|StateRaw|TimeStart|TimeEnd|Duration|"
    "Reason|User|TRES"
)
SHARED = Path(__file__).resolve().parents[3] / "shared" / "data" / "slurm-local"
STATES = {
    "COMPLETED",
    "FAILED",
    "NODE_FAIL",
    "PREEMPTED",
    "REQUEUED",
    "TIMEOUT",
    "OUT_OF_MEMORY",
    "RUNNING",
    "PENDING",
}
TIME = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d$")


def test_headers_are_the_real_ones(ledger_check: RunSummary):
    out = ledger_check.out_dir
    assert (out / "sacct.psv").read_text().splitlines()[0] == REAL_SACCT_HEADER
    assert (out / "events.psv").read_text().splitlines()[0] == REAL_EVENT_HEADER
    real = SHARED / "sacct-X-D-wide.psv"
    if real.exists():  # the constant above is a copy; check it still is
        assert real.read_text().splitlines()[0] == REAL_SACCT_HEADER
        assert (SHARED / "sacctmgr-event-format.psv").read_text().splitlines()[
            0
        ] == REAL_EVENT_HEADER


def test_sacct_rows_follow_slurm_semantics(ledger_check: RunSummary):
    rows = read_psv(ledger_check.out_dir / "sacct.psv")
    end = window_end(ledger_check)
    seen_states = set()
    for row in rows:
        state = row["State"]
        assert state in STATES or re.fullmatch(r"CANCELLED by \d+", state), state
        seen_states.add(state.split(" by ")[0])
        assert TIME.match(row["Submit"])
        assert re.fullmatch(r"run=\S+", row["Comment"])
        if state == "PENDING":
            assert row["Start"] == row["End"] == "Unknown"
            assert row["NodeList"] == "None assigned" and row["AllocTRES"] == ""
            continue
        start = epoch(row["Start"])
        stop = end if row["End"] == "Unknown" else epoch(row["End"])
        assert (row["End"] == "Unknown") == (state == "RUNNING")
        assert int(row["ElapsedRaw"]) == stop - start
        nodes = expand_hostlist(row["NodeList"])
        assert len(nodes) == int(row["NNodes"])
        assert f"node={len(nodes)}" in row["AllocTRES"]
    assert {
        "COMPLETED",
        "FAILED",
        "NODE_FAIL",
        "PREEMPTED",
        "REQUEUED",
        "TIMEOUT",
        "OUT_OF_MEMORY",
        "RUNNING",
        "PENDING",
        "CANCELLED",
    } <= seen_states


def test_node_fail_is_requeued_under_the_same_id(ledger_check: RunSummary):
    rows = read_psv(ledger_check.out_dir / "sacct.psv")
    by_id: dict[str, list[dict[str, str]]] = {}
    for row in rows:
        by_id.setdefault(row["JobIDRaw"], []).append(row)
    failed = [r for r in rows if r["State"] == "NODE_FAIL"]
    assert failed
    for row in failed:
        later = [r for r in by_id[row["JobIDRaw"]] if r["Submit"] == row["End"]]
        if epoch(row["End"]) < window_end(ledger_check):
            assert len(later) == 1, row["JobIDRaw"]
            assert later[0]["Reason"] == "BeginTime"


def test_node_failures_appear_as_events_then_drain(ledger_check: RunSummary):
    events = read_psv(ledger_check.out_dir / "events.psv")
    assert events[0]["Reason"] == "Cluster Registered TRES"
    nodes = [e for e in events[1:]]
    assert {e["State"] for e in nodes} == {"DOWN", "DOWN*", "DRAIN"}
    for e in nodes:
        if e["State"] == "DOWN*":
            assert e["Reason"] == "Not responding" and e["StateRaw"] == "2049"
    # A failing job's NODE_FAIL end is the start of a DOWN/DOWN* event on one of its nodes.
    starts = {(e["NodeName"], e["TimeStart"]) for e in nodes if e["State"] != "DRAIN"}
    for row in read_psv(ledger_check.out_dir / "sacct.psv"):
        if row["State"] == "NODE_FAIL":
            assert any((n, row["End"]) in starts for n in expand_hostlist(row["NodeList"]))


def test_nodes_inventory_lists_every_node(ledger_check: RunSummary):
    text = (ledger_check.out_dir / "nodes.txt").read_text().splitlines()
    assert len(text) == 64
    assert all("Gres=gpu:8" in line and "CfgTRES=" in line for line in text)


@settings(deadline=None)  # timing is not what this checks; CI machines are shared
@given(hs.sets(hs.integers(min_value=0, max_value=2000), min_size=1, max_size=40))
def test_hostlist_round_trips_through_the_ledger_parser(indices: set[int]):
    names = expand_hostlist(hostlist(indices, "n", 4))
    assert names == [f"n{i + 1:04d}" for i in sorted(indices)]


def test_duration_format_matches_slurm():
    # Values seen in shared/data/slurm-local: 00:00:02, 00:13:58, 365-00:00:00.
    assert duration(2) == "00:00:02"
    assert duration(838) == "00:13:58"
    assert duration(525600 * 60) == "365-00:00:00"


def test_research_on_lineage_nodes_is_preempted_when_the_run_starts(ledger_check: RunSummary):
    # ledger-check lends the 18 lineage nodes (n01-n18) to research until the run starts at 06:00.
    rows = read_psv(ledger_check.out_dir / "sacct.psv")
    run_start = next(r["Start"] for r in rows if r["JobName"] == "pt-check")
    assert run_start == "2026-11-01T06:00:00"
    group = {f"n{i:02d}" for i in range(1, 19)}
    victims = [r for r in rows if r["End"] == run_start and r["State"] == "PREEMPTED"]
    assert victims and all(set(expand_hostlist(r["NodeList"])) <= group for r in victims)
    for victim in victims:
        rerun = [
            r for r in rows if r["JobIDRaw"] == victim["JobIDRaw"] and r["Submit"] == run_start
        ]
        assert len(rerun) == 1 and rerun[0]["Reason"] == "BeginTime"
    # No research job runs on the group while the lineage run holds it.
    for row in rows:
        on_group = row["Start"] != "Unknown" and set(expand_hostlist(row["NodeList"])) & group
        if row["Account"] == "research" and on_group:
            assert row["Start"] < run_start


def test_maintenance_drains_nodes_and_requeues_their_jobs(ledger_check: RunSummary):
    # ledger-check: nodes 30-35 (n31-n36) in maintenance 2026-11-02T12:00 for 6 h, nodes 40-43
    # (n41-n44) from 2026-11-03T19:12 until after the window end (2026-11-04T00:00).
    events = read_psv(ledger_check.out_dir / "events.psv")
    maint = [e for e in events if "maintenance" in e["Reason"]]
    first = {e["NodeName"] for e in maint if e["TimeStart"] == "2026-11-02T12:00:00"}
    second = [e for e in maint if e["TimeStart"] == "2026-11-03T19:12:00"]
    assert first <= {f"n{i}" for i in range(31, 37)} and len(first) >= 4
    assert all(e["State"] == "DRAIN" for e in maint)
    assert all(e["TimeEnd"] == "2026-11-02T18:00:00" for e in maint if e["NodeName"] in first)
    assert second and all(e["TimeEnd"] == "Unknown" for e in second)
    rows = read_psv(ledger_check.out_dir / "sacct.psv")
    cut = [
        r
        for r in rows
        if r["End"] == "2026-11-02T12:00:00" and set(expand_hostlist(r["NodeList"])) & first
    ]
    assert cut and all(r["State"] == "REQUEUED" for r in cut)
    planned = ledger_check.truth.subcategories["down.planned"]
    most = 8 * (6 * 6 + 4 * 4.8) * 3600  # every node of both windows, GPUs x hours
    assert 0 < planned <= most
