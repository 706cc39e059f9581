"""An MLflow file store that is not one (issue 26): its files read a line at a time within
budgets, refused naming the file and line, never read whole."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from gpuyield.errors import InputError, ParseError
from gpuyield.ingest.telemetry import mlflow
from gpuyield.ingest.telemetry.records import StepRecord


def _run(tmp_path: Path, loss_lines: str) -> Path:
    """A run directory as MLflow's file store lays it out (meta.yaml, metrics/<key>)."""
    run = tmp_path / "mlruns" / "0" / "abc"
    (run / "metrics").mkdir(parents=True)
    (run / "meta.yaml").write_text("run_id: abc\nstatus: 3\n")
    (run / "metrics" / "loss").write_text(loss_lines)
    return run


def test_a_run_reads_a_line_at_a_time(tmp_path: Path) -> None:
    run = _run(tmp_path, "1700000000000 2.5 1\n\n1700000001000 2.25 2\n")
    log = mlflow.read(run)
    steps = [r for r in log.records if isinstance(r, StepRecord)]
    assert len(steps) == len(log.records)
    assert [(r.step, r.t, r.loss) for r in steps] == [
        (1, 1_700_000_000.0, 2.5),
        (2, 1_700_000_001.0, 2.25),
    ]


def test_a_metric_line_past_its_budget_is_refused(tmp_path: Path) -> None:
    run = _run(tmp_path, "1700000000000 2.5 1\n" + "1" * 10_000 + " 2.5 2\n")
    with pytest.raises(ParseError) as error:
        mlflow.read(run)
    assert error.value.line == 2
    assert "longer than 4,096 bytes" in error.value.message


def test_more_points_than_the_budget_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(mlflow, "MAX_POINTS", 2)
    run = _run(tmp_path, "".join(f"17000000{i:05d} 2.5 {i}\n" for i in range(5)))
    with pytest.raises(ParseError) as error:
        mlflow.read(run)
    assert error.value.line == 3


def test_a_meta_yaml_that_is_a_fifo_is_refused_not_waited_on(tmp_path: Path) -> None:
    run = _run(tmp_path, "1700000000000 2.5 1\n")
    (run / "meta.yaml").unlink()
    os.mkfifo(run / "meta.yaml")
    assert not mlflow.is_run_dir(run)  # a FIFO is not a file: not a run, and nothing blocks


def test_a_huge_meta_yaml_is_refused(tmp_path: Path) -> None:
    run = _run(tmp_path, "1700000000000 2.5 1\n")
    (run / "meta.yaml").write_text("run_id: abc\n" + "#" * (2 << 20))
    with pytest.raises(InputError, match="larger than"):
        mlflow.read(run)
