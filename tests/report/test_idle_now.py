"""`gpuyield idle-now`: the jobs holding GPUs measured idle, checked against the raw samples."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpuyield.cli import app
from gpuyield.report.idle_now import NOW_WINDOW_S, build_idle_now, idle_now_json_text
from gpuyield.store import connect
from tests.ledger.test_utilization import FIXTURE, STEP_S, UNTIL_S, _epoch, fixture_db, slurm_db

WINDOWS_S = (NOW_WINDOW_S, 15 * 60, 3600, 2 * 3600)


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return fixture_db(tmp_path_factory.mktemp("idle-now"))


def _jobs() -> dict[str, tuple[int, int, int, str, str]]:
    """JobID -> (start, end, GPUs, node, account), read from the sacct file."""
    jobs = {}
    for line in (FIXTURE / "sacct.psv").read_text().splitlines()[1:]:
        f = line.split("|")
        end = UNTIL_S if f[9] == "Unknown" else _epoch(f[9])
        gpus = int(f[11].split("gres/gpu=")[1].split(",")[0])
        jobs[f[1]] = (_epoch(f[8]), end, gpus, f[12], f[4])
    return jobs


def independent_idle_gpus(start_s: int, end_s: int) -> dict[str, float]:
    """Per job, GPU-seconds of its samples below 1% inside [start_s, end_s), over the window's
    seconds: from the raw files alone. A labelled sample is its job's; an unlabelled one is the
    job's that held every GPU of its node (8) at the sample's midpoint; others are nobody's."""
    jobs = _jobs()
    idle: dict[str, float] = {}
    document = json.loads((FIXTURE / "dcgm_query_range.json").read_text())
    for series in document["data"]["result"]:
        labels = series["metric"]
        if labels["__name__"] != "DCGM_FI_DEV_GPU_UTIL":
            continue
        node = labels["Hostname"].split(".")[0]
        for t, value in series["values"]:
            if float(value) >= 1.0:
                continue
            a, b = max(t - STEP_S, start_s), min(t, end_s)
            if b <= a:
                continue
            owner = labels.get("hpc_job")
            if owner is None:
                mid = (a + b) / 2
                whole = [j for j, (s, e, g, n, _) in jobs.items() if n == node and g == 8 and s <= mid < e]  # fmt: skip
                owner = whole[0] if whole else None
            if owner is None:
                continue
            s, e = jobs[owner][:2]
            seconds = max(0.0, min(b, e) - max(a, s))
            if seconds > 0:
                idle[owner] = idle.get(owner, 0.0) + seconds
    return {job: gpu_s / (end_s - start_s) for job, gpu_s in idle.items()}


@pytest.mark.parametrize("window_s", WINDOWS_S)
def test_idle_jobs_match_the_raw_samples(db: Path, window_s: int) -> None:
    result = build_idle_now(db, window_s=window_s)
    start_s = UNTIL_S - window_s
    assert result.measured and result.note is None
    assert (result.window_start_s, result.window_end_s) == (start_s, UNTIL_S)
    expected = independent_idle_gpus(start_s, UNTIL_S)
    assert expected, "the fixture has idle samples in every window tested"
    assert {j.job_id for j in result.jobs} == set(expected)
    jobs = _jobs()
    for job in result.jobs:
        assert job.idle_gpus == pytest.approx(expected[job.job_id], abs=1e-9), job
        s, e, gpus, node, account = jobs[job.job_id]
        held = gpus * max(0, min(e, UNTIL_S) - max(s, start_s)) / window_s
        assert job.allocated_gpus == pytest.approx(held)
        assert job.idle_share == pytest.approx(expected[job.job_id] / held)
        assert (job.nodes, job.account) == (node, account)
    assert [j.idle_gpus for j in result.jobs] == sorted(
        (j.idle_gpus for j in result.jobs), reverse=True
    )
    assert result.idle_gpus == pytest.approx(sum(expected.values()))
    per_account: dict[str, float] = {}
    for job_id, gpus in expected.items():
        per_account[jobs[job_id][4]] = per_account.get(jobs[job_id][4], 0.0) + gpus
    assert {a.account: a.idle_gpus for a in result.accounts} == pytest.approx(per_account)


def test_top_keeps_the_most_idle_jobs_and_counts_the_rest(db: Path) -> None:
    every = build_idle_now(db, window_s=2 * 3600)
    assert every.job_count >= 2
    cut = build_idle_now(db, window_s=2 * 3600, top=1)
    assert cut.jobs == every.jobs[:1]
    assert cut.job_count == every.job_count and cut.idle_gpus == every.idle_gpus


def test_without_samples_utilization_is_not_measured(tmp_path: Path) -> None:
    empty = tmp_path / "empty.duckdb"
    connect(empty).close()
    for store in (slurm_db(tmp_path / "slurm"), empty):
        result = build_idle_now(store)
        assert not result.measured
        assert result.note is not None and "not measured" in result.note
        assert result.jobs == () and result.accounts == () and result.job_count == 0


def test_cli_json_round_trips_and_the_table_names_the_jobs(db: Path) -> None:
    runner = CliRunner()
    out = runner.invoke(app, ["report", "idle-now", "--db", str(db), "--window", "1h", "--json"])
    assert out.exit_code == 0, out.output
    assert json.loads(out.output) == build_idle_now(db, window_s=3600).to_dict()
    assert out.output == idle_now_json_text(build_idle_now(db, window_s=3600)) + "\n"
    table = runner.invoke(app, ["report", "idle-now", "--db", str(db), "--window", "1h"])
    assert table.exit_code == 0, table.output
    for job in build_idle_now(db, window_s=3600).jobs:
        assert job.job_id in table.output and str(job.user) in table.output


def test_cli_bad_window_and_no_samples(tmp_path: Path) -> None:
    runner = CliRunner()
    bad = runner.invoke(
        app, ["report", "idle-now", "--db", str(tmp_path / "x.duckdb"), "--window", "soon"]
    )
    assert bad.exit_code == 2 and "'--window'" in bad.output and "not a duration" in bad.output
    zero = runner.invoke(
        app, ["report", "idle-now", "--db", str(tmp_path / "x.duckdb"), "--window", "0s"]
    )
    assert zero.exit_code == 1 and "--window must be 1 second or more" in zero.output
    negative = runner.invoke(
        app, ["report", "idle-now", "--db", str(tmp_path / "x.duckdb"), "--top", "-1"]
    )
    assert negative.exit_code == 2 and "'--top'" in negative.output
    assert "Traceback" not in zero.output + negative.output
    plain = slurm_db(tmp_path)
    out = runner.invoke(app, ["report", "idle-now", "--db", str(plain), "--json"])
    assert out.exit_code == 0, out.output
    assert json.loads(out.output)["measured"] is False
    text = runner.invoke(app, ["report", "idle-now", "--db", str(plain)])
    assert "not measured" in text.output
