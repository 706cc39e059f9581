"""Recorder: the contract's lines, Slurm identity, flushing, and crash safety under SIGKILL."""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuyield.errors import InputError
from gpuyield.guard import Recorder
from gpuyield.guard.recorder import host_name, is_rank_zero, slurm_job_id
from gpuyield.ingest.telemetry import CheckpointSaved, JobStart, StepRecord, read

_T0 = 1_764_499_200.0


class _Clock:
    """A fake clock advancing one second per call, so timestamps are known exactly."""

    def __init__(self) -> None:
        self.now = _T0

    def __call__(self) -> float:
        self.now += 1.0
        return self.now


def _lines(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_lines_follow_the_contract(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SLURM_JOB_ID", "1234")
    monkeypatch.setenv("SLURMD_NODENAME", "n001")
    rec = Recorder(run="pt-main", directory=tmp_path, enabled=True, clock=_Clock())
    rec.job_start()
    rec.step(100, loss=2.31, grad_norm=0.9, loss_scale=65536, tokens=16777216)
    rec.checkpoint_saved(100, duration_s=35.0)
    rec.checkpoint_loaded(100)
    rec.eval(100, val_loss=2.4)
    rec.job_end("completed")
    assert _lines(tmp_path / "pt-main.jsonl") == [
        {
            "v": 1,
            "event": "job_start",
            "t": _T0 + 1,
            "run": "pt-main",
            "job_id": "1234",
            "host": "n001",
            "pid": os.getpid(),
        },
        {
            "v": 1,
            "event": "step",
            "t": _T0 + 2,
            "step": 100,
            "loss": 2.31,
            "grad_norm": 0.9,
            "loss_scale": 65536.0,
            "tokens": 16777216,
        },
        {"v": 1, "event": "checkpoint_saved", "t": _T0 + 3, "step": 100, "duration_s": 35.0},
        {"v": 1, "event": "checkpoint_loaded", "t": _T0 + 4, "step": 100},
        {"v": 1, "event": "eval", "t": _T0 + 5, "step": 100, "metrics": {"val_loss": 2.4}},
        {"v": 1, "event": "job_end", "t": _T0 + 6, "status": "completed"},
    ]


def test_sparse_steps_and_nonfinite_values_round_trip(tmp_path: Path) -> None:
    rec = Recorder(tmp_path / "r.jsonl", enabled=True, clock=_Clock())
    rec.step(1, loss=float("nan"))
    rec.step(2, grad_norm=float("inf"))
    rec.step(3)
    rec.close()
    steps = read(tmp_path / "r.jsonl").steps
    assert steps[0].loss is not None and math.isnan(steps[0].loss)
    assert steps[1] == StepRecord(step=2, t=_T0 + 2, grad_norm=math.inf)
    assert steps[2] == StepRecord(step=3, t=_T0 + 3)


@pytest.mark.parametrize(
    ("env", "job_id"),
    [
        ({"SLURM_JOB_ID": "77"}, "77"),
        # Array tasks: the id sacct shows is <array job>_<task>, not the task's own job id.
        ({"SLURM_JOB_ID": "80", "SLURM_ARRAY_JOB_ID": "77", "SLURM_ARRAY_TASK_ID": "3"}, "77_3"),
        ({}, None),
    ],
)
def test_slurm_job_id(env: dict[str, str], job_id: str | None) -> None:
    assert slurm_job_id(env) == job_id


def test_host_prefers_the_slurm_node_name() -> None:
    assert host_name({"SLURMD_NODENAME": "gpu-017"}) == "gpu-017"
    assert host_name({}) == os.uname().nodename


@pytest.mark.parametrize(
    ("env", "zero"),
    [({}, True), ({"RANK": "0"}, True), ({"RANK": "3"}, False), ({"SLURM_PROCID": "1"}, False)],
)
def test_only_rank_zero_records_by_default(env: dict[str, str], zero: bool) -> None:
    assert is_rank_zero(env) is zero


def test_disabled_recorder_writes_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RANK", "5")
    rec = Recorder(run="r", directory=tmp_path)
    rec.job_start()
    rec.step(1, loss=1.0)
    rec.job_end()
    assert not (tmp_path / "r.jsonl").exists()


def test_background_thread_flushes_without_a_sync_point(tmp_path: Path) -> None:
    rec = Recorder(tmp_path / "r.jsonl", enabled=True, flush_interval_s=0.05)
    for step in range(10):
        rec.step(step, loss=1.0)
    deadline = time.monotonic() + 5.0
    while time.monotonic() < deadline and len(_lines(tmp_path / "r.jsonl")) < 10:
        time.sleep(0.01)
    assert [line["step"] for line in _lines(tmp_path / "r.jsonl")] == list(range(10))
    rec.close()


def test_flush_every_wakes_the_flusher(tmp_path: Path) -> None:
    # An interval far longer than the test: only the record count can trigger this flush.
    rec = Recorder(tmp_path / "r.jsonl", enabled=True, flush_every=100, flush_interval_s=3600)
    for step in range(100):
        rec.step(step, loss=1.0)
    deadline = time.monotonic() + 5.0
    while time.monotonic() < deadline and len(_lines(tmp_path / "r.jsonl")) < 100:
        time.sleep(0.01)
    assert len(_lines(tmp_path / "r.jsonl")) == 100
    rec.close()


def test_context_manager_marks_a_failed_job(tmp_path: Path) -> None:
    with pytest.raises(ZeroDivisionError), Recorder(tmp_path / "r.jsonl", enabled=True):
        _ = 1 / 0
    assert [line["event"] for line in _lines(tmp_path / "r.jsonl")] == ["job_start", "job_end"]
    assert _lines(tmp_path / "r.jsonl")[-1]["status"] == "failed"


def test_a_bad_value_surfaces_at_the_next_sync_point(tmp_path: Path) -> None:
    rec = Recorder(tmp_path / "r.jsonl", enabled=True, flush_interval_s=3600)
    rec.step(1, loss="not a number")  # type: ignore[arg-type]
    with pytest.raises(InputError, match="cannot write record"):
        rec.checkpoint_saved(1, duration_s=1.0)


def test_needs_a_path_or_a_run() -> None:
    with pytest.raises(InputError, match="path or a run"):
        Recorder()


def test_closed_recorder_refuses_events(tmp_path: Path) -> None:
    rec = Recorder(tmp_path / "r.jsonl", enabled=True)
    rec.close()
    with pytest.raises(InputError, match="closed"):
        rec.checkpoint_loaded(3)


# -- crash safety: a real writer process killed with SIGKILL ------------------------------------

_WRITER = """
import sys, time
from gpuyield.guard import Recorder
rec = Recorder(sys.argv[1], enabled=True, flush_every=64, flush_interval_s=0.01)
rec.job_start()
start = int(sys.argv[2])
rec.checkpoint_loaded(start) if start else None
step = start
while True:
    rec.step(step, loss=1.0 + 1.0 / (step + 1), tokens=step * 4096)
    if step % 500 == 0 and step > start:
        rec.checkpoint_saved(step, duration_s=0.5)
        print(step, flush=True)
    step += 1
"""


def _run_and_kill(path: Path, start: int, checkpoints: int) -> int:
    """Run a writer until it reports ``checkpoints`` saves, SIGKILL it; the last reported save."""
    with subprocess.Popen(
        [sys.executable, "-c", _WRITER, str(path), str(start)],
        stdout=subprocess.PIPE,
        text=True,
    ) as process:
        assert process.stdout is not None
        reported = [int(process.stdout.readline()) for _ in range(checkpoints)]
        time.sleep(0.05)  # let it write some more steps, mid-flush when killed
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=10)
    assert process.returncode == -signal.SIGKILL
    return reported[-1]


def _check_attempt(steps: list[int], start: int, saved: int) -> None:
    # Nothing before the kill is lost or reordered: steps are contiguous from the start,
    # and at least everything up to the last fsynced checkpoint is there.
    assert steps == list(range(start, start + len(steps)))
    assert steps[-1] >= saved


def test_sigkill_loses_only_the_tail_and_a_restart_appends(tmp_path: Path) -> None:
    path = tmp_path / "run.jsonl"
    first_saved = _run_and_kill(path, start=0, checkpoints=3)
    log = read(path)
    assert log.torn_lines <= 1
    assert isinstance(log.records[0], JobStart)
    _check_attempt([s.step for s in log.steps], 0, first_saved)
    saves = [c.step for c in log.checkpoints_saved]
    assert len(saves) >= 3 and saves == [500 * (i + 1) for i in range(len(saves))]

    # Simulate the worst case explicitly as well: a torn half line at the end of the file.
    with path.open("ab") as handle:
        handle.write(b'{"v":1,"event":"step","t":17')
    second_saved = _run_and_kill(path, start=first_saved, checkpoints=2)
    log = read(path)
    assert 1 <= log.torn_lines <= 2  # our half line, plus possibly the second kill's tail
    starts = [i for i, r in enumerate(log.records) if isinstance(r, JobStart)]
    assert len(starts) == 2
    second = [r.step for r in log.records[starts[1] :] if isinstance(r, StepRecord)]
    _check_attempt(second, first_saved, second_saved)
    saves = [r.step for r in log.records[starts[1] :] if isinstance(r, CheckpointSaved)]
    assert saves[:2] == [first_saved + 500, first_saved + 1000]


def test_closed_recorder_refuses_steps(tmp_path: Path) -> None:
    rec = Recorder(tmp_path / "r.jsonl", enabled=True)
    rec.job_end()
    with pytest.raises(InputError, match="closed"):
        rec.step(1, loss=1.0)


def test_step_times_are_written_to_the_millisecond(tmp_path: Path) -> None:
    times = iter([_T0 + 0.1234567, _T0 + 0.9996])
    rec = Recorder(tmp_path / "r.jsonl", enabled=True, clock=lambda: next(times))
    rec.step(1, loss=1.0)
    rec.step(2, loss=1.0)
    rec.close()
    assert [s.t for s in read(tmp_path / "r.jsonl").steps] == [_T0 + 0.123, _T0 + 1.0]


_numbers = st.one_of(st.none(), st.floats(allow_nan=True, allow_infinity=True, width=64))


@settings(max_examples=50, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.integers(min_value=0, max_value=10**12),
            _numbers,
            _numbers,
            _numbers,
            st.one_of(st.none(), st.integers(min_value=0, max_value=10**15)),
        ),
        max_size=30,
    )
)
def test_steps_round_trip_through_the_reader(
    steps: list[tuple[int, float | None, float | None, float | None, int | None]],
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "r.jsonl"
        rec = Recorder(path, enabled=True, clock=_Clock())
        for step, loss, grad_norm, loss_scale, tokens in steps:
            rec.step(step, loss=loss, grad_norm=grad_norm, loss_scale=loss_scale, tokens=tokens)
        rec.close()
        read_back = read(path).steps if steps else ()
    assert len(read_back) == len(steps)
    for record, (step, loss, grad_norm, loss_scale, tokens) in zip(read_back, steps, strict=True):
        assert (record.step, record.tokens) == (step, tokens)
        for got, want in (
            (record.loss, loss),
            (record.grad_norm, grad_norm),
            (record.loss_scale, loss_scale),
        ):
            assert (got is None and want is None) or (
                got is not None
                and want is not None
                and (got == want or (math.isnan(got) and math.isnan(want)))
            )
