"""The numbers behind the charts, checked against the ledger totals and against the raw sample files."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuyield.categories import Category, FailedCause
from gpuyield.report.figures import TOP_N, ReportFigures, bucket_s_for, build_figures, who_of

# From examples/slurm-lab/sacctmgr-event-format.psv: node n2 (8 GPUs) was drained for ECC errors
# 10:42:39-10:44:05 (86 s) and down for a PSU fault 10:44:51-10:45:51 (60 s); no job held it then.
N2_GPUS = 8
N2_DRAIN_S = 86
N2_DOWN_S = 60
# From examples/slurm-lab/sacct-X-D-wide.psv and manifest.toml (lineage of lab-chat-v1):
LONG_A_GPUS, LONG_A_ELAPSED_S = 8, 480  # job 32, COMPLETED
DN2_GPUS, DN2_FIRST_ELAPSED_S, DN2_SECOND_ELAPSED_S = 2, 11, 8  # job 28: NODE_FAIL, then COMPLETED
DN2_CHECKPOINT_S = 4  # run_settings.dn2
BIO_LONG_GPUS, BIO_LONG_ELAPSED_S = 2, 300  # job 35, lab-bio-v1, COMPLETED
# The sample's window: 10:40:47 (cluster registered) to 11:00:00.
WINDOW_START_MINUTE_S = 13  # 10:40:47 .. 10:41:00
WINDOW_MINUTES = 20  # buckets 10:40 .. 10:59


@pytest.fixture(scope="module")
def figures(sample_db: Path) -> ReportFigures:
    return build_figures(sample_db)


def _close(a: float, b: float) -> bool:
    return abs(a - b) <= 1e-6 * max(1.0, abs(a), abs(b))


def test_bucket_follows_the_window_length() -> None:
    hour, day = 3600, 86400
    assert bucket_s_for(0) == 60
    assert bucket_s_for(19 * 60) == 60  # the sample: one-minute steps
    assert bucket_s_for(3 * hour) == 300  # 36 five-minute steps
    assert bucket_s_for(12 * hour) == 900  # 48 quarter hours
    assert bucket_s_for(2 * day) == hour  # the issue: hours under ~3 days
    assert bucket_s_for(3 * day) == day  # and days from there
    assert bucket_s_for(90 * day) == day


def test_timeline_covers_the_window_and_adds_up(figures: ReportFigures) -> None:
    timeline = figures.timeline
    assert timeline.bucket_s == 60
    assert len(timeline.buckets) == WINDOW_MINUTES
    assert timeline.buckets[0].label == "2026-11-30T10:40"
    assert timeline.buckets[0].in_window_s == WINDOW_START_MINUTE_S
    assert all(b.in_window_s == 60 for b in timeline.buckets[1:])
    for category, total in figures.report.categories.items():
        assert _close(sum(b.categories[category] for b in timeline.buckets), total), category
    # Each bucket holds exactly its installed capacity: 32 GPUs for its seconds in the window.
    for bucket in timeline.buckets:
        assert _close(sum(bucket.categories.values()), 32 * bucket.in_window_s)


def test_who_groups_and_the_unallocated_rest_add_up_to_installed(figures: ReportFigures) -> None:
    installed = figures.report.installed_gpu_seconds
    for who in figures.who:
        grouped = sum(r.total_gpu_seconds for r in who.rows)
        assert _close(grouped + who.unallocated_gpu_seconds, installed), who.by
        assert all(r.categories["down"] == 0 and r.categories["idle"] == 0 for r in who.rows)
        assert len(who.rows) <= TOP_N + 1


def test_who_folds_groups_beyond_top_n_into_one_row(
    sample_db: Path, figures: ReportFigures
) -> None:
    partitions = next(w for w in figures.who if w.by == "partition")
    assert [r.key for r in partitions.rows] == ["gpu", "urgent", "scavenger"]
    from gpuyield import store
    from gpuyield.ledger import backend_for, compute_ledger

    con = store.connect(sample_db, read_only=True)
    try:
        folded = who_of(compute_ledger(backend_for(con)), "partition", top_n=1)
    finally:
        con.close()
    assert [(r.key, r.num_groups) for r in folded.rows] == [("gpu", 1), ("(2 others)", 2)]
    rest = partitions.rows[1].total_gpu_seconds + partitions.rows[2].total_gpu_seconds
    assert _close(folded.rows[1].total_gpu_seconds, rest)


def test_failure_causes_are_the_report_subcategories(figures: ReportFigures) -> None:
    assert list(figures.failures.causes) == [c.value for c in FailedCause]
    for cause, value in figures.failures.causes.items():
        assert value == figures.report.subcategories.get(f"failed.{cause}", 0.0)


def test_event_reasons_are_node_gpus_times_event_time(figures: ReportFigures) -> None:
    ecc = next(e for e in figures.failures.event_reasons if e.reason.startswith("ECC"))
    assert (ecc.state, ecc.num_events, ecc.num_nodes) == ("DRAIN", 1, 1)
    assert ecc.gpu_seconds == N2_GPUS * N2_DRAIN_S


def test_lemon_nodes_account_for_all_down_and_failed_time(figures: ReportFigures) -> None:
    lemons = figures.failures.lemons
    down = sum(n.down_total_gpu_seconds for n in lemons)
    failed = sum(n.failed_total_gpu_seconds for n in lemons)
    assert _close(down, figures.report.categories[Category.DOWN.value])
    assert _close(failed, figures.report.categories[Category.FAILED.value])
    waste = [n.waste_gpu_seconds for n in lemons]
    assert waste == sorted(waste, reverse=True)


def test_worst_lemon_is_n2_with_its_drain_and_psu_fault(figures: ReportFigures) -> None:
    worst = figures.failures.lemons[0]
    assert worst.node == "n2"
    assert worst.down_gpu_seconds == {"planned": 0.0,
                                      "unplanned": N2_GPUS * (N2_DRAIN_S + N2_DOWN_S)}  # fmt: skip
    # dn2's first job died on n2 (NODE_FAIL) 11 s in, 3 s after its last 4-second checkpoint.
    lost_s = DN2_FIRST_ELAPSED_S % DN2_CHECKPOINT_S
    assert worst.failed_gpu_seconds[FailedCause.HARDWARE.value] == DN2_GPUS * lost_s


def test_lineage_effective_training_time_from_the_raw_jobs(figures: ReportFigures) -> None:
    chat, bio = figures.lineages
    assert (chat.model, chat.runs, bio.model) == ("lab-chat-v1", ("long-a", "dn2"), "lab-bio-v1")
    lost = DN2_GPUS * (DN2_FIRST_ELAPSED_S % DN2_CHECKPOINT_S)
    total = LONG_A_GPUS * LONG_A_ELAPSED_S + DN2_GPUS * (DN2_FIRST_ELAPSED_S + DN2_SECOND_ELAPSED_S)
    assert chat.lost_gpu_seconds == lost
    assert chat.total_gpu_seconds == total
    assert chat.effective_training_time == pytest.approx((total - lost) / total)
    assert chat.num_interrupted == 1
    assert [(j.run, j.state, j.interrupted) for j in chat.jobs] == [
        ("long-a", "COMPLETED", False), ("dn2", "NODE_FAIL", True), ("dn2", "COMPLETED", False),
    ]  # fmt: skip
    assert bio.gpu_seconds["released"] == BIO_LONG_GPUS * BIO_LONG_ELAPSED_S
    assert bio.effective_training_time == 1.0


def test_lineages_released_time_is_the_reports(figures: ReportFigures) -> None:
    # The sample's two models share no run, so their released time adds up to the category.
    released = sum(x.gpu_seconds["released"] for x in figures.lineages)
    assert _close(released, figures.report.categories["released"])


def test_quality_of_a_clean_capture(figures: ReportFigures) -> None:
    assert figures.quality.rejected == ()
    assert figures.report.rejected_rows == 0
    assert figures.quality.node_seconds_without_gpu_count == 0
