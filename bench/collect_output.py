"""Memory of one Slurm command's output in ``gpuyield collect``: streamed to a file vs held in memory.

``gpuyield collect`` used to read each command's output with ``subprocess.run(capture_output=True)``
and then write it out (2.3x the output at its peak, issue 26). Now the command writes into a file
(``ingest/slurm_client.py``). Each run below is a fresh process that runs one command printing
SIZE bytes (``head -c SIZE /dev/zero``, as a large ``sacct`` would) into a file, either way; peak
RSS is that process's high-water mark (``bench.ledger.measure``). The baseline is the old way in the
same run; the figure of merit is the peak over the output size (target: far below 1, flat in SIZE).

Run: ``python -m bench collect_output [--quick]`` (quick: 64 MB; full: 64 MB and 512 MB).
"""

from __future__ import annotations

import sys
from typing import Any

from bench.ledger import measure

QUICK_MB = (64,)
FULL_MB = (64, 512)
_STREAMED = """
import sys, pathlib, tempfile
from gpuyield.ingest.slurm_client import run_client
size = int(sys.argv[1])
with tempfile.TemporaryDirectory() as tmp:
    out = pathlib.Path(tmp) / "out"
    result = run_client(("head", "-c", str(size), "/dev/zero"), out, timeout_s=600,
                        max_bytes=size + 1)
    assert result.ok and result.output_bytes == size, result
"""
_IN_MEMORY = """
import sys, pathlib, subprocess, tempfile
size = int(sys.argv[1])
proc = subprocess.run(("head", "-c", str(size), "/dev/zero"), capture_output=True, check=True)
with tempfile.TemporaryDirectory() as tmp:
    (pathlib.Path(tmp) / "out").write_bytes(proc.stdout)
"""
_IMPORT_ONLY = "import gpuyield.ingest.slurm_client, subprocess"


def run(*, quick: bool = False) -> dict[str, Any]:
    """Peak RSS of each way at each size, and of the interpreter alone."""
    base = measure([sys.executable, "-c", _IMPORT_ONLY]).figures()
    figures: dict[str, Any] = {"interpreter": base}
    for size_mb in QUICK_MB if quick else FULL_MB:
        size = size_mb << 20
        streamed = measure([sys.executable, "-c", _STREAMED, str(size)]).figures()
        held = measure([sys.executable, "-c", _IN_MEMORY, str(size)]).figures()
        over = {
            name: round((m["peak_rss_mb"] - base["peak_rss_mb"]) / size_mb, 3)
            for name, m in (("streamed", streamed), ("in_memory", held))
        }
        figures[f"{size_mb}MB"] = {"streamed": streamed, "in_memory": held,
                                   "peak_over_output": over}  # fmt: skip
        print(
            f"{size_mb:>5} MB output: streamed peak {streamed['peak_rss_mb']:.0f} MB "
            f"({over['streamed']:.2f}x the output above the interpreter's "
            f"{base['peak_rss_mb']:.0f} MB), in memory {held['peak_rss_mb']:.0f} MB "
            f"({over['in_memory']:.2f}x)"
        )
    return figures


if __name__ == "__main__":
    run(quick="--quick" in sys.argv)
