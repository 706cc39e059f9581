"""Golden outputs of the simulator: the ledger-check scenario's truth and files, a small sweep.

Byte-for-byte across refactors; `pytest --regen-golden` rewrites them when a change is meant.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from pathlib import Path

from gpuyield.simulate.api import RunSummary
from gpuyield.simulate.sweep import SweepParam, SweepSpec, base_model, run_sweep
from gpuyield.simulate.sweep_files import write_sweep


def test_ledger_check_truth(ledger_check: RunSummary, golden: Callable[[str, str], None]) -> None:
    golden("ledger-check-truth.json", (ledger_check.out_dir / "truth.json").read_text())


def test_ledger_check_files(ledger_check: RunSummary, golden: Callable[[str, str], None]) -> None:
    # The Slurm-format logs are large: their digests stand for them.
    lines = [
        f"{hashlib.sha256(p.read_bytes()).hexdigest()}  {p.stat().st_size:>9}  {p.name}"
        for p in sorted(ledger_check.out_dir.iterdir())
        if p.is_file()
    ]
    golden("ledger-check-files.txt", "\n".join(lines) + "\n")


def test_sweep_files(tmp_path: Path, golden: Callable[[str, str], None]) -> None:
    # Built as the CLI builds it, so the stated assumptions are pinned too.
    base = base_model(days=30, gpus=16384)
    spec = SweepSpec(
        param=SweepParam.INTERVAL_S,
        values=(600.0, 1800.0),
        seeds=1,
        base=base.model,
        assumptions=base.assumptions,
    )
    write_sweep(run_sweep(spec), tmp_path, plots=False)
    golden("sweep-interval.csv", (tmp_path / "sweep.csv").read_text())
    golden("sweep-interval.json", (tmp_path / "sweep.json").read_text())
