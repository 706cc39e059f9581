"""A sweep's files: ``sweep.csv``, ``sweep.json`` and, with matplotlib, ``sweep.png`` / ``sweep.html``.

Apart from ``sweep.py`` so that running a sweep and plotting it do not import each other.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

from gpuyield.simulate.sweep import SweepResult, SweepSpec, run_sweep, value_label


def write_sweep(result: SweepResult, out_dir: Path, *, plots: bool = True) -> list[Path]:
    """Write ``sweep.csv``, ``sweep.json`` and (with matplotlib) ``sweep.png`` / ``sweep.html``."""
    out_dir.mkdir(parents=True, exist_ok=True)
    written = [out_dir / "sweep.csv", out_dir / "sweep.json"]
    with written[0].open("w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh, lineterminator="\n")
        writer.writerow(
            [
                "policy",
                result.spec.param.value,
                "ettr_mean",
                "ettr_std",
                "yield_mean",
                "interruptions_mean",
                "mttf_h",
            ]
        )
        for p in result.points:
            writer.writerow(
                [
                    p.policy.value,
                    value_label(p.value),
                    f"{p.ettr_mean:.6f}",
                    f"{p.ettr_std:.6f}",
                    f"{p.yield_mean:.6f}",
                    f"{p.interruptions_mean:.3f}",
                    f"{p.mttf_h:.4f}",
                ]
            )
    written[1].write_text(json.dumps(result.to_dict(), indent=2) + "\n", encoding="utf-8")
    if plots:
        from gpuyield.simulate.plots import write_plots

        written += write_plots(result, out_dir)
    return written


def run_and_write_sweep(spec: SweepSpec, out_dir: Path, *, jobs: int, plots: bool) -> SweepResult:
    """Run ``spec`` in ``jobs`` processes and write its files to ``out_dir``."""
    result = run_sweep(spec, jobs=jobs)
    write_sweep(result, out_dir, plots=plots)
    return result
