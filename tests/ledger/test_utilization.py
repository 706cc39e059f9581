"""Utilization samples in the ledger: allocated GPUs measured idle move to idle.allocated."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpuyield.ingest.slurm import SlurmInputs, ingest_slurm
from gpuyield.ingest.utilization import ingest_utilization
from gpuyield.ledger import compute_ledger
from gpuyield.ledger.ledger import backend_for
from gpuyield.report.breakdown import breakdown
from gpuyield.report.summary import build_report
from gpuyield.store import connect
from tests.ledger.timeline import HOUR_S, T0_S

FIXTURE = Path(__file__).parents[1] / "ingest" / "fixtures" / "utilization"
UNTIL_S = T0_S + 2 * HOUR_S
STEP_S = 60


def slurm_db(tmp_path: Path) -> Path:
    tmp_path.mkdir(parents=True, exist_ok=True)
    db = tmp_path / "db.duckdb"
    inputs = SlurmInputs(
        sacct=FIXTURE / "sacct.psv", events=FIXTURE / "events.psv", nodes=FIXTURE / "nodes.txt"
    )
    ingest_slurm(db, inputs, until_s=UNTIL_S)
    return db


def fixture_db(tmp_path: Path) -> Path:
    db = slurm_db(tmp_path)
    ingest_utilization(db, prom_json=[FIXTURE / "dcgm_query_range.json"], step_s=STEP_S)
    return db


def independent_idle_by_job() -> dict[str, float]:
    """Per job, GPU-seconds of samples below 1% that the job held: from the raw files alone.

    A labelled sample is its job's; an unlabelled one is the job's that held every GPU of its
    node at the time (here only job 101, n1, whole node); the interval is [t - 60, t) clipped
    to the job's run.
    """
    jobs = {}
    for line in (FIXTURE / "sacct.psv").read_text().splitlines()[1:]:
        f = line.split("|")
        start = _epoch(f[8])
        end = UNTIL_S if f[9] == "Unknown" else _epoch(f[9])
        gpus, node = int(f[11].split("gres/gpu=")[1].split(",")[0]), f[12]
        jobs[f[1]] = (start, end, gpus, node)
    idle: dict[str, float] = {}
    document = json.loads((FIXTURE / "dcgm_query_range.json").read_text())
    for series in document["data"]["result"]:
        labels = series["metric"]
        if labels["__name__"] != "DCGM_FI_DEV_GPU_UTIL":
            continue
        node = labels["Hostname"].split(".")[0]
        for t, value in series["values"]:
            if float(value) >= 1.0:  # percent: 1% is the threshold
                continue
            a, b = t - STEP_S, t
            owner = labels.get("hpc_job")
            if owner is None:
                whole = [
                    j
                    for j, (s, e, g, n) in jobs.items()
                    if n == node and g == 8 and s <= (a + b) / 2 < e
                ]
                owner = whole[0] if whole else None
            if owner is None:
                continue
            s, e, _, _ = jobs[owner]
            idle[owner] = idle.get(owner, 0.0) + max(0.0, min(b, e) - max(a, s))
    return idle


def _epoch(text: str) -> int:
    from datetime import UTC, datetime

    return int(datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp())


def test_fixture_idle_per_job_matches_the_raw_samples(tmp_path: Path) -> None:
    db = fixture_db(tmp_path)
    con = connect(db, read_only=True)
    try:
        backend = backend_for(con)
        ledger = compute_ledger(backend, keep_segments=True)
        by_job = breakdown(ledger, "job", top=0, backend=backend)
    finally:
        con.close()
    expected = independent_idle_by_job()
    got = {r.key: r.categories["idle"] for r in by_job.rows if r.key != "(not allocated)"}
    assert set(expected) == {"101", "102", "103"}
    for job, seconds in expected.items():
        assert got[job] == pytest.approx(seconds, abs=1e-6), job
    assert ledger.subcategories["idle.allocated"] == pytest.approx(sum(expected.values()))
    assert sum(ledger.categories.values()) == pytest.approx(ledger.installed_gpu_seconds)
    total = sum(r.total_gpu_seconds for r in by_job.rows)
    assert total == pytest.approx(ledger.installed_gpu_seconds)


def test_fixture_counts_what_it_cannot_attribute(tmp_path: Path) -> None:
    con = connect(fixture_db(tmp_path), read_only=True)
    try:
        ledger = compute_ledger(backend_for(con))
    finally:
        con.close()
    util = ledger.utilization
    assert util is not None
    s = util.samples
    # 16 GPUs x 120 minutes, less n1 GPU 3's 10-minute exporter gap.
    assert s.total == 16 * 120 - 10
    assert s.total == s.by_job_label + s.by_whole_node + s.unallocated + s.unattributed
    # n2 GPUs 4-7 in minutes 10-20 and GPUs 0-3 after minute 70 (job 103 holds the other four):
    # unlabelled samples on a shared node are not guessed.
    assert s.unattributed == 4 * 10 + 4 * 50
    # Job 101's whole node, less the gap; labelled: 102 (4 x 60) and 103 (4 x 100).
    assert s.by_whole_node == 8 * 90 - 10
    assert s.by_job_label == 4 * 60 + 4 * 100
    experiment = util.activity["experiment"]
    # The gap is unmeasured, not idle: 101 and 103 held 8 x 90 + 4 x 100 GPU-minutes.
    assert experiment.measured_gpu_seconds == pytest.approx((8 * 90 - 10 + 4 * 100) * 60)
    # The fixture's tensor ratio is the utilization percentage times 0.004 (0.4 x the fraction).
    assert experiment.active_share is not None
    assert experiment.tensor_share == pytest.approx(0.4 * experiment.active_share, rel=1e-5)


def test_idle_moves_out_of_the_jobs_category_and_subcategory(tmp_path: Path) -> None:
    plain = build_report(slurm_db(tmp_path / "plain"))
    measured = build_report(fixture_db(tmp_path / "measured"))
    moved = measured.subcategories["idle.allocated"]
    assert moved > 0
    assert measured.installed_gpu_seconds == plain.installed_gpu_seconds
    failed_idle = 4 * 30 * 60  # job 102: four GPUs at 0% from minute 40 to its end at 70
    assert plain.categories["failed"] - measured.categories["failed"] == failed_idle
    assert (
        plain.subcategories["failed.software"] - measured.subcategories["failed.software"]
        == failed_idle
    )
    assert measured.categories["idle"] - plain.categories["idle"] == pytest.approx(moved)


def test_without_samples_nothing_changes(tmp_path: Path) -> None:
    db = slurm_db(tmp_path)
    data = build_report(db).to_dict()
    assert "gpu_activity" not in data
    assert "idle.allocated" not in data["subcategories"]
    assert "gpu_activity" not in data["figures"]


def _jobstats_comment(nodes: dict[str, dict[str, float]]) -> str:
    import base64
    import gzip

    document = {"gpus": True, "nodes": {n: {"gpu_utilization": u} for n, u in nodes.items()}}
    return "JS1:" + base64.b64encode(gzip.compress(json.dumps(document).encode())).decode()


def test_slurm_usage_and_jobstats_summaries_mark_whole_runs_idle(tmp_path: Path) -> None:
    db = slurm_db(tmp_path)
    summary = _jobstats_comment({"n1": {"0": 0.4, **{str(g): 91.0 for g in range(1, 8)}}})
    usage = tmp_path / "usage.psv"
    usage.write_text(
        "JobID|JobIDRaw|Start|End|NodeList|AllocTRES|TRESUsageInAve|AdminComment\n"
        f"101|101|2026-01-01T00:00:00|2026-01-01T01:30:00|n1|cpu=1,gres/gpu=8,node=1||{summary}\n"
        "102|102|2026-01-01T00:10:00|2026-01-01T01:10:00|n2|cpu=1,gres/gpu=4,node=1||\n"
        "102.0|102.0|2026-01-01T00:10:00|2026-01-01T01:10:00|n2|cpu=1,gres/gpu=4,node=1|"
        "cpu=00:00:01,gres/gpumem=0,gres/gpuutil=0|\n"
        "103|103|2026-01-01T00:20:00|Unknown|n2|cpu=1,gres/gpu=4,node=1||\n"
    )
    results = ingest_utilization(db, sacct_usage=[usage])
    assert results[0].samples == 8 + 4
    con = connect(db, read_only=True)
    try:
        ledger = compute_ledger(backend_for(con))
    finally:
        con.close()
    # Job 101's GPU 0 averaged 0.4% over its 90 minutes; job 102's step used its GPUs at 0%.
    assert ledger.subcategories["idle.allocated"] == 90 * 60 + 4 * 60 * 60
    assert sum(ledger.categories.values()) == pytest.approx(ledger.installed_gpu_seconds)
    util = ledger.utilization
    assert util is not None and util.samples.total == 12 and util.samples.unattributed == 0


def test_a_conservation_error_names_the_category_and_by_how_much() -> None:
    """Were a category ever below zero (issue 24's 15 s captures made cancelled -13,320), the
    error says which and by how much, not only that the sum is off."""
    from gpuyield.errors import ConservationError
    from gpuyield.ledger.checks import check_conservation

    categories = {"down": 0.0, "idle": 101_520.0, "cancelled": -13_320.0, "released": 27_000.0}
    with pytest.raises(ConservationError) as caught:
        check_conservation(115_200.0, categories, {})
    assert "category cancelled is -13320.000 GPU-seconds, 13320.000 below zero" in str(caught.value)
    with pytest.raises(ConservationError) as caught:
        check_conservation(115_200.0, {"idle": 115_200.0}, {"failed.oom": -5.0})
    assert "subcategory failed.oom is -5.000 GPU-seconds" in str(caught.value)
    with pytest.raises(ConservationError) as caught:
        check_conservation(115_200.0, {"idle": 115_000.0, "released": 100.0}, {})
    assert "-100.000 off" in str(caught.value)
