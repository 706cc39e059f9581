"""Without the optional packages, the modules that need them say which extra to install."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest

from gpuyield.errors import MissingExtraError


@pytest.mark.parametrize(
    ("module", "blocked", "extra"),
    [
        ("gpuyield.guard.lightning", "lightning.pytorch", "train"),
        ("gpuyield.guard.transformers", "transformers", "train"),
    ],
)
def test_callback_modules_without_their_framework(
    monkeypatch: pytest.MonkeyPatch, module: str, blocked: str, extra: str
) -> None:
    # A None entry in sys.modules makes "import <blocked>" fail as if it were not installed.
    monkeypatch.setitem(sys.modules, blocked, None)
    monkeypatch.delitem(sys.modules, module, raising=False)
    with pytest.raises(MissingExtraError) as caught:
        importlib.import_module(module)
    assert caught.value.extra == extra
    assert caught.value.hint == f"pip install 'gpuyield[{extra}]'"


def test_tensorboard_reader_without_tensorboard(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from gpuyield.ingest.telemetry import read

    event_file = tmp_path / "events.out.tfevents.1.host"
    event_file.write_bytes(b"\x00" * 16)
    monkeypatch.setitem(sys.modules, "tensorboard.backend.event_processing", None)
    with pytest.raises(MissingExtraError) as caught:
        read(event_file, "tensorboard")
    assert caught.value.extra == "telemetry"


def test_guard_imports_only_the_standard_library() -> None:
    # Run in a fresh interpreter: this test process has already imported everything.
    import subprocess

    code = (
        "import sys, gpuyield.guard;"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in "
        "('duckdb', 'ibis', 'rich', 'numpy', 'torch', 'lightning', 'transformers', 'typer'));"
        "print(','.join(bad))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""
