"""The preflight benchmark runs end to end at a small size (its figures are not asserted)."""

from __future__ import annotations

from bench.ladder import bench_size


def test_ladder_bench_small() -> None:
    figures = bench_size(20_000)
    assert figures["jobs"] == 20_000
    # The summary and the scan gave the same verdicts (bench_size asserts it); both were timed.
    assert figures["check_summary_median_s"] > 0 and figures["check_scan_median_s"] > 0
    assert figures["summary_refresh_s"] > 0
