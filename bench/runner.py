"""The command line every benchmark shares: ``--quick``, ``--help``, figures into ``bench/out/``.

``python -m bench`` lists and runs the benchmarks through here; a benchmark without options of its
own (``python -m bench.guard``, ``python -m bench ft --help``) gets its command line from
``benchmark_main``. Help is built from the modules' docstrings, read without importing them, so
``--help`` never starts a benchmark, imports torch or generates data.
"""

from __future__ import annotations

import argparse
import ast
import json
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


def write_figures(name: str, figures: dict[str, Any]) -> None:
    """Save a benchmark's figures as ``bench/out/<name>.json``."""
    OUT.mkdir(exist_ok=True)
    (OUT / f"{name}.json").write_text(json.dumps(figures, indent=2, default=str) + "\n")


def benchmark_main(name: str, run: Callable[..., dict[str, Any]], argv: list[str]) -> int:
    """Parse ``--quick`` (or print help), run the benchmark, save its figures."""
    args = benchmark_parser(name).parse_args(argv)
    write_figures(name, run(quick=args.quick))
    return 0
