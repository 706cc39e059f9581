"""The utilization benchmark's data set: files gpuyield reads whole, samples joined to its jobs."""

from __future__ import annotations

from pathlib import Path

from bench.utilization import generate

from gpuyield.ingest.slurm import SlurmInputs, ingest_slurm
from gpuyield.ingest.utilization import ingest_utilization
from gpuyield.report.summary import build_report


def test_generated_cluster_day_is_read_and_attributed_whole(tmp_path: Path) -> None:
    data, files = generate(64, tmp_path, nodes_per_file=4)
    assert len(files) == 2  # 8 nodes, 4 a file
    db = tmp_path / "db.duckdb"
    ingest_slurm(db, SlurmInputs.from_dir(data))
    stored = sum(r.samples for r in ingest_utilization(db, prom_json=files))
    report = build_report(db)
    assert report.activity is not None
    samples = report.activity.samples
    # A day of minutes for every GPU, less the gaps between jobs (and the minutes before the
    # first job) and the samples past the capture time.
    assert 0.9 * 64 * 1440 < stored <= 64 * 1441
    assert samples.by_job_label > 0 and samples.by_whole_node > 0
    assert samples.by_job_label + samples.by_whole_node > 0.98 * samples.total
    assert report.subcategories["idle.allocated"] > 0
