"""Issue 24: a DCGM capture means the same GPU-seconds at any scrape interval.

The bundled real Slurm capture (examples/slurm-lab), with DCGM ``query_range`` answers of one
activity sampled at 15 s, 30 s and 60 s (``lab_dcgm``): each sample covers the time since the one
before it, so the ledger's ``idle.allocated`` agrees across the steps, and with the activity's own
integral, within one sample interval per GPU; the ledger conserves at every step. A step the user
declares and the data contradicts is refused, naming the file, the series and the times.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuyield import store
from gpuyield.errors import ParseError
from gpuyield.ingest.slurm import SlurmInputs, ingest_slurm
from gpuyield.ingest.utilization import ingest_utilization
from gpuyield.ledger.ledger import Ledger, backend_for, compute_ledger
from tests.hostile.inputs import snapshot
from tests.ingest import lab_dcgm

STEPS_S = (15, 30, 60)
LAB_GPUS = 32
# One sample interval (the longest step) per GPU of the cluster.
TOLERANCE_GPU_S = max(STEPS_S) * LAB_GPUS


def lab_store(db: Path) -> Path:
    lab = lab_dcgm.LAB
    inputs = SlurmInputs(
        sacct=lab / "sacct-X-D-wide.psv",
        events=lab / "sacctmgr-event-format.psv",
        nodes=lab / "scontrol-show-nodes-oneliner.txt",
        manifest=lab / "manifest.toml",
    )
    ingest_slurm(db, inputs, since_s=lab_dcgm.SINCE_S, until_s=lab_dcgm.UNTIL_S)
    return db


def ledger_of(db: Path) -> Ledger:
    con = store.connect(db, read_only=True)
    try:
        return compute_ledger(backend_for(con))
    finally:
        con.close()


@pytest.fixture(scope="module")
def ledgers(tmp_path_factory: pytest.TempPathFactory) -> dict[int, Ledger]:
    out = tmp_path_factory.mktemp("steps")
    found = {}
    for step_s in STEPS_S:
        db = lab_store(out / f"lab-{step_s}.duckdb")
        (result,) = ingest_utilization(db, prom_json=[lab_dcgm.write(out, step_s)])
        # Every GPU of the cluster exports one sample a step for the hour.
        assert result.samples == LAB_GPUS * 3600 // step_s
        found[step_s] = ledger_of(db)
    return found


def test_every_step_conserves_and_no_category_is_negative(ledgers: dict[int, Ledger]) -> None:
    for step_s, ledger in ledgers.items():
        total = sum(ledger.categories.values())
        assert total == pytest.approx(ledger.installed_gpu_seconds, abs=1e-3), step_s
        assert min(ledger.categories.values()) >= 0, (step_s, ledger.categories)
        assert min(ledger.subcategories.values()) >= -1e-6, (step_s, ledger.subcategories)


def test_idle_allocated_agrees_across_steps_within_one_sample_per_gpu(
    ledgers: dict[int, Ledger],
) -> None:
    truth = lab_dcgm.truth_idle_gpu_s(lab_dcgm.holds())
    idle = {s: ledger.subcategories["idle.allocated"] for s, ledger in ledgers.items()}
    assert truth > 4000  # the activity leaves jobs idle for minutes: a real signal
    for step_s, measured in idle.items():
        # A sample measures its whole interval; a part-step at a job's edges is unmeasured,
        # so the ledger can only undercount, by at most about one interval per GPU.
        assert truth - TOLERANCE_GPU_S <= measured <= truth + 1e-6, (step_s, measured, truth)
    assert max(idle.values()) - min(idle.values()) <= TOLERANCE_GPU_S, idle
    # Finer steps see more of the job edges, never more than there was.
    assert idle[60] <= idle[30] <= idle[15]


def test_measured_time_never_exceeds_the_jobs_time(ledgers: dict[int, Ledger]) -> None:
    """Before issue 24 a 15 s capture counted every sample as 60 s: four times the GPU's time
    moved to idle.allocated, and categories went negative."""
    for step_s, ledger in ledgers.items():
        util = ledger.utilization
        assert util is not None
        for category, activity in util.activity.items():
            before = ledger.categories[category] + activity.idle_gpu_seconds
            assert activity.measured_gpu_seconds <= before + 1e-6, (step_s, category)


def test_a_declared_step_the_data_contradicts_is_refused(tmp_path: Path) -> None:
    db = lab_store(tmp_path / "lab.duckdb")
    fifteen = lab_dcgm.write(tmp_path, 15)
    before = snapshot(db)
    with pytest.raises(ParseError) as caught:
        ingest_utilization(db, prom_json=[fifteen], step_s=60)
    error = caught.value
    assert error.path == str(fifteen)
    assert error.field is not None and error.field.startswith("data.result[")
    # The library names its own field; the CLI says it as the flag (below).
    assert "utilization.step_s 60s" in error.message and "15 s apart" in error.message
    assert "2026-11-30T10:00:15" in error.message  # the two times, in words
    assert snapshot(db) == before

    from typer.testing import CliRunner

    from gpuyield.cli import app

    args = ["ingest", "utilization", "--db", str(db), "--prom-json", str(fifteen), "--step", "60s"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 1, result.output
    assert "--step 60s" in result.output and "utilization.step_s" not in result.output
    assert snapshot(db) == before


def test_a_declared_step_the_data_agrees_with_changes_nothing(tmp_path: Path) -> None:
    declared = lab_store(tmp_path / "declared.duckdb")
    read = lab_store(tmp_path / "read.duckdb")
    sixty = lab_dcgm.write(tmp_path, 60)
    ingest_utilization(declared, prom_json=[sixty], step_s=60)
    ingest_utilization(read, prom_json=[sixty])
    assert (
        ledger_of(declared).subcategories["idle.allocated"]
        == ledger_of(read).subcategories["idle.allocated"]
    )
