"""The simulator benchmark's harness: each phase's time and peak memory are the phase's own.

Performance itself is not asserted (bench/ reports it); these tests pin what the figures mean.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from bench.simulate import _medians, child_argv, cluster_run

from bench import simulate_phases

_MIB = 2**20


@pytest.mark.skipif(not Path("/proc/self/clear_refs").exists(), reason="Linux /proc only")
def test_a_phase_peak_is_its_own() -> None:
    figures: dict[str, float] = {}

    def allocate() -> int:
        block = bytearray(256 * _MIB)
        block[::4096] = b"x" * len(block[::4096])  # resident, not just reserved
        return len(block)

    simulate_phases.phase(figures, "big", allocate)
    simulate_phases.phase(figures, "small", lambda: sum(range(1000)))
    assert figures["big_peak_rss_mb"] - figures["big_start_rss_mb"] >= 200
    # The next phase starts a new high-water mark: the freed 256 MB are not its peak.
    assert figures["small_peak_rss_mb"] - figures["small_start_rss_mb"] < 100
    assert figures["big_s"] > 0 and figures["big_cpu_s"] >= 0


def test_a_short_run_reports_every_phase() -> None:
    figures = cluster_run(0.02, utilization=True)
    assert "error" not in figures, figures
    for phase in ("simulate", "write", "copy", "utilization"):
        assert figures[f"{phase}_s"] > 0
        assert figures[f"{phase}_peak_rss_mb"] >= figures[f"{phase}_start_rss_mb"] > 0
    assert figures["gpus"] == 100_000 and figures["days"] == 0.02
    assert figures["sacct_rows"] > 0
    assert set(figures["files_mb"]) >= {"sacct.psv", "events.psv", "nodes.txt", "truth.json"}
    assert figures["write_over_simulate"] == figures["write_s"] / figures["simulate_s"]
    # The child's whole peak (polled from outside) covers every phase's.
    assert figures["child"]["peak_rss_mb"] >= figures["write_peak_rss_mb"] - 1


def test_a_baseline_checkout_goes_first_on_the_path(tmp_path: Path) -> None:
    argv = child_argv(1.0, utilization=False, src=tmp_path)
    assert argv[0] == "env" and argv[1].startswith("PYTHONPATH=")
    paths = argv[1].split("=", 1)[1].split(os.pathsep)
    assert paths[0] == str(tmp_path.resolve())
    assert "--utilization" not in argv and argv[-2:] == ["--days", "1.0"]
    assert child_argv(1.0, utilization=True, src=None)[-1] == "--utilization"


def test_medians_of_numbers_first_of_the_rest() -> None:
    runs = [{"write_s": 3.0, "days": 1.0, "files_mb": {"a": 1}}, {"write_s": 1.0, "days": 1.0}]
    runs.append({"write_s": 2.0, "days": 1.0})
    assert _medians(runs) == {"write_s": 2.0, "days": 1.0, "files_mb": {"a": 1}}
    assert "error" in _medians([{"error": {"returncode": 1}}])
