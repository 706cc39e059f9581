"""Installed capacity over time: clusters that grow, shrink or change GPUs inside the window."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuyield.errors import DataConsistencyError
from gpuyield.ledger.capacity import NodeInterval, Registration, capacity_intervals
from tests.ledger.test_rules import WINDOW_S, run_ledger
from tests.ledger.timeline import GPUS_PER_NODE, HOUR_S, Cluster, Event, Job
from tests.ledger.timeline import Registration as Row


def _intervals(*args, **kwargs) -> tuple[list[NodeInterval], list[str]]:
    found = capacity_intervals(*args, **kwargs)
    return found.intervals, found.warnings


def _reg(start_s: int, nodes: str | None, gpus: int | None) -> Registration:
    return Registration(cluster="c", start_s=start_s, num_gpus=gpus, node_list=nodes)


def _spans(intervals: list[NodeInterval]) -> list[tuple[str, int, int, int]]:
    return [(i.node, i.num_gpus, i.start_s, i.end_s) for i in intervals]


def test_inventory_without_listed_registrations_counts_from_the_first_registration() -> None:
    inventory = {("c", "a"): 8, ("c", "b"): 4}
    found, said = _intervals(inventory, [_reg(50, None, None)], start_s=0, end_s=100)
    assert _spans(found) == [("a", 8, 50, 100), ("b", 4, 50, 100)] and said == []


def test_each_registration_holds_until_the_next() -> None:
    regs = [_reg(0, "n[1-2]", 16), _reg(40, "n[1-3]", 24), _reg(70, "n[2-3]", 16)]
    inventory = {("c", f"n{i}"): 8 for i in (1, 2, 3)}
    found, said = _intervals(inventory, regs, start_s=10, end_s=100)
    # n2 is in every registration: one merged interval; n1 leaves at 70, n3 joins at 40.
    assert _spans(found) == [("n1", 8, 10, 70), ("n2", 8, 10, 100), ("n3", 8, 40, 100)]
    assert said == []


def test_a_removed_node_gets_what_the_inventory_does_not_account_for() -> None:
    regs = [_reg(0, "n[1-3]", 20), _reg(50, "n[1-2]", 16)]
    found, _ = _intervals({("c", "n1"): 8, ("c", "n2"): 8}, regs, start_s=0, end_s=100)
    assert ("n3", 4, 0, 50) in _spans(found)


def test_an_uneven_remainder_is_an_error_naming_the_nodes() -> None:
    regs = [_reg(0, "n[1-4]", 19)]
    with pytest.raises(DataConsistencyError, match="cannot split evenly") as info:
        capacity_intervals({("c", "n1"): 8}, regs, start_s=0, end_s=100)
    assert "n2" in str(info.value) and info.value.hint


def test_a_total_that_disagrees_with_the_inventory_is_said() -> None:
    regs = [_reg(0, "n[1-2]", 32)]
    found, said = _intervals({("c", "n1"): 8, ("c", "n2"): 8}, regs, start_s=0, end_s=100)
    assert [i.num_gpus for i in found] == [8, 8]
    assert len(said) == 1 and "32 GPUs" in said[0] and "inventory" in said[0]


def test_repeated_registrations_count_once_and_conflicting_ones_are_refused() -> None:
    same = [_reg(0, "n[1-2]", 16), _reg(0, "n[1-2]", 16)]
    found, _ = _intervals({}, same, start_s=0, end_s=10)
    assert _spans(found) == [("n1", 8, 0, 10), ("n2", 8, 0, 10)]
    with pytest.raises(DataConsistencyError, match="two different registrations"):
        capacity_intervals({}, [*same, _reg(0, "n[1-3]", 24)], start_s=0, end_s=10)


def test_a_job_before_the_first_registration_moves_it_back_and_says_so() -> None:
    found, said = _intervals({}, [_reg(50, "n1", 8)], start_s=0, end_s=100, first_job_s={"c": 20})
    assert _spans(found) == [("n1", 8, 20, 100)]
    assert "before its first registration" in said[0]


# The same rules through the whole ledger, on small clusters written as Slurm prints them. The
# window is given (--since): by default it would start at the latest registration before the
# first job.


def test_a_node_added_mid_window_is_installed_from_then_on(tmp_path: Path) -> None:
    cluster = Cluster(
        num_nodes=3,
        registrations=[Row(0, "n[1-2]", 16), Row(2 * HOUR_S, "n[1-3]", 24)],
        jobs=[Job(1, 2 * HOUR_S, 3 * HOUR_S, nodes="n3")],
    )
    ledger = run_ledger(tmp_path, cluster, since=0)
    assert ledger.installed_gpu_seconds == 16 * WINDOW_S + 8 * (WINDOW_S - 2 * HOUR_S)
    assert ledger.categories["experiment"] == 8 * HOUR_S
    assert ledger.categories["idle"] == ledger.installed_gpu_seconds - 8 * HOUR_S


def test_a_node_removed_before_the_inventory_keeps_its_jobs(tmp_path: Path) -> None:
    # n3 left at 2 h and is not in the inventory: its job and GPUs still count before that.
    cluster = Cluster(
        num_nodes=3,
        registrations=[Row(0, "n[1-3]", 24), Row(2 * HOUR_S, "n[1-2]", 16)],
        inventory={"n1": GPUS_PER_NODE, "n2": GPUS_PER_NODE},
        jobs=[Job(1, 0, HOUR_S, nodes="n3")],
    )
    ledger = run_ledger(tmp_path, cluster, since=0)
    assert ledger.installed_gpu_seconds == 24 * 2 * HOUR_S + 16 * (WINDOW_S - 2 * HOUR_S)
    assert ledger.categories["experiment"] == 8 * HOUR_S


def test_a_job_on_a_node_outside_the_cluster_is_a_consistency_error(tmp_path: Path) -> None:
    cluster = Cluster(
        num_nodes=3,
        registrations=[Row(0, "n[1-2]", 16), Row(2 * HOUR_S, "n[1-3]", 24)],
        jobs=[Job(1, HOUR_S, 3 * HOUR_S, nodes="n3")],
    )
    with pytest.raises(DataConsistencyError, match="n3 held 8 of 0 GPUs"):
        run_ledger(tmp_path, cluster, since=0)


def test_down_time_across_a_capacity_change_is_one_island(tmp_path: Path) -> None:
    # n1 goes from 8 to 4 GPUs at 2 h (the inventory, taken after, says 4) while down 1 h-3 h.
    cluster = Cluster(
        num_nodes=2,
        registrations=[Row(0, "n[1-2]", 16), Row(2 * HOUR_S, "n[1-2]", 12)],
        inventory={"n1": 4, "n2": 8},
        events=[Event("n1", HOUR_S, 3 * HOUR_S)],
    )
    ledger = run_ledger(tmp_path, cluster, since=0)
    # The inventory's counts are used for both registrations (the first one's total is said).
    assert ledger.subcategories["down.unplanned"] == 4 * 2 * HOUR_S
    assert any("registered 16 GPUs" in w for w in ledger.window.warnings)


def test_without_inventory_each_registration_is_split_over_its_nodes(tmp_path: Path) -> None:
    cluster = Cluster(
        num_nodes=4,
        registrations=[Row(0, "n[1-2]", 16), Row(2 * HOUR_S, "n[1-4]", 64)],
        jobs=[Job(1, 3 * HOUR_S, 4 * HOUR_S, gpus=16, nodes="n4")],
    )
    ledger = run_ledger(tmp_path, cluster, inventory=False, since=0)
    assert ledger.installed_gpu_seconds == 16 * 2 * HOUR_S + 64 * (WINDOW_S - 2 * HOUR_S)
    assert ledger.categories["experiment"] == 16 * HOUR_S


def test_an_event_across_a_change_of_gpus_is_counted_once(tmp_path: Path) -> None:
    from gpuyield.ingest.slurm import SlurmInputs, ingest_slurm
    from gpuyield.ledger import compute_ledger
    from gpuyield.ledger.ledger import backend_for
    from gpuyield.report.failures import failures_of
    from gpuyield.store import connect
    from tests.ledger.timeline import T0_S

    # No inventory: n1 has 8 GPUs until 2 h, then 4 (the registration's total split evenly).
    cluster = Cluster(
        num_nodes=2,
        registrations=[Row(0, "n[1-2]", 16), Row(2 * HOUR_S, "n[1-2]", 8)],
        events=[Event("n1", HOUR_S, 3 * HOUR_S, reason="psu")],
        jobs=[Job(1, 0, 10, gpus=1, nodes="n2")],
    )
    files = cluster.write(tmp_path / "in")
    db = tmp_path / "db.duckdb"
    inputs = SlurmInputs(sacct=files["sacct"], events=files["events"])
    ingest_slurm(db, inputs, since_s=T0_S, until_s=T0_S + WINDOW_S)
    con = connect(db, read_only=True)
    try:
        backend = backend_for(con)
        ledger = compute_ledger(backend, since_s=T0_S)
        assert ledger.subcategories["down.unplanned"] == 8 * HOUR_S + 4 * HOUR_S
        (reason,) = failures_of(ledger, backend).event_reasons
        assert (reason.reason, reason.num_events, reason.num_nodes) == ("psu", 1, 1)
        assert reason.gpu_seconds == 8 * HOUR_S + 4 * HOUR_S
    finally:
        con.close()


@st.composite
def _resizes(draw: st.DrawFn) -> tuple[dict[tuple[str, str], int], list[Registration], int, int]:
    """A cluster re-registered a few times with random node sets; the inventory lists some of
    the nodes, and every registration's total is what its nodes hold (8 GPUs each unless the
    inventory says otherwise)."""
    gpus = {f"n{i}": draw(st.sampled_from([0, 4, 8])) for i in range(1, 7)}
    starts = sorted(draw(st.sets(st.integers(0, 1000), min_size=1, max_size=5)))
    node_sets = [sorted(draw(st.sets(st.sampled_from(sorted(gpus)), min_size=1))) for _ in starts]
    # The inventory lists only nodes some registration names (others follow another rule).
    in_inventory = draw(st.sets(st.sampled_from(sorted({n for ns in node_sets for n in ns}))))
    inventory = {("c", n): gpus[n] for n in in_inventory}
    regs = []
    for start, nodes in zip(starts, node_sets, strict=True):
        # Nodes missing from the inventory share the rest evenly: give them equal counts.
        missing = [n for n in nodes if n not in in_inventory]
        share = draw(st.sampled_from([0, 4, 8]))
        total = sum(gpus[n] for n in nodes if n in in_inventory) + share * len(missing)
        regs.append(_reg(start, ",".join(nodes), total))
    window_start = draw(st.integers(-100, 1100))
    window_end = window_start + draw(st.integers(0, 1200))
    return inventory, regs, window_start, window_end


@settings(max_examples=200, deadline=None)
@given(case=_resizes())
def test_installed_is_each_registration_over_its_span(case) -> None:
    inventory, regs, start_s, end_s = case
    found, said = _intervals(inventory, regs, start_s=start_s, end_s=end_s)
    assert said == []  # totals agree with the inventory by construction
    expected = 0
    for i, reg in enumerate(regs):
        lo = max(reg.start_s, start_s)
        hi = min(regs[i + 1].start_s if i + 1 < len(regs) else end_s, end_s)
        expected += max(0, hi - lo) * (reg.num_gpus or 0)
    assert sum(i.num_gpus * (i.end_s - i.start_s) for i in found) == expected
    by_node: dict[str, list[NodeInterval]] = {}
    for item in found:
        assert start_s <= item.start_s < item.end_s <= end_s
        by_node.setdefault(item.node, []).append(item)
    for spans in by_node.values():
        for a, b in itertools.pairwise(spans):
            assert a.end_s <= b.start_s  # never overlapping, in time order
            assert a.end_s < b.start_s or a.num_gpus != b.num_gpus  # merged when equal
