"""``python -m bench --help`` lists the benchmarks and each has its own help; none of it runs one.

``--help`` once started the whole benchmark (ten minutes, 2.8 GB): the runner took every argument
not starting with ``-`` as a name and ignored the rest.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from bench.__main__ import BENCHES, main
from bench.runner import OUT, has_main, summary

_REPO = Path(__file__).resolve().parents[2]


def test_help_lists_every_benchmark(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["--help"])
    assert exit_.value.code == 0
    shown = capsys.readouterr().out
    assert shown.startswith("usage: python -m bench")
    for name in BENCHES:
        assert f"  {name}" in shown and summary(name) in shown


@pytest.mark.parametrize("name", BENCHES)
def test_each_benchmark_has_its_own_help(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    before = {p.name: p.stat().st_mtime_ns for p in OUT.glob("*.json")} if OUT.exists() else {}
    with pytest.raises(SystemExit) as exit_:
        main([name, "--help"])
    assert exit_.value.code == 0
    shown = capsys.readouterr().out
    assert shown.startswith(f"usage: python -m bench.{name} ")
    if not has_main(name):  # the shared command line: --quick, and the module's docstring
        assert "--quick" in shown and summary(name) in shown
    after = {p.name: p.stat().st_mtime_ns for p in OUT.glob("*.json")} if OUT.exists() else {}
    assert after == before  # nothing ran, no figures written


def test_unknown_names_are_usage_errors(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["ledger", "nosuch"])
    assert exit_.value.code == 2
    assert "unknown benchmark 'nosuch'" in capsys.readouterr().err


def test_a_module_run_alone_has_help_too() -> None:
    # `python -m bench.guard --help` used to run the guard benchmark with --help ignored.
    shown = subprocess.run(
        [sys.executable, "-m", "bench.guard", "--help"],
        cwd=_REPO,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert shown.startswith("usage: python -m bench.guard [-h] [--quick]")
