"""gpuyield.ledger.ft: lost GPU-seconds of drop and restart recoveries, on hand-made timelines."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpuyield.errors import InputError
from gpuyield.ingest.runlog import ingest_telemetry_files
from gpuyield.ledger.ft import Recovery, ft_loss

T0 = 1_764_499_200.0


def _write(path: Path, events: list[dict[str, object]]) -> Path:
    path.write_text("".join(json.dumps({"v": 1, **e}) + "\n" for e in events))
    return path


def _steps(replica: int, times: list[float], first: int = 0) -> list[dict[str, object]]:
    return [
        {"event": "step", "t": T0 + t, "step": first + i, "loss": 2.0, "replica": replica}
        for i, t in enumerate(times)
    ]


def _loss(tmp_path: Path, events: list[dict[str, object]]):
    db = tmp_path / "ft.duckdb"
    ingest_telemetry_files(db, "r", [_write(tmp_path / "t.jsonl", events)])
    from gpuyield import store

    con = store.connect(db, read_only=True)
    try:
        return ft_loss(con, "r")
    finally:
        con.close()


def test_drop_charges_the_lost_step_the_heal_and_the_survivors_stall(tmp_path: Path) -> None:
    # Two groups of 8 GPUs step every second. Group 1 dies at 4.5 (last step at 4), restarts and
    # heals at 20. Group 0's gap 4 -> 8 holds the failure and a new quorum: 3 s beyond its usual 1 s.
    events: list[dict[str, object]] = [
        {"event": "job_start", "t": T0, "replica": r} for r in (0, 1)
    ]
    events += _steps(0, [1, 2, 3, 4, 8, 9, 10, 11, 12])
    events += _steps(1, [1, 2, 3, 4])
    events += [
        {"event": "replica_lost", "t": T0 + 4.5, "step": 4, "replicas": 2, "gpus": 8, "replica": 1},
        {
            "event": "quorum",
            "t": T0 + 7,
            "step": 4,
            "quorum_id": 2,
            "participants": 1,
            "replica": 0,
        },
        {"event": "restart", "t": T0 + 10, "attempt": 1, "replica": 1},
        {"event": "heal_started", "t": T0 + 18, "step": 0, "replica": 1},
        {"event": "heal_done", "t": T0 + 20, "step": 10, "replica": 1},
    ]
    loss = _loss(tmp_path, events)
    (failure,) = loss.failures
    assert failure.recovery is Recovery.DROP
    assert failure.lost_work_gpu_s == pytest.approx(8 * 0.5)
    assert failure.heal_gpu_s == pytest.approx(8 * 15.5)
    assert loss.stall_s == pytest.approx(3.0) and loss.stall_gpu_s == pytest.approx(24.0)
    assert loss.lost_gpu_s == pytest.approx(4 + 124 + 24)
    assert loss.restarts == 1 and loss.restart_gpu_s == 0


def test_restart_charges_every_group_since_the_last_checkpoint(tmp_path: Path) -> None:
    # Three groups of 1 GPU; a checkpoint at 10, a failure at 16, the checkpoint loaded again at 40.
    events: list[dict[str, object]] = [{"event": "job_start", "t": T0, "replica": 0}]
    events += _steps(0, [2, 4, 6, 8, 10, 12, 14, 16])
    events += [
        {"event": "checkpoint_saved", "t": T0 + 10, "step": 5, "duration_s": 0.5, "replica": 0},
        {"event": "replica_lost", "t": T0 + 16, "step": 8, "replicas": 3, "gpus": 1, "replica": 2},
        {"event": "restart", "t": T0 + 30, "attempt": 1, "replica": 0},
        {"event": "checkpoint_loaded", "t": T0 + 40, "step": 5, "replica": 0},
    ]
    loss = _loss(tmp_path, events)
    (failure,) = loss.failures
    assert failure.recovery is Recovery.RESTART
    assert failure.lost_work_gpu_s == pytest.approx(3 * 6)
    assert failure.restart_gpu_s == pytest.approx(3 * 24)
    assert loss.stall_gpu_s == 0 and loss.heal_gpu_s == 0
    assert loss.lost_gpu_s == pytest.approx(18 + 72)


def test_a_run_without_fault_tolerance_events_is_refused(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="no fault-tolerance events"):
        _loss(tmp_path, [{"event": "job_start", "t": T0}, *_steps(0, [1, 2])])


def test_recorder_tags_every_line_with_its_replica(tmp_path: Path) -> None:
    from gpuyield.guard import Recorder
    from gpuyield.ingest.telemetry import FtKind, read

    rec = Recorder(tmp_path / "t.jsonl", run="r", enabled=True, replica=2)
    rec.job_start()
    rec.step(0, loss=1.5)
    rec.quorum(1, quorum_id=3, participants=2)
    rec.replica_lost(1, replicas=3, gpus=8)
    rec.restart(1)
    rec.heal_started(0)
    rec.heal_done(7)
    rec.job_end()
    log = read(tmp_path / "t.jsonl")
    assert log.steps[0].replica == 2 and log.steps[0].loss == 1.5
    kinds = [e.kind for e in log.ft_events]
    assert kinds == [
        FtKind.QUORUM,
        FtKind.REPLICA_LOST,
        FtKind.RESTART,
        FtKind.HEAL_STARTED,
        FtKind.HEAL_DONE,
    ]
    assert {e.replica for e in log.ft_events} == {2}
    assert log.ft_events[1].gpus == 8 and log.ft_events[4].step == 7


def test_ft_loss_command_prints_the_failures(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from gpuyield.cli import app

    events: list[dict[str, object]] = [{"event": "job_start", "t": T0, "replica": 0}]
    events += _steps(0, [2, 4, 6, 8, 10])
    events += [
        {"event": "checkpoint_saved", "t": T0 + 4, "step": 2, "duration_s": 0.5, "replica": 0},
        {"event": "replica_lost", "t": T0 + 9, "step": 5, "replicas": 2, "gpus": 4, "replica": 1},
        {"event": "checkpoint_loaded", "t": T0 + 19, "step": 2, "replica": 0},
    ]
    db = tmp_path / "ft.duckdb"
    ingest_telemetry_files(db, "r", [_write(tmp_path / "t.jsonl", events)])
    runner = CliRunner()
    result = runner.invoke(app, ["report", "ft-loss", "--run", "r", "--db", str(db), "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["failures"][0]["recovery"] == "restart"
    assert data["lost_gpu_s"] == pytest.approx(2 * 4 * 5 + 2 * 4 * 10)
    missing = runner.invoke(app, ["report", "ft-loss", "--run", "other", "--db", str(db)])
    assert missing.exit_code == 1 and "no fault-tolerance events" in missing.output


def test_train_ft_refuses_a_bad_failure_plan(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from gpuyield.cli import app

    pytest.importorskip("torchft")
    result = CliRunner().invoke(
        app, ["train-ft", "--mode", "drop", "--out", str(tmp_path), "--fail-at", "5:7"]
    )
    assert result.exit_code == 1
    assert "the group must be in 0..2" in result.output
    assert not (tmp_path / "telemetry.jsonl").exists()
