"""Readers: each format read from files written the way the real tools write them."""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path

import pytest

from gpuyield.errors import InputError, ParseError, UnknownFormat
from gpuyield.ingest.telemetry import (
    CheckpointLoaded,
    CheckpointSaved,
    EvalRecord,
    JobEnd,
    JobStart,
    StepRecord,
    TelemetryFormat,
    detect,
    read,
)
from tests.telemetry.excerpts import ExcerptLine, megatron_line

_T0 = 1_764_499_200.0  # 2025-11-30T10:40:00Z, a whole-second epoch for readable fixtures
_LOSSES = [2.5, 2.4, 2.31, float("nan"), 2.2]


def _write_lines(path: Path, lines: list[str], *, newline_at_end: bool = True) -> Path:
    path.write_text("\n".join(lines) + ("\n" if newline_at_end else ""))
    return path


# -- gpuyield JSONL -----------------------------------------------------------------------------


def _contract_lines() -> list[str]:
    """The contract's example lines (docs/contracts.md), with numbers filled in."""
    return [
        '{"v":1,"event":"job_start","t":1764499200.0,"run":"pt-main","job_id":"1234",'
        '"host":"n001","pid":4242}',
        '{"v":1,"event":"step","t":1764499260.0,"step":100,"loss":2.31,"grad_norm":0.9,'
        '"loss_scale":65536,"tokens":16777216}',
        '{"v":1,"event":"checkpoint_saved","t":1764499300.0,"step":100,"duration_s":35.0}',
        '{"v":1,"event":"checkpoint_loaded","t":1764499400.0,"step":100}',
        '{"v":1,"event":"eval","t":1764499500.0,"step":100,"metrics":{"val_loss":2.4}}',
        '{"v":1,"event":"job_end","t":1764499600.0,"status":"completed"}',
    ]


def test_jsonl_contract_example(tmp_path: Path) -> None:
    log = read(_write_lines(tmp_path / "run.jsonl", _contract_lines()))
    assert log.format is TelemetryFormat.JSONL
    assert log.records == (
        JobStart(t=1764499200.0, job_id="1234", host="n001", run="pt-main", pid=4242),
        StepRecord(
            step=100,
            t=1764499260.0,
            loss=2.31,
            grad_norm=0.9,
            loss_scale=65536.0,
            tokens=16777216,
        ),
        CheckpointSaved(step=100, t=1764499300.0, duration_s=35.0),
        CheckpointLoaded(step=100, t=1764499400.0),
        EvalRecord(step=100, t=1764499500.0, metrics={"val_loss": 2.4}),
        # job_end inherits the job id and host of the job_start before it.
        JobEnd(t=1764499600.0, status="completed", job_id="1234", host="n001"),
    )
    assert log.torn_lines == 0


def test_jsonl_torn_last_line_is_skipped_and_counted(tmp_path: Path) -> None:
    lines = [*_contract_lines()[:2], '{"v":1,"event":"step","t":17644']
    log = read(_write_lines(tmp_path / "run.jsonl", lines, newline_at_end=False))
    assert log.torn_lines == 1
    assert [type(r) for r in log.records] == [JobStart, StepRecord]


def test_jsonl_torn_line_before_a_restart_is_skipped(tmp_path: Path) -> None:
    start, step = _contract_lines()[:2]
    log = read(_write_lines(tmp_path / "run.jsonl", [start, step, '{"v":1,"ev', start, step]))
    assert log.torn_lines == 1
    assert len(log.job_starts) == 2 and [s.step for s in log.steps] == [100, 100]


def test_jsonl_broken_middle_line_is_an_error(tmp_path: Path) -> None:
    start, step = _contract_lines()[:2]
    path = _write_lines(tmp_path / "run.jsonl", [start, "{oops", step])
    with pytest.raises(ParseError) as caught:
        read(path)
    assert caught.value.line == 2 and caught.value.path == str(path)


@pytest.mark.parametrize(
    ("line", "field"),
    [
        ('{"v":1,"event":"step","t":1.0,"step":"ten"}', "step"),
        ('{"v":1,"event":"step","t":1.0,"step":10,"loss":"low"}', "loss"),
        ('{"v":1,"event":"step","step":10}', "t"),
        ('{"v":2,"event":"step","t":1.0,"step":10}', "v"),
        ('{"v":1,"event":"teleport","t":1.0}', "event"),
        ('{"v":1,"event":"checkpoint_saved","t":1.0,"step":10,"duration_s":-3}', None),
        ('{"v":1,"event":"eval","t":1.0,"step":10,"metrics":{"acc":"high"}}', "metrics.acc"),
    ],
)
def test_jsonl_field_errors_name_line_and_field(
    tmp_path: Path, line: str, field: str | None
) -> None:
    path = _write_lines(tmp_path / "run.jsonl", [_contract_lines()[0], line])
    with pytest.raises(ParseError) as caught:
        read(path, "jsonl")
    assert caught.value.line == 2
    assert caught.value.field == field


# -- Megatron-LM --------------------------------------------------------------------------------


def test_megatron_real_excerpts_round_trip(tmp_path: Path, excerpts: list[ExcerptLine]) -> None:
    """Every transcribed BigScience line, printed back in Megatron's format, reads back exactly."""
    path = _write_lines(
        tmp_path / "train.log",
        ["using world size: 64, data-parallel-size: 8", "> building GPT model ..."]
        + [megatron_line(x) for x in excerpts]
        + [
            "  successfully saved checkpoint at iteration    29000 to /ckpt",
            " loading checkpoint from /ckpt at iteration 29000",
            "  successfully loaded checkpoint from /ckpt at iteration 29000",
        ],
    )
    assert detect(path) is TelemetryFormat.MEGATRON
    log = read(path)
    train = [x for x in excerpts if x.kind == "train"]
    assert [(s.step, s.loss, s.loss_scale, s.grad_norm) for s in log.steps] == [
        (x.iteration, x.lm_loss, x.loss_scale, x.grad_norm) for x in train
    ]
    validation = [x for x in excerpts if x.kind == "validation"]
    assert [(e.step, e.metrics["val_loss"]) for e in log.evals] == [
        (x.iteration, x.lm_loss) for x in validation
    ]
    assert log.checkpoints_saved == (CheckpointSaved(step=29000),)
    assert log.checkpoints_loaded == (CheckpointLoaded(step=29000),)


def test_megatron_verbatim_bloom_line_with_launcher_prefix(tmp_path: Path) -> None:
    # Verbatim from bigscience train/tr11-176B-ml/chronicles.md (iteration 31219).
    line = (
        "[default7]: iteration    31219/  115311 | consumed samples:     47778736 | consumed "
        "tokens:  97850851328 | elapsed time per iteration (s): 106.36 | learning rate: 5.279E-05 "
        "| global batch size:  2048 | lm loss: 5.098124E+00 | grad norm: 960.351 | num zeros: 0.0 "
        "| number of skipped iterations:   0 | number of nan iterations:   0 | samples per "
        "second: 19.256 | TFLOPs: 147.43 |"
    )
    log = read(_write_lines(tmp_path / "bloom.log", [line]))
    assert log.steps == (
        StepRecord(step=31219, loss=5.098124, grad_norm=960.351, tokens=97850851328),
    )


def test_megatron_timestamp_and_nan(tmp_path: Path) -> None:
    line = " [2024-05-01 10:00:00] iteration      100/    1000 | lm loss: nan | loss scale: 1.0 |"
    (step,) = read(_write_lines(tmp_path / "m.log", [line]), "megatron").steps
    # 2024-05-01T10:00:00Z = 19844 days * 86400 s + 10 h.
    assert step.t == 19844 * 86400 + 10 * 3600
    assert step.loss is not None and math.isnan(step.loss)


# -- plain CSV and W&B ----------------------------------------------------------------------------


def _write_csv(
    path: Path, header: list[str], rows: list[list[object]], delimiter: str = ","
) -> Path:
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle, delimiter=delimiter)
        writer.writerow(header)
        writer.writerows(rows)
    return path


def _loss_steps(log_steps: tuple[StepRecord, ...]) -> list[tuple[int, float | None]]:
    return [(s.step, s.loss) for s in log_steps]


def _same_losses(got: list[tuple[int, float | None]], want: list[float]) -> bool:
    return [s for s, _ in got] == list(range(len(want))) and all(
        (math.isnan(w) and g is not None and math.isnan(g)) or g == w
        for (_, g), w in zip(got, want, strict=True)
    )


@pytest.mark.parametrize("delimiter", [",", "\t"])
def test_plain_csv(tmp_path: Path, delimiter: str) -> None:
    rows = [[i, loss, 0.5, ""] for i, loss in enumerate(_LOSSES)]
    path = _write_csv(tmp_path / "loss.csv", ["step", "loss", "grad_norm", "note"], rows, delimiter)
    assert detect(path) is TelemetryFormat.CSV
    log = read(path)
    assert _same_losses(_loss_steps(log.steps), _LOSSES)
    assert {s.grad_norm for s in log.steps} == {0.5}


def test_plain_csv_without_loss_column_says_which_names_work(tmp_path: Path) -> None:
    path = _write_csv(tmp_path / "x.csv", ["step", "accuracy"], [[1, 0.5]])
    with pytest.raises(ParseError) as caught:
        read(path, "csv")
    assert caught.value.hint is not None and "train_loss" in caught.value.hint


def test_plain_csv_bad_step_names_the_line(tmp_path: Path) -> None:
    path = _write_csv(tmp_path / "x.csv", ["step", "loss"], [[0, 2.0], [1.5, 2.0]])
    with pytest.raises(ParseError) as caught:
        read(path)
    assert (caught.value.line, caught.value.field) == (3, "step")


def test_wandb_history_csv(tmp_path: Path) -> None:
    # run.history().to_csv(): _step, _runtime, _timestamp and the logged keys; eval rows lack loss.
    rows: list[list[object]] = [
        [i, 10.0 * i, _T0 + 10 * i, loss, "", 65536] for i, loss in enumerate(_LOSSES)
    ]
    rows.append([5, 50.0, _T0 + 50, "", 2.9, ""])
    header = ["_step", "_runtime", "_timestamp", "train/loss", "eval/loss", "train/loss_scale"]
    path = _write_csv(tmp_path / "history.csv", header, rows)
    assert detect(path) is TelemetryFormat.WANDB
    log = read(path)
    assert _same_losses(_loss_steps(log.steps), _LOSSES)
    assert [s.t for s in log.steps] == [_T0 + 10 * i for i in range(5)]
    assert {s.loss_scale for s in log.steps} == {65536.0}


def test_wandb_panel_export(tmp_path: Path) -> None:
    header = [
        "Step",
        "pt-main - train/loss",
        "pt-main - train/loss__MIN",
        "pt-main - train/loss__MAX",
    ]
    rows = [[i, loss, loss - 0.1, loss + 0.1] for i, loss in enumerate(_LOSSES)]
    path = _write_csv(tmp_path / "panel.csv", header, rows)
    assert detect(path) is TelemetryFormat.WANDB
    assert _same_losses(_loss_steps(read(path).steps), _LOSSES)


def test_wandb_panel_export_of_two_runs_is_refused(tmp_path: Path) -> None:
    header = ["Step", "a - train/loss", "b - train/loss"]
    path = _write_csv(tmp_path / "panel.csv", header, [[0, 1.0, 2.0]])
    with pytest.raises(ParseError, match="2 runs"):
        read(path)


@pytest.mark.parametrize("shape", ["list", "lines"])
def test_wandb_json(tmp_path: Path, shape: str) -> None:
    rows = [{"_step": i, "_timestamp": _T0 + i, "loss": loss} for i, loss in enumerate(_LOSSES)]
    path = tmp_path / "history.json"
    if shape == "list":
        path.write_text(json.dumps(rows))
    else:
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert detect(path) is TelemetryFormat.WANDB
    assert _same_losses(_loss_steps(read(path).steps), _LOSSES)


# -- TensorBoard (written by the tensorboard package) ---------------------------------------------


def test_tensorboard_log_dir(tmp_path: Path) -> None:
    summary = pytest.importorskip("tensorboard.summary")
    writer = summary.Writer(str(tmp_path / "tb"))
    for step, loss in enumerate(_LOSSES):
        writer.add_scalar("train/loss", loss, step=step, wall_time=_T0 + step)
        writer.add_scalar("grad-norm", 0.25 * (step + 1), step=step, wall_time=_T0 + step)
        writer.add_scalar("learning_rate", 1e-4, step=step, wall_time=_T0 + step)
    writer.close()
    assert detect(tmp_path / "tb") is TelemetryFormat.TENSORBOARD
    log = read(tmp_path / "tb")
    assert log.format is TelemetryFormat.TENSORBOARD
    # TensorBoard stores float32: compare at float32 precision.
    assert [s.step for s in log.steps] == [0, 1, 2, 3, 4]
    for record, loss in zip(log.steps, _LOSSES, strict=True):
        assert record.loss is not None
        assert (math.isnan(loss) and math.isnan(record.loss)) or record.loss == pytest.approx(
            loss, rel=1e-6
        )
    assert [s.grad_norm for s in log.steps] == [0.25, 0.5, 0.75, 1.0, 1.25]
    assert [s.t for s in log.steps] == [_T0 + i for i in range(5)]
    (event_file,) = (tmp_path / "tb").iterdir()
    assert detect(event_file) is TelemetryFormat.TENSORBOARD


def test_tensorboard_without_a_loss_tag_lists_the_tags(tmp_path: Path) -> None:
    summary = pytest.importorskip("tensorboard.summary")
    writer = summary.Writer(str(tmp_path / "tb"))
    writer.add_scalar("eval/accuracy", 0.5, step=1)
    writer.close()
    with pytest.raises(InputError, match="eval/accuracy"):
        read(tmp_path / "tb")


def test_tensorboard_dir_without_event_files(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    with pytest.raises(InputError, match="no TensorBoard event files"):
        read(tmp_path / "empty", "tensorboard")


# -- MLflow file store (written by mlflow) ---------------------------------------------------------


@pytest.mark.slow
def test_mlflow_file_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    mlflow = pytest.importorskip("mlflow")
    # MLflow 3 keeps the file store in maintenance mode and refuses it unless told otherwise.
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    mlflow.set_tracking_uri(f"file:{tmp_path / 'mlruns'}")
    try:
        with mlflow.start_run(run_name="pt-main"):
            for step, loss in enumerate(_LOSSES):
                timestamp_ms = int((_T0 + step) * 1000)
                mlflow.log_metric("train/loss", loss, step=step, timestamp=timestamp_ms)
                mlflow.log_metric("grad_norm", 0.5, step=step, timestamp=timestamp_ms)
    finally:
        mlflow.set_tracking_uri(None)
    root = tmp_path / "mlruns"
    assert detect(root) is TelemetryFormat.MLFLOW
    log = read(root)
    assert _same_losses(_loss_steps(log.steps), _LOSSES)
    assert [s.t for s in log.steps] == [_T0 + i for i in range(5)]
    assert {s.grad_norm for s in log.steps} == {0.5}


def test_mlflow_run_without_a_loss_metric_lists_the_metrics(tmp_path: Path) -> None:
    metrics = tmp_path / "run" / "metrics"
    metrics.mkdir(parents=True)
    (metrics.parent / "meta.yaml").write_text("run_id: run\n")
    (metrics / "accuracy").write_text("1000 0.5 0\n")
    with pytest.raises(InputError, match="accuracy"):
        read(tmp_path / "run")


def test_mlflow_store_with_two_runs_asks_for_one(tmp_path: Path) -> None:
    for run in ("aaa", "bbb"):
        metrics = tmp_path / "mlruns" / "0" / run / "metrics"
        metrics.mkdir(parents=True)
        (metrics.parent / "meta.yaml").write_text(f"run_id: {run}\n")
        (metrics / "loss").write_text("1000 2.5 0\n")
    with pytest.raises(InputError, match="2 MLflow runs"):
        read(tmp_path / "mlruns")
    log = read(tmp_path / "mlruns" / "0" / "aaa")
    assert log.steps == (StepRecord(step=0, t=1.0, loss=2.5),)


# -- detection ------------------------------------------------------------------------------------


def test_unknown_content_is_refused(tmp_path: Path) -> None:
    path = _write_lines(tmp_path / "notes.txt", ["hello", "world"])
    with pytest.raises(UnknownFormat):
        read(path)


def test_unknown_format_name_is_refused(tmp_path: Path) -> None:
    path = _write_lines(tmp_path / "run.jsonl", _contract_lines())
    with pytest.raises(UnknownFormat, match="parquet"):
        read(path, "parquet")


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="no such file"):
        read(tmp_path / "nope.jsonl")
