"""The ledger benchmark's harness: what it measures is the command's own time and memory.

Performance itself is not asserted here (that is what ``bench/`` reports); these tests pin that the
figures mean what they say.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import duckdb
import pytest
from bench.gen_slurm import ClusterSpec, GenParams
from bench.ledger import FLOOR_FIELDS, bare_reads, bench_size, derived, floor_store_sql, measure

_MIB = 2**20
_ALLOC_MB = 256
# Touch every page so the memory is resident, then exit.
_ALLOCATE = f"b = bytearray({_ALLOC_MB} * {_MIB}); b[::4096] = b'x' * len(b[::4096])"


def test_peak_rss_is_the_childs_own() -> None:
    big = measure([sys.executable, "-c", _ALLOCATE])
    small = measure([sys.executable, "-c", "pass"])
    assert big.returncode == 0
    assert big.peak_rss_mb >= _ALLOC_MB
    # A later, smaller child reports its own peak, not the largest child's so far.
    assert small.peak_rss_mb < _ALLOC_MB / 2


def test_cpu_seconds_are_the_childs_own() -> None:
    # The child burns CPU until its own clock says 0.3 s: the bench must count at least that.
    burn = "import time\nwhile time.process_time() < 0.3:\n    pass\n"
    busy = measure([sys.executable, "-c", burn])
    idle = measure([sys.executable, "-c", "import time; time.sleep(0.5)"])
    assert busy.cpu_s >= 0.3
    assert idle.cpu_s < idle.wall_s - 0.4  # asleep, not on a CPU


def test_the_parents_memory_does_not_leak_into_the_childs_peak() -> None:
    # Linux copies the parent's high-water mark into a forked child's ru_maxrss; the bench must
    # not report the generator's memory as the ledger's.
    ballast = bytearray(2 * _ALLOC_MB * _MIB)
    ballast[::4096] = b"x" * len(ballast[::4096])
    small = measure([sys.executable, "-c", "import time; time.sleep(0.1)"])
    assert len(ballast) == 2 * _ALLOC_MB * _MIB
    del ballast
    assert 0 < small.peak_rss_mb < _ALLOC_MB / 2


def test_wall_time_covers_the_command() -> None:
    run = measure([sys.executable, "-c", "import time; time.sleep(0.3)"])
    assert run.wall_s >= 0.3
    assert run.killed == ""


def test_commands_past_the_caps_are_killed_and_say_so() -> None:
    hog = measure(
        [sys.executable, "-c", f"{_ALLOCATE}; import time; time.sleep(30)"],
        rss_cap_mb=_ALLOC_MB / 2,
    )
    assert hog.killed.startswith("rss cap")
    assert hog.returncode == -9
    assert hog.wall_s < 30
    slow = measure([sys.executable, "-c", "import time; time.sleep(30)"], timeout_s=0.5)
    assert slow.killed == "timeout"
    assert slow.wall_s < 30


def test_ratio_and_targets_from_the_wall_times() -> None:
    # ingest 5 s + report 1 s over a 2 s bare count and a 3 s materialised read.
    figures: dict[str, Any] = {
        "jobs": 600,
        "ingest": {"wall_s": 5.0, "peak_rss_mb": 1000.0},
        "report": {"wall_s": 1.0, "peak_rss_mb": 3000.0},
        "bare_read": {
            "count": {"wall_s": 2.0},
            "all_fields": {"wall_s": 2.4},
            "materialise": {"wall_s": 3.0},
            "into_file": {"wall_s": 4.0},
            "floor_store": {"wall_s": 7.5},
        },
    }
    out = derived(figures, size_mb=12.0)
    assert out["ledger_wall_s"] == 6.0
    assert out["ratio_to_count"] == 3.0
    assert out["ratio_to_materialise"] == 2.0
    assert out["ratio_to_all_fields"] == 2.5
    assert out["ratio_to_into_file"] == 1.5
    assert out["ratio_to_floor_store"] == 0.8
    assert out["floor_store_to_count"] == 3.75
    assert out["jobs_per_s"] == 100
    assert out["mb_per_s"] == 2.0
    assert out["peak_rss_mb"] == 3000.0
    assert out["meets_targets"] is True
    figures["report"]["peak_rss_mb"] = 5000.0
    assert derived(figures, size_mb=12.0)["meets_targets"] is False


def test_issue_31_figures_compare_the_ingest_with_duckdbs_load_into_a_file() -> None:
    # ingest 6 s at 1500 MB against DuckDB's load into a file, 4 s at 400 MB.
    figures: dict[str, Any] = {
        "jobs": 600,
        "ingest": {"wall_s": 6.0, "cpu_s": 9.0, "peak_rss_mb": 1500.0},
        "report": {"wall_s": 1.0, "peak_rss_mb": 300.0},
        "bare_read": {
            "count": {"wall_s": 2.0},
            "materialise": {"wall_s": 3.0},
            "into_file": {"wall_s": 4.0, "cpu_s": 7.5, "peak_rss_mb": 400.0},
        },
    }
    out = derived(figures, size_mb=12.0)
    assert out["ingest_to_into_file"] == 1.5
    assert out["ingest_cpu_to_into_file"] == 1.2
    assert out["ingest_rss_over_into_file_mb"] == 1100.0
    assert out["meets_ingest_targets"] is False  # 1.1 GB above DuckDB's own peak
    figures["ingest"]["peak_rss_mb"] = 1400.0
    assert derived(figures, size_mb=12.0)["meets_ingest_targets"] is True
    figures["ingest"]["wall_s"] = 6.5
    assert derived(figures, size_mb=12.0)["meets_ingest_targets"] is False


@pytest.fixture(scope="module")
def small_run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    params = GenParams(num_jobs=3000, window_days=2.0, cluster=ClusterSpec(num_nodes=400))
    return bench_size(params, tmp_path_factory.mktemp("bench"))


def test_bare_reads_time_a_query_inside_the_subprocess(tmp_path: Path) -> None:
    sacct = tmp_path / "s.psv"
    sacct.write_text("JobID|State\n1|COMPLETED\n2|FAILED\n")
    db = tmp_path / "bare.duckdb"
    figures = bare_reads(sacct, db)
    for name in ("count", "all_fields", "materialise", "into_file"):
        assert 0 < figures[name]["query_s"] <= figures[name]["wall_s"]
    assert "floor_store" not in figures  # the file lacks the ledger's fields
    assert not db.exists()  # the file the last read wrote goes, as the ledger's store will


def test_the_floor_store_types_the_ledgers_fields(tmp_path: Path) -> None:
    fields = ("JobID", *FLOOR_FIELDS, "Cluster")
    rows = [
        ("7", "7", "2026-01-01T00:00:00", "2026-01-01T00:01:00", "2026-01-01T02:00:00",
         "CANCELLED by 0", "billing=8,cpu=8,gres/gpu=4,mem=1G,node=1", "n01", "u1", "a1",
         "gpu", "run=x", "train", "lab"),
        ("8", "8", "2026-01-01T00:00:00", "Unknown", "Unknown", "PENDING", "", "None assigned",
         "u2", "a2", "gpu", "", "wait", "lab"),
    ]  # fmt: skip
    sacct = tmp_path / "s.psv"
    sacct.write_text("|".join(fields) + "\n" + "".join("|".join(r) + "\n" for r in rows))
    sql = floor_store_sql(str(sacct), list(fields))
    assert sql is not None and floor_store_sql(str(sacct), ["JobID", "State"]) is None
    con = duckdb.connect()
    con.execute(sql)
    got = con.execute(
        "SELECT JobIDRaw, state, gpus, epoch(end_at) - epoch(start_at), Comment FROM jobs"
    ).fetchall()
    assert got == [("7", "CANCELLED", 4, 7140.0, "run=x"), ("8", "PENDING", None, None, None)]
    figures = bare_reads(sacct, tmp_path / "bare.duckdb")
    assert 0 < figures["floor_store"]["query_s"] <= figures["floor_store"]["wall_s"]


def test_a_whole_small_bench_runs_the_cli_and_its_report_conserves(
    small_run: dict[str, object],
) -> None:
    assert small_run["jobs"] == 3000
    assert "error" not in small_run, small_run.get("error")
    assert "ledger_wall_s" in small_run, small_run.get("ingest")
    report = small_run["report_json"]
    assert isinstance(report, dict)
    assert report["installed_gpu_seconds"] > 0
    # Conservation, checked here independently of the ledger's own check.
    assert sum(report["categories"].values()) == pytest.approx(report["installed_gpu_seconds"])
    assert report["rejected_rows"] == 0
