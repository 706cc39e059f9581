"""Recorder JSONL that is not a recorder's (issue 26): refused naming the line, no traceback, and
read a line at a time (a line past its budget is refused, not held whole)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpuyield.errors import ParseError
from gpuyield.ingest.telemetry import jsonl, wandb

START = json.dumps({"v": 1, "event": "job_start", "t": 1.0, "job_id": "7"})
STEP = json.dumps({"v": 1, "event": "step", "t": 2.0, "step": 1, "loss": 2.5})


def _write(tmp_path: Path, *lines: str) -> Path:
    path = tmp_path / "run.jsonl"
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.mark.parametrize(
    ("line", "words"),
    [
        ("[" * 200_000, "nested too deeply"),  # was a RecursionError traceback
        ('{"v": 1, "event": "step", "t": 1' + "0" * 5000 + "}", "digits"),
    ],
    ids=["nested", "digits"],
)
def test_a_line_json_cannot_hold_is_refused_naming_it(
    tmp_path: Path, line: str, words: str
) -> None:
    """Even followed by a restart (where a torn line would be skipped): it is not a torn line."""
    with pytest.raises(ParseError) as error:
        jsonl.read(_write(tmp_path, START, line, START, STEP))
    assert error.value.line == 2
    assert words in error.value.message
    assert error.value.hint


def test_a_line_past_the_budget_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(jsonl, "MAX_LINE_BYTES", 100)
    long_step = json.dumps({"v": 1, "event": "step", "t": 2.0, "step": 1, "note": "x" * 200})
    with pytest.raises(ParseError) as error:
        jsonl.read(_write(tmp_path, START, STEP, long_step))
    assert error.value.line == 3
    assert "longer than 100 bytes" in error.value.message


def test_more_records_than_the_budget_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(jsonl, "MAX_RECORDS", 3)
    with pytest.raises(ParseError) as error:
        jsonl.read(_write(tmp_path, START, STEP, STEP, STEP))
    assert error.value.line == 4
    assert "split the log" in (error.value.hint or "")


def test_torn_lines_read_a_line_at_a_time_are_the_crash_tails(tmp_path: Path) -> None:
    """A broken line before a restart or at the end is torn; one before another line is not."""
    log = jsonl.read(_write(tmp_path, START, STEP, '{"v": 1, "ev', "", START, STEP, '{"v"'))
    assert log.torn_lines == 2
    assert len(log.records) == 4
    with pytest.raises(ParseError) as error:
        jsonl.read(_write(tmp_path, START, '{"v": 1, "ev', STEP))
    assert error.value.line == 2
    with pytest.raises(ParseError) as error:
        jsonl.read(_write(tmp_path, START, '{"v": 1, "ev', "", "{broken", START))
    assert error.value.line == 2


@pytest.mark.parametrize(
    "line",
    ['{"_step": 1, "loss": ' + "[" * 200_000, '{"_step": 1, "loss": 1' + "0" * 5000 + "}"],
    ids=["nested", "digits"],
)
def test_a_wandb_export_json_cannot_hold_is_refused_naming_the_line(
    tmp_path: Path, line: str
) -> None:
    path = tmp_path / "history.jsonl"
    path.write_text('{"_step": 0, "loss": 2.5}\n' + line + "\n")
    with pytest.raises(ParseError) as error:
        wandb.read(path)
    assert error.value.line == 2
    assert "invalid JSON" in error.value.message
