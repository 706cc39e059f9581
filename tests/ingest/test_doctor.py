"""``gpuyield doctor`` on a recorded Slurm: what silently ruins the numbers, and the fix for each."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from gpuyield.ingest.collect import collect
from gpuyield.ingest.doctor import Status, run_doctor
from gpuyield.ingest.slurm import SlurmInputs, ingest_slurm
from tests.ingest.recorded_slurm import CONFIG, RecordedSlurm

SINCE_S = 1_796_032_800  # 2026-11-30T10:00:00Z
UNTIL_S = 1_796_036_400


def _status(report: object, name: str) -> tuple[Status, str]:
    check = next(c for c in report.checks if c.name == name)  # type: ignore[attr-defined]
    return check.status, check.fix


def test_a_healthy_setup_passes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TZ", "UTC")
    monkeypatch.delenv("SLURM_TIME_FORMAT", raising=False)
    slurm = RecordedSlurm(tmp_path / "slurm")
    db = tmp_path / "db.duckdb"
    collect(db, since_s=SINCE_S, until_s=UNTIL_S, slurm_bin=slurm.bin,
            manifest=Path(__file__).resolve().parents[2] / "examples/slurm-lab/manifest.toml")  # fmt: skip
    report = run_doctor(db=db, slurm_bin=slurm.bin, now_s=UNTIL_S + 60)
    assert not report.failed, report
    assert {c.status for c in report.checks} == {Status.OK}


def test_missing_job_comments_and_gpu_accounting_fail_with_the_fix(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SLURM_TIME_FORMAT", "relative")
    broken = CONFIG.replace("job_comment", "(null)").replace(",gres/gpu", "")
    slurm = RecordedSlurm(tmp_path / "slurm", config=broken)
    report = run_doctor(slurm_bin=slurm.bin)
    assert report.failed
    status, fix = _status(report, "job comments stored")
    assert status is Status.FAIL and "AccountingStoreFlags=job_comment" in fix
    status, fix = _status(report, "GPUs accounted")
    assert status is Status.FAIL and "gres/gpu" in fix
    assert _status(report, "SLURM_TIME_FORMAT")[0] is Status.FAIL


def test_slurmdbd_down_and_coverage_gaps(tmp_path: Path) -> None:
    slurm = RecordedSlurm(tmp_path / "slurm")
    db = tmp_path / "db.duckdb"
    collect(db, since_s=SINCE_S, until_s=UNTIL_S, slurm_bin=slurm.bin)
    # A capture of a later hour, ingested by hand: the hour between was never captured.
    later = tmp_path / "later.psv"
    later.write_text((slurm.out / "sacct").read_text())
    ingest_slurm(db, SlurmInputs(sacct=later), since_s=UNTIL_S + 3600, until_s=UNTIL_S + 7200)
    slurm.down()
    proc = subprocess.run(
        [sys.executable, "-m", "gpuyield", "doctor", "--db", str(db), "--slurm-bin",
         str(slurm.bin), "--json"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert proc.returncode == 3  # the checks ran, one failed (1 is an error)
    checks = {c["name"]: c for c in json.loads(proc.stdout)["checks"]}
    assert checks["slurmdbd answers"]["status"] == "fail"
    assert "slurmdbd" in checks["slurmdbd answers"]["fix"]
    assert checks["coverage"]["status"] == "warn"
    assert "gaps: lab 2026-11-30T11:00:00Z .. 2026-11-30T12:00:00Z" in checks["coverage"]["detail"]
    assert "gpuyield collect --since" in checks["coverage"]["fix"]
