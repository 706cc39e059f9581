"""The oracle itself, checked against numbers real Slurm printed (no lab needed).

``../shared/data/slurm-local`` is a captured lab session (see its README): sreport's rolled-up
Allocated and Reported for 10:00-11:00, and the README's hand count of node-event time, are
independent of this code, so they pin the oracle before it is used to judge the ledger.
"""

from __future__ import annotations

import os
from fractions import Fraction
from pathlib import Path

import pytest

from tests.slurm import oracle
from tests.slurm.lab import REPO_ROOT

DATA = (REPO_ROOT / ".." / "shared" / "data" / "slurm-local").resolve()
_HOUR_START = oracle.parse_time("2026-11-30T10:00:00")
_HOUR_END = oracle.parse_time("2026-11-30T11:00:00")
# README: "Down 2944 is NOT the sum of the node events (244 node-seconds x 8 = 1952)".
_EVENT_DOWN_GPU_S = 244 * 8


@pytest.fixture(scope="module")
def data_dir() -> Path:
    if not (DATA / "sacct-X-D-wide.psv").is_file():
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI=true but the real Slurm captures are missing: {DATA}")
        pytest.skip(f"real Slurm captures not here: {DATA}")
    return DATA


def _sreport_gpu_row(path: Path) -> dict[str, str]:
    lines = path.read_text().splitlines()
    header = lines.index("Cluster|TRES Name|Allocated|Down|PLND Down|Idle|Planned|Reported")
    return dict(zip(lines[header].split("|"), lines[header + 1].split("|"), strict=True))


def _window(data_dir: Path) -> tuple[oracle.Window, list[oracle.NodeEvent]]:
    registered_s, events = oracle.parse_events((data_dir / "sacctmgr-event-format.psv").read_text())
    assert registered_s is not None and _HOUR_START is not None and _HOUR_END is not None
    return oracle.Window(start_s=max(_HOUR_START, registered_s), end_s=_HOUR_END), events


def test_multiline_records_are_joined(data_dir: Path) -> None:
    """sacct -P does not quote: jobs 1 and 12 span several lines in the wide file only."""
    wide = oracle.psv_records((data_dir / "sacct-X-D-wide.psv").read_text())
    narrow = (data_dir / "sacct-X-D-gpucheck.psv").read_text().splitlines()[1:]
    assert [r["JobID"] for r in wide] == [line.split("|")[0] for line in narrow]
    assert "\n" in next(r["SubmitLine"] for r in wide if r["JobID"] == "12")


def test_allocated_equals_rolled_up_sreport(data_dir: Path) -> None:
    window, _ = _window(data_dir)
    jobs = oracle.parse_sacct((data_dir / "sacct-X-D-wide.psv").read_text())
    row = _sreport_gpu_row(data_dir / "sreport-cluster-utilization-gpu-seconds.txt")
    assert oracle.allocated_gpu_seconds(jobs, window) == int(row["Allocated"]) == 11750


def test_installed_equals_sreport_reported(data_dir: Path) -> None:
    window, _ = _window(data_dir)
    row = _sreport_gpu_row(data_dir / "sreport-cluster-utilization-gpu-seconds.txt")
    gpus = {f"n{i}": 8 for i in range(1, 5)}
    assert oracle.installed_gpu_seconds(gpus, window) == int(row["Reported"])


def test_down_equals_event_time(data_dir: Path) -> None:
    window, events = _window(data_dir)
    jobs = oracle.parse_sacct((data_dir / "sacct-X-D-wide.psv").read_text())
    down = oracle.down_gpu_seconds(events, jobs, {f"n{i}": 8 for i in range(1, 5)}, window)
    assert down == {"planned": 0, "unplanned": _EVENT_DOWN_GPU_S}


def test_ledger_conserves_and_charges_lineage_loss(data_dir: Path) -> None:
    """Lineage job 24 (NODE_FAIL after 6 s, 2 GPUs) with a 4 s interval loses 2 s x 2 GPUs."""
    window, events = _window(data_dir)
    jobs = oracle.parse_sacct((data_dir / "sacct-X-D-wide.psv").read_text())
    gpus = {f"n{i}": 8 for i in range(1, 5)}
    releases = oracle.Releases(lineage_runs=frozenset({"dn1"}), checkpoint_interval_s={"dn1": 4})
    ledger = oracle.expected_ledger(jobs, events, gpus, releases, window)
    assert sum(ledger.categories.values()) == ledger.installed_gpu_seconds
    # dn1: NODE_FAIL run 6 s x 2 GPUs, rerun COMPLETED 8 s x 2 GPUs.
    assert ledger.categories["released"] == (6 - 2) * 2 + 8 * 2


@pytest.mark.parametrize(
    ("text", "names"),
    [
        ("n1", ("n1",)),
        ("n[1-2]", ("n1", "n2")),
        ("n[1-2,4],gpu07", ("n1", "n2", "n4", "gpu07")),
        ("node[08-10]", ("node08", "node09", "node10")),
        ("None assigned", ()),
    ],
)
def test_expand_hostlist(text: str, names: tuple[str, ...]) -> None:
    assert oracle.expand_hostlist(text) == names


def test_lineage_without_interval_loses_the_whole_job(data_dir: Path) -> None:
    """Contract: no checkpoint interval known -> the whole failed run is lost progress."""
    window, events = _window(data_dir)
    jobs = oracle.parse_sacct((data_dir / "sacct-X-D-wide.psv").read_text())
    gpus = {f"n{i}": 8 for i in range(1, 5)}
    releases = oracle.Releases(lineage_runs=frozenset({"dn1"}))
    ledger = oracle.expected_ledger(jobs, events, gpus, releases, window)
    assert ledger.categories["released"] == 8 * 2  # only the COMPLETED rerun


def test_timeout_is_not_relabelled_by_node_events(data_dir: Path) -> None:
    """Job 7 (TIMEOUT on n3) ended 10:43:17, 113 s before n3's drain: still timeout, not hardware;
    FAILED job 9 on n4 (10:42:20) had n4's DOWN* start 57 s later: hardware."""
    _, events = _window(data_dir)
    jobs = {j.job_id: j for j in oracle.parse_sacct((data_dir / "sacct-X-D-wide.psv").read_text())}
    assert oracle._failed_cause(jobs["7"], events) == "timeout"
    assert oracle._failed_cause(jobs["9"], events) == "hardware"


def test_non_positive_interval_is_refused() -> None:
    with pytest.raises(oracle.OracleError, match="checkpoint_interval_s"):
        oracle.Releases(lineage_runs=frozenset({"pt"}), checkpoint_interval_s={"pt": 0})


def test_fraction_spread_over_nodes() -> None:
    job = oracle.JobRun(
        job_id="1", name="x", state="COMPLETED", start_s=0, end_s=10, elapsed_s=10,
        num_gpus=3, nodes=("n1", "n2"), run=None,
    )  # fmt: skip
    assert job.gpus_on_node() == Fraction(3, 2)
