"""The command line every benchmark shares: ``--quick``, ``--help``, figures into ``bench/out/``.

``python -m bench`` lists and runs the benchmarks through here; a benchmark without options of its
own (``python -m bench.guard``, ``python -m bench ft --help``) gets its command line from
``benchmark_main``. Help is built from the modules' docstrings, read without importing them, so
``--help`` never starts a benchmark, imports torch or generates data.
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import json
import os
import platform
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).parent
OUT = BENCH_DIR / "out"


def _tree(name: str) -> ast.Module:
    return ast.parse((BENCH_DIR / f"{name}.py").read_text(encoding="utf-8"))


def docstring(name: str) -> str:
    """The module docstring of benchmark ``name`` (``bench/<name>.py``), without importing it."""
    return ast.get_docstring(_tree(name)) or name


def has_main(name: str) -> bool:
    """Whether benchmark ``name`` has a command line of its own (a top-level ``main``)."""
    return any(
        isinstance(node, ast.FunctionDef) and node.name == "main" for node in _tree(name).body
    )


def summary(name: str) -> str:
    """The first line of a benchmark's docstring."""
    return docstring(name).splitlines()[0].rstrip(".")


def benchmark_parser(name: str) -> argparse.ArgumentParser:
    """``python -m bench.<name>``: ``--quick`` and the module's docstring as help."""
    parser = argparse.ArgumentParser(
        prog=f"python -m bench.{name}",
        description=docstring(name),
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=f"Figures go to bench/out/{name}.json.",
    )
    parser.add_argument("--quick", action="store_true", help="the small configuration (minutes)")
    return parser


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class Recorded:
    """Which command measured a benchmark's figures, when, at which commit and under what load:
    the line above every table docs/benchmarks.md renders from ``bench/out/<name>.json``."""

    command: str
    when: str
    commit: str
    cpus: int
    # Other work on the (shared) machine slows every figure; the 1-minute load average says how
    # much, at the start of the run and at its end.
    load_avg_1m_start: float
    load_avg_1m_end: float | None
    python: str

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def _commit() -> str:
    """``git describe --always --dirty`` of the checkout the benchmark ran from."""
    done = subprocess.run(
        ["git", "describe", "--always", "--dirty", "--abbrev=9"],
        cwd=BENCH_DIR,
        capture_output=True,
        text=True,
        check=False,
    )
    return done.stdout.strip() or "unknown"


def start_recording(command: str) -> Recorded:
    """What is known before a benchmark starts (its end load average comes in ``write_figures``)."""
    return Recorded(
        command=command,
        when=time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        commit=_commit(),
        cpus=os.cpu_count() or 0,
        load_avg_1m_start=round(os.getloadavg()[0], 2),
        load_avg_1m_end=None,
        python=platform.python_version(),
    )


def write_figures(name: str, figures: dict[str, Any], started: Recorded) -> None:
    """Save a benchmark's figures as ``bench/out/<name>.json``, with how they were recorded."""
    ended = dataclasses.replace(started, load_avg_1m_end=round(os.getloadavg()[0], 2))
    OUT.mkdir(exist_ok=True)
    saved = {**figures, "recorded": ended.to_dict()}
    (OUT / f"{name}.json").write_text(json.dumps(saved, indent=2, default=str) + "\n")


def benchmark_main(name: str, run: Callable[..., dict[str, Any]], argv: list[str]) -> int:
    """Parse ``--quick`` (or print help), run the benchmark, save its figures."""
    args = benchmark_parser(name).parse_args(argv)
    started = start_recording(" ".join([f"python -m bench.{name}", *argv]))
    write_figures(name, run(quick=args.quick), started)
    return 0
