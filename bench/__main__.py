"""Run the benchmarks: ``python -m bench [NAME ...] [--quick] [--docs PAGE]``; results also go
to bench/out/*.json, and with ``--docs`` into PAGE's tables (``bench/docs.py``).

``python -m bench --help`` lists them; ``python -m bench NAME --help`` is a benchmark's own help,
and ``python -m bench NAME OPTIONS``, where OPTIONS hold any option other than ``--quick`` and
``--docs``, is its own command line, ``python -m bench.NAME OPTIONS``, all OPTIONS passed on.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from pathlib import Path

from bench.runner import (
    OUT,
    benchmark_main,
    benchmark_parser,
    has_main,
    start_recording,
    summary,
    write_figures,
)

BENCHES = (
    "ledger",
    "simulate",
    "guard",
    "serve",
    "ladder",
    "preflight",
    "collect",
    "collect_output",
    "hostile",
    "ft",
    "utilization",
    "report_html",
    "lake",
    "weights",
    "whatif",
)


def parser() -> argparse.ArgumentParser:
    """``python -m bench``: names to run (all by default) and ``--quick``."""
    width = max(len(name) for name in BENCHES)
    listing = "\n".join(f"  {name:<{width}}  {summary(name)}" for name in BENCHES)
    out = argparse.ArgumentParser(
        prog="python -m bench",
        description="Run gpuyield's benchmarks (all of them unless NAMEs are given: the full run "
        "takes many minutes and writes a few GB under bench/out/).",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=f"benchmarks:\n{listing}\n\n'python -m bench NAME --help' describes one.",
    )
    out.add_argument("names", nargs="*", metavar="NAME", help="benchmarks to run (default: all)")
    out.add_argument("--quick", action="store_true", help="each benchmark's small configuration")
    out.add_argument(
        "--docs",
        type=Path,
        metavar="PAGE",
        help="then write the benchmarks' tables into PAGE (docs/benchmarks.md) from their figures",
    )
    return out


def run_own(name: str, argv: list[str]) -> int:
    """A benchmark's own command line: its ``main`` where it has one, else the shared one (whose
    help needs no import: ``ft`` would import torch)."""
    if not has_main(name):
        benchmark_parser(name).parse_args(argv)
    module = importlib.import_module(f"bench.{name}")
    if has_main(name):
        # Its parser names the program after argv[0] where it does not set ``prog``.
        program, sys.argv[0] = sys.argv[0], f"python -m bench.{name}"
        try:
            return int(module.main(argv))
        finally:
            sys.argv[0] = program
    return benchmark_main(name, module.run, argv)


def main(argv: list[str]) -> int:
    shared = ("--quick", "--docs")  # python -m bench's own options; any other is the benchmark's
    own = [a for a in argv if a.startswith("-") and a.split("=")[0] not in shared]
    if argv and argv[0] in BENCHES and own:
        return run_own(argv[0], argv[1:])
    args = parser().parse_args(argv)
    unknown = [name for name in args.names if name not in BENCHES]
    if unknown:
        parser().error(f"unknown benchmark {unknown[0]!r}; choose from {', '.join(BENCHES)}")
    ran = []
    for name in args.names or BENCHES:
        print(f"== {name}")
        module = importlib.import_module(f"bench.{name}")
        started = start_recording(f"python -m bench {name}" + (" --quick" if args.quick else ""))
        write_figures(name, module.run(quick=args.quick), started)
        ran.append(name)
    return 0 if args.docs is None else write_docs(args.docs, ran)


def write_docs(page: Path, ran: list[str], out: Path = OUT) -> int:
    """Write the sections of the benchmarks just run (their figures in ``out``) into ``page``:
    those it has (``guard``, for one, has no table there)."""
    from bench import docs

    listed = docs.sections(page.read_text(encoding="utf-8"))
    try:
        docs.write_docs(page, docs.load_figures(out, [name for name in ran if name in listed]))
    except docs.DocsError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    for name in ran:
        if name not in listed:
            print(f"{page}: no bench:{name} section to write")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
