"""docs/guard.md's session: the run it scans is made here, and its table is what the scan prints."""

from __future__ import annotations

import math
import re
from pathlib import Path

from gpuyield.guard import Recorder
from gpuyield.ingest.telemetry import scan

DOCS = Path(__file__).resolve().parents[2] / "docs" / "guard.md"


def write_pt_main(path: Path) -> Path:
    """400 steps of a falling loss (deterministic 1% wiggle), x1.6 from step 310 on, a checkpoint
    every 100 steps: the run the manual scans."""
    with Recorder(path, enabled=True) as rec:
        for step in range(400):
            loss = 2.0 + 3.0 * math.exp(-step / 80) + 0.02 * math.sin(step * 1.3)
            rec.step(step, loss=loss * (1.6 if step >= 310 else 1.0), grad_norm=0.4)
            if step % 100 == 0 and step:
                rec.checkpoint_saved(step, duration_s=5.0)
    return path


def test_the_manual_shows_what_the_scan_finds(tmp_path: Path) -> None:
    result = scan(write_pt_main(tmp_path / "pt-main.jsonl"))
    text = DOCS.read_text(encoding="utf-8")
    rows = re.findall(
        r"^│ (\d+)\s+│ (\w+)\s+│ (\w+)\s+│ ([\d.]+)\s+│ ([\d.]+)\s+│ ([\d.]+)\s+│ (\d+)\s+│ (\d+)",
        text,
        re.M,
    )
    shown = [(int(a), b, c, d, e, f, int(g), int(h)) for a, b, c, d, e, f, g, h in rows]
    found = [
        (
            e.step,
            e.kind.value,
            e.metric,
            f"{e.value:.6g}",
            f"{e.threshold:.6g}",
            f"{e.baseline:.6g}",
            e.reported_step or e.step,
            e.rollback_step,
        )
        for e in result.events
    ]
    assert shown == found
