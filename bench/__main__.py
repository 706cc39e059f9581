"""Run the benchmarks: `python -m bench [NAME ...] [--quick]`; results also go to bench/out/*.json."""

from __future__ import annotations

import importlib
import json
import sys
from pathlib import Path

BENCHES = (
    "ledger",
    "simulate",
    "guard",
    "serve",
    "ladder",
    "collect",
    "hostile",
    "ft",
    "utilization",
    "report_html",
    "lake",
)


def main(argv: list[str]) -> int:
    quick = "--quick" in argv
    names = [a for a in argv if not a.startswith("-")] or list(BENCHES)
    out_dir = Path(__file__).parent / "out"
    out_dir.mkdir(exist_ok=True)
    for name in names:
        if name not in BENCHES:
            print(f"unknown benchmark {name!r}; choose from {', '.join(BENCHES)}", file=sys.stderr)
            return 2
        try:
            module = importlib.import_module(f"bench.{name}")
        except ModuleNotFoundError as error:
            if error.name != f"bench.{name}":
                raise
            print(f"== {name}: not built yet")
            continue
        print(f"== {name}")
        figures = module.run(quick=quick)
        (out_dir / f"{name}.json").write_text(json.dumps(figures, indent=2, default=str) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
