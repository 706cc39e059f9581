"""The yield ledger against a real Slurm cluster (the slurm-lab), end to end through the CLI.

Every expected number is derived here from what Slurm itself printed (``sacct -X -D``,
``sacctmgr show event``, ``sinfo``, ``sreport``) by ``oracle.py``, never from gpuyield's output.
"""

from __future__ import annotations

import re
import shutil
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest

from tests.slurm import oracle
from tests.slurm.conftest import LabRun, gpuyield, ingest_capture, ledger_report, variant_format

pytestmark = pytest.mark.slurm

# The end state workload.sh drives each role to (TIMEOUT needs --time=1, hence the ~90 s workload).
EXPECTED_STATES = {
    "pt-main-1": ["NODE_FAIL"],
    "pt-main-2": ["COMPLETED"],
    "ft-main-1": ["TIMEOUT"],
    "ft-main-2": ["CANCELLED"],
    "exp-ok": ["COMPLETED"],
    "requeue-victim": ["REQUEUED", "COMPLETED"],
    "scav-victim": ["PREEMPTED"],
    "urgent": ["COMPLETED"],
    "timeout": ["TIMEOUT"],
    "fail-exit1": ["FAILED"],
    "to-cancel": ["CANCELLED"],
    "sweep": ["COMPLETED", "COMPLETED"],
    "div-wide": ["COMPLETED"],
    "nodefail-victim": ["NODE_FAIL"],
    "multi-node": ["COMPLETED"],
    "still-running": ["RUNNING"],
    "queued": ["PENDING"],
    "cpu-only": ["COMPLETED"],
}


# The report JSON shape of docs/contracts.md.
CONTRACT_KEYS = (
    "window", "installed_gpu_seconds", "categories", "subcategories", "yield", "utilization",
    "goodput", "rejected_rows", "jobs_without_gpu_count",
)  # fmt: skip
CONTRACT_SUBCATEGORIES = (
    "failed.hardware", "failed.software", "failed.oom", "failed.timeout",
    "down.planned", "down.unplanned", "cancelled.preempted", "cancelled.user",
)  # fmt: skip


def _close(actual: float, expected: Fraction | int) -> bool:
    return abs(Fraction(actual).limit_denominator(10**6) - expected) < Fraction(1, 10**6)


def _allocated(report: dict[str, Any]) -> float:
    cats = report["categories"]
    return float(sum(cats.values()) - cats["down"] - cats["idle"])


def _expected(lab_run: LabRun) -> oracle.Ledger:
    return oracle.expected_ledger(
        lab_run.jobs, lab_run.events, lab_run.gpus_per_node, lab_run.releases, lab_run.window
    )


def test_workload_reached_every_scenario(lab_run: LabRun) -> None:
    """Preconditions: without these end states and node events the other checks prove little."""
    states = {role: sorted(j.state for j in lab_run.runs_of(role)) for role in EXPECTED_STATES}
    assert states == {role: sorted(s) for role, s in EXPECTED_STATES.items()}
    events = {(e.node, e.state) for e in lab_run.events}
    assert events == {("n1", "DOWN"), ("n2", "DRAIN"), ("n4", "DOWN*")}
    assert all(e.end_s is not None for e in lab_run.events), "every node is back in service"
    requeued = lab_run.runs_of("requeue-victim")
    assert len({j.job_id for j in requeued}) == 1, "sacct -D: both runs under one job id"
    (pt1,), (pt2,) = lab_run.runs_of("pt-main-1"), lab_run.runs_of("pt-main-2")
    assert pt1.end_s is not None and pt2.start_s is not None and pt2.start_s >= pt1.end_s
    assert lab_run.gpus_per_node == {"n1": 8, "n2": 8, "n3": 8, "n4": 8}
    assert [j.num_gpus for j in lab_run.runs_of("cpu-only")] == [0]


def test_report_has_the_contract_shape(report: dict[str, Any]) -> None:
    """docs/contracts.md: every category and every subcategory key, zeros included."""
    assert set(CONTRACT_KEYS) <= set(report)
    assert list(report["categories"]) == list(oracle.CATEGORIES)
    missing = set(CONTRACT_SUBCATEGORIES) - set(report["subcategories"])
    assert not missing, f"subcategories missing from the report: {sorted(missing)}"


def test_allocated_equals_sacct_recomputation(lab_run: LabRun, report: dict[str, Any]) -> None:
    """Allocated = every category but down and idle = GPUs x in-window run time over the
    sacct -X -D rows (requeued runs included, the RUNNING job counted to the window end)."""
    expected = oracle.allocated_gpu_seconds(lab_run.jobs, lab_run.window)
    assert expected > 0
    assert _allocated(report) == expected, f"artifacts: {lab_run.keep}"


def test_allocated_equals_sreport_once_rolled_up(
    lab_run: LabRun, ledger_db: Path, report: dict[str, Any]
) -> None:
    """Rolled-up hours must match sreport exactly. A window inside the current hour has no
    sreport rows yet (slurmdbd rolls an hour up at the top of the next): there sacct is the
    reference."""
    if lab_run.rolled_hours is None:
        assert lab_run.sreport_rows == [], "an hour that has not ended cannot be rolled up"
        return
    start_s, end_s = lab_run.rolled_hours
    assert len(lab_run.sreport_rows) == 1, f"no rollup within the wait: {lab_run.sreport_rows}"
    row = lab_run.sreport_rows[0]
    # From the registration when the hour began before it: the store covers the capture from
    # there (conftest.ingest_capture), and sreport counts nothing before it either.
    sub_window = oracle.Window(start_s=max(start_s, lab_run.window.start_s), end_s=end_s)
    sub = ledger_report(
        ledger_db, "--since", oracle.format_time(sub_window.start_s),
        "--until", oracle.format_time(end_s),
    )  # fmt: skip
    assert int(row["Allocated"]) == oracle.allocated_gpu_seconds(lab_run.jobs, sub_window)
    assert _allocated(sub) == int(row["Allocated"])
    assert sub["installed_gpu_seconds"] == int(row["Reported"])
    # Down agrees too, because the workload has no MAINT reservation (22.05.8's rollup over-counts
    # Down next to one; ../shared/data/slurm-local/README.md).
    assert sub["categories"]["down"] == int(row["Down"])


def test_down_equals_node_events(lab_run: LabRun, report: dict[str, Any]) -> None:
    """Down = node GPUs x event time (clipped to the window) less GPUs jobs held there meanwhile;
    planned when the reason says maintenance (n2's drain), unplanned otherwise (n1 DOWN, n4 DOWN*)."""
    down = oracle.down_gpu_seconds(
        lab_run.events, lab_run.jobs, lab_run.gpus_per_node, lab_run.window
    )
    (n2_drain,) = [e for e in lab_run.events if e.node == "n2"]
    assert n2_drain.planned and n2_drain.end_s is not None
    assert down["planned"] == 8 * (n2_drain.end_s - n2_drain.start_s)
    assert down["unplanned"] >= 2 * 8, "n1 DOWN and n4 DOWN* last seconds to a minute"
    assert _close(report["categories"]["down"], down["planned"] + down["unplanned"])
    subs = report["subcategories"]
    assert _close(subs.get("down.unplanned", 0), down["unplanned"])
    assert _close(subs.get("down.planned", 0), down["planned"])


def test_conservation_and_installed(lab_run: LabRun, report: dict[str, Any]) -> None:
    """Categories sum to installed; installed = GPUs x (window end - cluster registration)."""
    duration_s = lab_run.window.end_s - lab_run.window.start_s
    installed = sum(lab_run.gpus_per_node.values()) * duration_s
    assert report["installed_gpu_seconds"] == installed
    assert _close(sum(report["categories"].values()), installed)
    assert report["window"] == {
        "start": oracle.format_time(lab_run.window.start_s) + "Z",
        "end": oracle.format_time(lab_run.window.end_s) + "Z",
    }


def test_lineage_restart_splits_lost_progress(lab_run: LabRun, report: dict[str, Any]) -> None:
    """pt-main-1 died NODE_FAIL and pt-main-2 continued the run: pt-main-1's GPU-seconds split into
    released and failed by elapsed mod checkpoint interval; ft-main-2 (scancel) into released and
    cancelled; ft-main-1's TIMEOUT is a planned chunk, all released."""
    (pt1,) = lab_run.runs_of("pt-main-1")
    (ft2,) = lab_run.runs_of("ft-main-2")
    interval = lab_run.releases.checkpoint_interval_s
    pt1_lost = pt1.num_gpus * (pt1.elapsed_s % interval["pt-main"])
    ft2_lost = ft2.num_gpus * (ft2.elapsed_s % interval["ft-main"])
    assert 0 < pt1_lost < pt1.gpu_seconds(lab_run.window) and 0 < ft2_lost < ft2.gpu_seconds(
        lab_run.window
    )
    lineage = [j for j in lab_run.jobs if j.run in lab_run.releases.lineage_runs]
    assert len(lineage) == 4  # pt-main-1, pt-main-2, ft-main-1, ft-main-2
    released = sum(j.gpu_seconds(lab_run.window) for j in lineage) - pt1_lost - ft2_lost
    assert report["categories"]["released"] == released
    diverged = lab_run.releases.diverged_runs
    others = [j for j in lab_run.jobs if j not in lineage and j.run not in diverged]
    failed_elsewhere = sum(
        j.gpu_seconds(lab_run.window) for j in others if j.state in oracle.NON_LINEAGE_FAILED
    )
    cancelled_elsewhere = sum(
        j.gpu_seconds(lab_run.window) for j in others if j.state in oracle.STOPPED_STATES
    )
    assert report["categories"]["failed"] == failed_elsewhere + pt1_lost
    assert report["categories"]["cancelled"] == cancelled_elsewhere + ft2_lost


def test_every_category_follows_the_contract(lab_run: LabRun, report: dict[str, Any]) -> None:
    """All eight categories equal the contract rules applied to sacct (no telemetry: overhead 0)."""
    expected = _expected(lab_run)
    got = {name: report["categories"][name] for name in oracle.CATEGORIES}
    wrong = {k: (got[k], float(v)) for k, v in expected.categories.items() if not _close(got[k], v)}
    assert not wrong, f"(ledger, expected) per category: {wrong}; artifacts: {lab_run.keep}"


def test_subcategories_follow_the_contract(lab_run: LabRun, report: dict[str, Any]) -> None:
    """failed.* (hardware: NODE_FAIL; software; timeout; oom) and cancelled.* (preempted, user)."""
    expected = _expected(lab_run).subcategories
    assert expected["failed.software"] > 0 and expected["failed.timeout"] > 0
    assert expected["cancelled.preempted"] > 0 and expected["failed.hardware"] > 0
    subs = report["subcategories"]
    wrong = {
        k: (subs.get(k, 0), float(expected.get(k, 0)))
        for k in set(expected) | set(subs)
        if not _close(subs.get(k, 0), expected.get(k, Fraction(0)))
    }
    assert not wrong, f"(ledger, expected) per subcategory: {wrong}"


def _sub_window(lab_run: LabRun, cut: str) -> oracle.Window:
    whole = lab_run.window
    if cut == "trimmed":
        return oracle.Window(start_s=whole.start_s + 10, end_s=whole.end_s - 10)
    if cut == "lineage-loss-tail":
        (pt1,) = lab_run.runs_of("pt-main-1")
        assert pt1.end_s is not None
        return oracle.Window(start_s=pt1.end_s - 2, end_s=pt1.end_s + 30)
    (n4_down,) = [e for e in lab_run.events if e.node == "n4"]
    assert n4_down.end_s is not None
    return oracle.Window(start_s=n4_down.start_s + 5, end_s=n4_down.end_s - 5)


@pytest.mark.parametrize("cut", ["trimmed", "lineage-loss-tail", "inside-n4-down"])
def test_sub_windows_follow_the_contract(lab_run: LabRun, ledger_db: Path, cut: str) -> None:
    """``report --since/--until`` re-clips everything: jobs, events, and a lineage job's lost
    progress (taken from its end, a window from 2 s before pt-main-1 ends holds 2 s of it)."""
    window = _sub_window(lab_run, cut)
    expected = oracle.expected_ledger(
        lab_run.jobs, lab_run.events, lab_run.gpus_per_node, lab_run.releases, window
    )
    got = ledger_report(
        ledger_db,
        "--since",
        oracle.format_time(window.start_s),
        "--until",
        oracle.format_time(window.end_s),
    )
    assert got["installed_gpu_seconds"] == expected.installed_gpu_seconds
    subs = got["subcategories"]
    wrong = {
        k: (got["categories"].get(k), float(v))
        for k, v in expected.categories.items()
        if not _close(got["categories"].get(k, 0), v)
    } | {
        k: (subs.get(k, 0), float(expected.subcategories.get(k, 0)))
        for k in set(expected.subcategories) | set(subs)
        if not _close(subs.get(k, 0), expected.subcategories.get(k, Fraction(0)))
    }
    assert not wrong, f"(ledger, expected) in {cut} window: {wrong}"


def test_reingest_changes_nothing(lab_run: LabRun, ledger_db: Path, report: dict[str, Any]) -> None:
    """Ingesting the same capture again (into a copy of the DB) leaves every number as it was."""
    again = lab_run.keep / "reingested.duckdb"
    shutil.copyfile(ledger_db, again)
    ingest_capture(lab_run, again)
    second = ledger_report(again)
    numbers = ("installed_gpu_seconds", "categories", "subcategories", "rejected_rows")
    assert {k: second[k] for k in numbers} == {k: report[k] for k in numbers}


def test_ratios_and_counters(report: dict[str, Any]) -> None:
    """yield, utilization, goodput from its totals; nothing rejected; all jobs had GPUs."""
    cats, installed = report["categories"], report["installed_gpu_seconds"]
    allocated = _allocated(report)
    assert report["yield"] == pytest.approx(cats["released"] / installed)
    assert report["utilization"] == pytest.approx(allocated / (installed - cats["down"]))
    assert report["goodput"] == pytest.approx(cats["released"] / allocated)
    assert report["rejected_rows"] == 0
    assert report["jobs_without_gpu_count"] == 0


@pytest.mark.parametrize(
    ("sacct", "events", "flags", "nodes"),
    [
        ("sacct-p.psv", "events-p.psv", (), None),
        ("sacct-epoch.psv", "events-epoch.psv", (), None),
        # The inventory as the test's own `sinfo -h -N -o '%N|%G'` printed it (no header).
        ("sacct-p-noheader.psv", None, ("--noheader",), "sinfo-gpus.txt"),
        ("sacct-berlin.psv", "events-berlin.psv", ("--tz", "Europe/Berlin"), None),
    ],
)
def test_other_ways_to_print_the_capture_give_the_same_ledger(
    lab_run: LabRun,
    report: dict[str, Any],
    sacct: str,
    events: str | None,
    flags: tuple[str, ...],
    nodes: str | None,
) -> None:
    """``sacct -p`` (a separator ends each line), SLURM_TIME_FORMAT=%s (epoch seconds) and
    ``--noheader`` output of the same cluster and window: every number as from the main capture."""
    own = lab_run.keep / "own"
    text = (own / sacct).read_text()
    if "-p" in sacct:  # the variant is what it claims to be
        assert all(line.endswith("|") for line in text.splitlines() if line.count("|") > 5)
    if "berlin" in sacct:  # one hour ahead of the main capture's UTC times (CET in November)
        main = (lab_run.capture / "sacct-X-D-wide.psv").read_text().splitlines()[1].split("|")
        here = text.splitlines()[1].split("|")
        assert main[0] == here[0] and main[14] != here[14]  # same job, Start printed otherwise
        assert oracle.parse_time(here[14]) == oracle.parse_time(main[14]) + 3600
    if "epoch" in sacct:
        assert re.search(r"\b\d{10}\b", text)
        assert not re.search(r"\d{4}-\d\d-\d\dT\d\d:", text)
    db = lab_run.keep / f"variant-{sacct}.duckdb"
    fields = ("--fields", variant_format(lab_run.capture)) if "--noheader" in flags else ()
    gpuyield(
        "ingest", "slurm", "--db", db, "--sacct", own / sacct, *flags, *fields,
        "--events", own / events if events else lab_run.capture / "sacctmgr-event-format.psv",
        "--nodes", own / nodes if nodes else lab_run.capture / "scontrol-show-nodes-oneliner.txt",
        "--manifest", lab_run.manifest,
        # With an offset: --since/--until are otherwise read in --tz, like the times in the files.
        "--since", oracle.format_time(lab_run.window.start_s) + "+00:00",
        "--until", oracle.format_time(lab_run.window.end_s) + "+00:00",
    )  # fmt: skip
    again = ledger_report(db)
    numbers = ("window", "installed_gpu_seconds", "categories", "subcategories", "rejected_rows")
    assert {k: again[k] for k in numbers} == {k: report[k] for k in numbers}


def test_a_cluster_resized_during_the_capture(lab_run: LabRun) -> None:
    """Grown to 6 nodes, jobs on the new ones, shrunk back: the current inventory lacks n5 and n6,
    yet their jobs count, and installed follows each registration's GPUs over its own span."""
    resized = lab_run.resized
    assert resized is not None
    events = (resized.capture / "events.psv").read_text()
    registrations = [line for line in events.splitlines() if "Cluster Registered TRES" in line]
    assert [r.split("|")[1] for r in registrations][-3:] == ["n[1-4]", "n[1-6]", "n[1-4]"]
    assert "n5" not in (resized.capture / "nodes.txt").read_text()
    registered_s, node_events = oracle.parse_events(events)
    assert registered_s is not None
    db = lab_run.keep / "resized.duckdb"
    gpuyield(
        "ingest", "slurm", "--db", db,
        "--sacct", resized.capture / "sacct.psv",
        "--events", resized.capture / "events.psv",
        "--nodes", resized.capture / "nodes.txt",
        "--reservations", resized.capture / "reservations.psv",
        # sacct's -S was 6 h before the end, before the registration: covered from there.
        "--since", oracle.format_time(registered_s),
        "--until", oracle.format_time(resized.end_s),
    )  # fmt: skip
    report = ledger_report(db)
    window = oracle.Window(start_s=registered_s, end_s=resized.end_s)
    assert report["window"]["start"] == oracle.format_time(registered_s) + "Z"
    jobs = oracle.parse_sacct((resized.capture / "sacct.psv").read_text())
    grown = [j for j in jobs if j.job_id in resized.job_ids]
    assert {n for j in grown for n in j.nodes} == {"n5", "n6"}
    assert _close(report["installed_gpu_seconds"], oracle.registered_gpu_seconds(events, window))
    assert _close(_allocated(report), oracle.allocated_gpu_seconds(jobs, window))
    assert _close(sum(report["categories"].values()), Fraction(report["installed_gpu_seconds"]))
    # n3's maintenance reservation is planned down time, on top of the node events'.
    maintenance = oracle.parse_maint_reservations(
        (resized.capture / "reservations.psv").read_text()
    )
    assert [e.node for e in maintenance] == ["n3"]
    assert not [e for e in node_events if e.node == "n3"]
    gpus = {f"n{i}": 8 for i in range(1, 7)}
    down = oracle.down_gpu_seconds([*node_events, *maintenance], jobs, gpus, window)
    subs = report["subcategories"]
    assert _close(subs["down.planned"], down["planned"]) and down["planned"] >= 8 * 6
    assert _close(subs["down.unplanned"], down["unplanned"])
