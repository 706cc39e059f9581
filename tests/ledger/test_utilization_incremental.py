"""Samples attributed once, at ingest, whatever order the inputs arrive in (issue 31).

Every ingest keeps the stored attribution (``sample_groups``) equal to attributing every sample
afresh against the store as it stands: samples before their jobs, a capture split in two, a
running job captured again after it grew, GPU indices captured after the samples, a capture of
the same hours at a finer step. Each case compares the stored groups, row for row (runs named by
their Slurm key, not by the store's internal numbers), with a store that got the final inputs in
the plain order.
"""

from __future__ import annotations

import json
from pathlib import Path

from gpuyield import store
from gpuyield.ingest.slurm import SlurmInputs, ingest_slurm
from gpuyield.ingest.utilization import ingest_utilization
from tests.ingest import lab_dcgm
from tests.ledger import test_gpu_index as held

Rows = list[tuple[object, ...]]


def attribution(db: Path) -> tuple[Rows, Rows]:
    """The stored groups and measured GPUs per run, runs named by cluster, JobIDRaw, submit."""
    con = store.connect(db, read_only=True)
    runs = "(SELECT DISTINCT job_ref, cluster, job_id_raw, submit_s FROM sample_jobs)"
    try:
        groups = con.execute(
            f"""SELECT g.* EXCLUDE (job_ref), r.cluster, r.job_id_raw, r.submit_s
                FROM sample_groups g LEFT JOIN {runs} r USING (job_ref) ORDER BY ALL"""
        ).fetchall()
        gpus = con.execute(
            f"""SELECT g.node, g.gpus_measured, r.cluster, r.job_id_raw, r.submit_s
                FROM sample_job_gpus g JOIN {runs} r USING (job_ref) ORDER BY ALL"""
        ).fetchall()
    finally:
        con.close()
    assert groups, "nothing attributed: the case tests nothing"
    return groups, gpus


def _lab_slurm(db: Path, *, until_s: int = lab_dcgm.UNTIL_S, sacct: Path | None = None) -> None:
    lab = lab_dcgm.LAB
    inputs = SlurmInputs(
        sacct=sacct or lab / "sacct-X-D-wide.psv",
        events=lab / "sacctmgr-event-format.psv",
        nodes=lab / "scontrol-show-nodes-oneliner.txt",
        manifest=lab / "manifest.toml",
    )
    ingest_slurm(db, inputs, since_s=lab_dcgm.SINCE_S, until_s=until_s)


def _halves(path: Path, out: Path) -> list[Path]:
    """The answer cut in two at half past ten: two captures, one after the other."""
    document = json.loads(path.read_text())
    cut = lab_dcgm.SINCE_S + 1800
    parts = []
    for name, keep in (("early", lambda t: t <= cut), ("late", lambda t: t > cut)):
        result = []
        for series in document["data"]["result"]:
            values = [v for v in series["values"] if keep(v[0])]
            if values:
                result.append({**series, "values": values})
        part = out / f"{name}.json"
        part.write_text(json.dumps({**document, "data": {**document["data"], "result": result}}))
        parts.append(part)
    return parts


def test_samples_before_their_jobs_split_captures_and_order(tmp_path: Path) -> None:
    answer = lab_dcgm.write(tmp_path, 30)
    plain = tmp_path / "plain.duckdb"
    _lab_slurm(plain)
    ingest_utilization(plain, prom_json=[answer])
    expected = attribution(plain)

    samples_first = tmp_path / "samples-first.duckdb"
    ingest_utilization(samples_first, prom_json=[answer])
    _lab_slurm(samples_first)
    assert attribution(samples_first) == expected

    early, late = _halves(answer, tmp_path)
    interleaved = tmp_path / "interleaved.duckdb"
    ingest_utilization(interleaved, prom_json=[late])
    _lab_slurm(interleaved)
    ingest_utilization(interleaved, prom_json=[early])
    assert attribution(interleaved) == expected


def test_a_running_job_captured_again_after_it_grew(tmp_path: Path) -> None:
    """Job 36 runs to the end of the capture: first captured with the clock at 10:56, its
    samples after then are not its; captured again at 11:00, they are."""
    answer = lab_dcgm.write(tmp_path, 60)
    plain = tmp_path / "plain.duckdb"
    _lab_slurm(plain)
    ingest_utilization(plain, prom_json=[answer])
    grown = tmp_path / "grown.duckdb"
    _lab_slurm(grown, until_s=lab_dcgm.epoch("2026-11-30T10:56:00"))
    ingest_utilization(grown, prom_json=[answer])
    assert attribution(grown) != attribution(plain)  # the early capture ends job 36 at 10:56
    # The same sacct lines captured again at 11:00 (a new file: the store takes captures).
    again = tmp_path / "sacct-again.psv"
    again.write_text((lab_dcgm.LAB / "sacct-X-D-wide.psv").read_text() + "\n")
    _lab_slurm(grown, sacct=again)
    assert attribution(grown) == attribution(plain)


def test_gpu_indices_captured_after_the_samples(tmp_path: Path) -> None:
    """``scontrol -d show job`` ingested after the samples: the unlabelled samples of shared
    nodes find their jobs then, as they would have had the indices come first."""
    plain = held._store(tmp_path / "plain", detail=True)
    late = tmp_path / "late"
    late.mkdir()
    db = late / "late.duckdb"
    slurm = SlurmInputs(
        sacct=held.FIXTURE / "sacct.psv",
        events=held.FIXTURE / "events.psv",
        nodes=held.FIXTURE / "scontrol-show-nodes-oneliner.txt",
    )
    ingest_slurm(db, slurm, since_s=held.SINCE_S, until_s=held.UNTIL_S)
    ingest_utilization(db, prom_json=[held._samples(late / "dcgm.json")], step_s=held.STEP_S)
    without = attribution(db)
    detail = SlurmInputs(jobs_detail=held.RUNNING)
    ingest_slurm(db, detail, since_s=held.SINCE_S, until_s=held.UNTIL_S)
    assert attribution(db) != without
    assert attribution(db) == attribution(plain)


def test_the_same_hours_captured_again_at_a_finer_step(tmp_path: Path) -> None:
    """A 15 s capture of hours already stored at 60 s replaces them: every 60 s sample time is
    also a 15 s one, so what remains is the 15 s capture, each sample covering 15 s."""
    sixty, fifteen = lab_dcgm.write(tmp_path, 60), lab_dcgm.write(tmp_path, 15)
    both = tmp_path / "both.duckdb"
    _lab_slurm(both)
    ingest_utilization(both, prom_json=[sixty])
    ingest_utilization(both, prom_json=[fifteen])
    only = tmp_path / "only.duckdb"
    _lab_slurm(only)
    ingest_utilization(only, prom_json=[fifteen])
    assert attribution(both) == attribution(only)
    con = store.connect(both, read_only=True)
    try:
        steps = con.execute("SELECT DISTINCT t_s - start_s FROM gpu_samples").fetchall()
    finally:
        con.close()
    assert steps == [(15,)]
