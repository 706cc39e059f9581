"""Coverage: time whose accounting was never captured is never idle (issue 13).

The case that motivated it: a capture started mid-window (``sacct -S`` after the cluster's
registration) while the events go back to the registration. Counting the uncaptured hours as idle
read 52% idle where 17% was true; the report must cover only captured time.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuyield.cli._common import as_flag
from gpuyield.ingest.slurm import SlurmInputs, ingest_slurm
from gpuyield.ledger.coverage import CoverageGapError
from gpuyield.report.summary import build_report
from tests.ledger.timeline import HOUR_S, T0_S, Cluster, Job

# Truth: 2 nodes x 8 GPUs from T0. Job "early" ran [0, 1.5 h) on n2, before the capture started
# at 2 h; "long" ran [1.8 h, 4 h) on n1 and "late" [2.5 h, 3.5 h) on n2, both in the capture.
CAPTURE_START_S = 2 * HOUR_S
CAPTURE_END_S = 4 * HOUR_S
LONG_START_S = int(1.8 * HOUR_S)
CAPTURED = [
    Job(2, LONG_START_S, CAPTURE_END_S, nodes="n1", state="COMPLETED"),
    Job(3, int(2.5 * HOUR_S), int(3.5 * HOUR_S), nodes="n2"),
]


def _ingest(tmp_path: Path, *, since_s: int | None) -> tuple[Path, tuple[str, ...]]:
    files = Cluster(jobs=CAPTURED).write(tmp_path / "in")
    db = tmp_path / "db.duckdb"
    summary = ingest_slurm(
        db,
        SlurmInputs(sacct=files["sacct"], events=files["events"], nodes=files["nodes"]),
        since_s=None if since_s is None else T0_S + since_s,
        until_s=T0_S + CAPTURE_END_S,
    )
    return db, summary.warnings


def test_a_capture_started_mid_window_reports_only_captured_time(tmp_path: Path) -> None:
    db, _ = _ingest(tmp_path, since_s=CAPTURE_START_S)
    report = build_report(db)
    assert (report.window_start_s, report.window_end_s) == (
        T0_S + CAPTURE_START_S,
        T0_S + CAPTURE_END_S,
    )
    assert report.installed_gpu_seconds == 16 * 2 * HOUR_S
    # Captured time only: long 8 GPUs x 2 h + late 8 x 1 h allocated; idle is the 8 GPU-hours
    # n2 really sat idle, not the 2 uncaptured hours before the capture.
    assert report.categories["idle"] == 8 * HOUR_S
    assert report.to_dict()["coverage"] == [
        {"cluster": "lab", "start": "2026-01-01T02:00:00Z", "end": "2026-01-01T04:00:00Z"}
    ]


def test_without_since_the_capture_covers_from_its_earliest_job_and_says_so(
    tmp_path: Path,
) -> None:
    db, warnings = _ingest(tmp_path, since_s=None)
    assert any("earliest job start" in w and "--since" in w for w in warnings)
    report = build_report(db)
    assert report.window_start_s == T0_S + LONG_START_S
    assert report.installed_gpu_seconds == 16 * (CAPTURE_END_S - LONG_START_S)


def test_a_window_outside_coverage_is_an_error(tmp_path: Path) -> None:
    db, _ = _ingest(tmp_path, since_s=CAPTURE_START_S)
    with pytest.raises(CoverageGapError, match="not captured lab 2026-01-01T00:00:00Z") as info:
        build_report(db, since_s=T0_S)
    assert "window.allow_gaps" in (info.value.hint or "")
    assert "--allow-gaps" in (as_flag(info.value).hint or "")  # the CLI's words


def test_allow_gaps_shows_them_as_not_captured_never_idle(tmp_path: Path) -> None:
    db, _ = _ingest(tmp_path, since_s=CAPTURE_START_S)
    report = build_report(db, since_s=T0_S, allow_gaps=True)
    assert report.window_start_s == T0_S
    assert [(g.start_s - T0_S, g.end_s - T0_S) for g in report.not_captured] == [
        (0, CAPTURE_START_S)
    ]
    assert report.installed_gpu_seconds == 16 * 2 * HOUR_S
    assert report.categories["idle"] == 8 * HOUR_S
    assert sum(report.categories.values()) == report.installed_gpu_seconds


def test_a_gap_between_two_captures(tmp_path: Path) -> None:
    """Captures of [0, 1 h) and [2 h, 3 h): the hour between is not captured."""
    db = tmp_path / "db.duckdb"
    for name, start_s, end_s, jobs in (
        ("a", 0, HOUR_S, [Job(1, 0, HOUR_S // 2)]),
        ("b", 2 * HOUR_S, 3 * HOUR_S, [Job(2, 2 * HOUR_S, 3 * HOUR_S, nodes="n2")]),
    ):
        files = Cluster(jobs=jobs).write(tmp_path / name)
        ingest_slurm(
            db,
            SlurmInputs(sacct=files["sacct"], events=files["events"], nodes=files["nodes"]),
            since_s=T0_S + start_s,
            until_s=T0_S + end_s,
        )
    with pytest.raises(CoverageGapError, match=r"01:00:00Z \.\. 2026-01-01T02:00:00Z"):
        build_report(db)
    report = build_report(db, allow_gaps=True)
    assert report.installed_gpu_seconds == 16 * 2 * HOUR_S
    assert report.categories["idle"] == 16 * 2 * HOUR_S - 8 * HOUR_S // 2 - 8 * HOUR_S
    assert len(report.to_dict()["coverage"]) == 2
    inside = build_report(db, since_s=T0_S + 2 * HOUR_S)
    assert inside.installed_gpu_seconds == 16 * HOUR_S
