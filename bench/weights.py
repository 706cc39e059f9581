"""Weighted yield: `gpuyield report --json` on a mixed fleet against the same fleet untyped
(`python -m bench weights`).

The bundled ``mixed-fleet`` scenario scaled up (H100 lineage nodes, A100 research nodes, each
priced) and the same scenario without GPU types or prices (one class of GPU: the report reads
the ledger as it is). Same seed, same jobs. Figures: each report's wall time and peak RSS in a
fresh process (interpreter and imports included), the median of repeats, and their ratio: what
splitting the ledger by GPU class and weighing it costs (ledger/weights).
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import tempfile
import time
import tomllib
from pathlib import Path
from typing import Any

import tomli_w

from gpuyield.simulate.api import run_scenario
from gpuyield.tomlfile import read_bundled

QUICK = {"num_nodes": 200, "days": 7}
FULL = {"num_nodes": 600, "days": 14}
REPEATS = 3
_TYPED_KEYS = ("research_accelerator", "price_per_gpu_hour", "research_price_per_gpu_hour")
# Peak RSS of the child that ran the report, printed by a wrapper process (ru_maxrss, KB).
_WRAPPER = (
    "import resource, subprocess, sys; subprocess.run(sys.argv[1:], check=True, "
    "stdout=subprocess.DEVNULL); print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)"
)


def _scenario(out: Path, shape: dict[str, int], typed: bool) -> Path:
    data = read_bundled("scenarios/sim", "mixed-fleet").data
    data = json.loads(json.dumps(data))  # a copy to edit
    data["fleet"]["num_nodes"] = shape["num_nodes"]
    data["scenario"]["days"] = shape["days"]
    if not typed:
        for key in _TYPED_KEYS:
            data["fleet"].pop(key, None)
    path = out / ("typed.toml" if typed else "untyped.toml")
    path.write_text(tomli_w.dumps(data))
    tomllib.loads(path.read_text())
    return path


def _report(db: Path) -> dict[str, float]:
    """Median wall seconds and the largest peak RSS (MB) of ``gpuyield report --json``."""
    walls, peaks = [], []
    for _ in range(REPEATS):
        began = time.perf_counter()
        out = subprocess.run(
            [
                sys.executable,
                "-c",
                _WRAPPER,
                sys.executable,
                "-m",
                "gpuyield",
                "report",
                "--db",
                str(db),
                "--json",
            ],
            check=True,
            capture_output=True,
            text=True,
        )
        walls.append(time.perf_counter() - began)
        peaks.append(int(out.stdout.strip()) / 1024)
    return {"wall_s": round(statistics.median(walls), 2), "peak_rss_mb": round(max(peaks), 1)}


def run(*, quick: bool) -> dict[str, Any]:
    shape = QUICK if quick else FULL
    figures: dict[str, Any] = {"shape": shape, "repeats": REPEATS}
    with tempfile.TemporaryDirectory(prefix="gpuyield-bench-weights-") as tmp:
        root = Path(tmp)
        for typed in (False, True):
            name = "typed" if typed else "untyped"
            out = root / name
            summary = run_scenario(_scenario(root, shape, typed), out)
            truth = json.loads((out / "truth.json").read_text())
            start, end = (truth["window"][k].removesuffix("Z") for k in ("start", "end"))
            db = root / f"{name}.duckdb"
            subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "gpuyield",
                    "ingest",
                    "slurm",
                    "--dir",
                    str(out),
                    "--db",
                    str(db),
                    "--since",
                    start,
                    "--until",
                    end,
                ],
                check=True,
                capture_output=True,
            )
            figures[name] = {"research_jobs": summary.research_jobs, **_report(db)}
            print(f"  {name}: {figures[name]}")
    figures["ratio_wall"] = round(figures["typed"]["wall_s"] / figures["untyped"]["wall_s"], 2)
    figures["ratio_peak_rss"] = round(
        figures["typed"]["peak_rss_mb"] / figures["untyped"]["peak_rss_mb"], 2
    )
    print(f"  typed / untyped: {figures['ratio_wall']}x time, {figures['ratio_peak_rss']}x RSS")
    return figures
