"""Offline scan and `gpuyield divergence scan`: events, evidence, the checkpoint to roll back to."""

from __future__ import annotations

import json
import math
from pathlib import Path

import typer
from typer.testing import CliRunner

from gpuyield.cli import divergence
from gpuyield.guard import EventKind, Recorder, WatchConfig
from gpuyield.ingest.telemetry import scan
from tests.telemetry.excerpts import ExcerptLine, load_excerpts, megatron_line

_CHECKPOINT_STEP = 40
_SPIKE_STEP = 55


def _recorded_run(path: Path) -> Path:
    """A healthy run at loss 2.0 +- 1%, a checkpoint at step 40, a NaN-free spike at step 55."""
    rec = Recorder(path, enabled=True)
    rec.job_start()
    for step in range(80):
        wiggle = 0.02 * ((step * 7919) % 11 - 5) / 5  # deterministic +-1% noise
        loss = 2.0 + wiggle if step != _SPIKE_STEP else 9.0
        rec.step(step, loss=loss, grad_norm=0.5)
        if step == _CHECKPOINT_STEP:
            rec.checkpoint_saved(step, duration_s=12.0)
    rec.job_end("completed")
    return path


def test_scan_reports_the_spike_and_the_rollback_checkpoint(tmp_path: Path) -> None:
    result = scan(_recorded_run(tmp_path / "run.jsonl"))
    assert result.format == "jsonl" and result.num_steps == 80
    (event,) = result.events
    assert (event.step, event.kind, event.value) == (_SPIKE_STEP, EventKind.LOSS_SPIKE, 9.0)
    assert event.rollback_step == _CHECKPOINT_STEP
    assert event.threshold < 9.0 and event.baseline is not None and event.baseline < 2.05


def test_scan_of_a_real_bigscience_spike(tmp_path: Path) -> None:
    """tr1-13B around iteration 29050 (loss 2.77 -> 7.34, loss scale 65536 -> 4096).

    The excerpt starts 3 logged points before the spike, too few for a warm-up, so 60 healthy
    points at its first loss are logged before it (every 10 iterations, as in that run's log).
    """
    block = [
        x
        for x in load_excerpts()
        if x.source_file == "tr1-13B-base/chronicles.md" and x.code_block == 6
    ]
    first = block[0]
    prefix = [
        megatron_line(
            ExcerptLine(
                source_file=first.source_file,
                code_block=0,
                kind="train",
                iteration=first.iteration - 10 * (60 - i),
                total_iterations=first.total_iterations,
                lm_loss=first.lm_loss * (1 + 0.004 * ((i * 31) % 5 - 2)),
                loss_scale=first.loss_scale,
                grad_norm=first.grad_norm,
            )
        )
        for i in range(60)
    ]
    path = tmp_path / "tr1.log"
    path.write_text("\n".join(prefix + [megatron_line(x) for x in block]) + "\n")
    result = scan(path, config=WatchConfig())
    kinds = {(e.step, e.kind) for e in result.events}
    assert (29050, EventKind.LOSS_SPIKE) in kinds
    # 65536 -> 8192 -> 4096: 4096 is 16x below the window max.
    assert (29060, EventKind.LOSS_SCALE_COLLAPSE) in kinds


def _app() -> typer.Typer:
    app = typer.Typer()
    app.add_typer(divergence.app, name="divergence")
    return app


def test_cli_json_lists_events(tmp_path: Path) -> None:
    path = _recorded_run(tmp_path / "run.jsonl")
    result = CliRunner().invoke(_app(), ["divergence", "scan", str(path), "--json"])
    assert result.exit_code == 3, result.output  # the check ran and found a divergence
    data = json.loads(result.stdout)
    assert [(e["step"], e["kind"], e["rollback_step"]) for e in data["events"]] == [
        (_SPIKE_STEP, "loss_spike", _CHECKPOINT_STEP)
    ]


def test_cli_json_is_strict_json_with_nan(tmp_path: Path) -> None:
    path = tmp_path / "loss.csv"
    path.write_text("step,loss\n0,2.0\n1,nan\n")
    result = CliRunner().invoke(_app(), ["divergence", "scan", str(path), "--json"])
    assert result.exit_code == 3, result.output

    def refuse(name: str) -> float:
        raise AssertionError(f"non-standard JSON constant {name}")

    (event,) = json.loads(result.stdout, parse_constant=refuse)["events"]
    assert event["kind"] == "nonfinite" and event["value"] == "NaN"
    assert math.isnan(float(event["value"]))


def test_cli_table_and_format_option(tmp_path: Path) -> None:
    path = _recorded_run(tmp_path / "run.jsonl")
    result = CliRunner().invoke(
        _app(), ["divergence", "scan", str(path), "--format", "jsonl"], env={"COLUMNS": "200"}
    )
    assert result.exit_code == 3, result.output
    # The console's width is fixed when it is first created, so long paths may wrap the line.
    flat = " ".join(result.output.split())
    assert "loss_spike" in flat and "80 steps read as jsonl" in flat


def test_cli_missing_file_exits_1_with_a_message(tmp_path: Path) -> None:
    result = CliRunner().invoke(_app(), ["divergence", "scan", str(tmp_path / "missing.jsonl")])
    assert result.exit_code == 1
    assert "no such file" in " ".join(result.output.split())
    assert "Traceback" not in result.output


def test_cli_unknown_format_exits_1_with_the_choices(tmp_path: Path) -> None:
    path = _recorded_run(tmp_path / "run.jsonl")
    result = CliRunner().invoke(_app(), ["divergence", "scan", str(path), "--format", "parquet"])
    assert result.exit_code == 1
    output = " ".join(result.output.split())
    assert "unknown telemetry format" in output and "megatron" in output


def test_every_command_and_option_has_help() -> None:
    command = typer.main.get_command(_app())
    group = command.commands["divergence"]  # type: ignore[attr-defined]
    assert group.help
    scan_command = group.commands["scan"]
    assert scan_command.help
    for param in scan_command.params:
        assert getattr(param, "help", None), f"{param.name} has no help text"
