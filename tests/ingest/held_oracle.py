"""The GPUs each job held, read from the jobs-detail recording without gpuyield's parser.

Good for that recording's shape only (one ``GRES=gpu:N(IDX:a-b)`` per node group, node lists
``nX`` or ``nX[a-b]``-style ``n[a-b]``): an independent check of ``ingest/jobs_detail.py``.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path

FIXTURE = Path(__file__).parent / "fixtures" / "jobs-detail"
_GROUP = re.compile(r"Nodes=(\S+) CPU_IDs=\S+ Mem=\S+ GRES=gpu:\d+\(IDX:(\d+)-(\d+)\)")


def nodes_of(text: str) -> list[str]:
    """``n1`` or ``n[2-3]`` -> node names."""
    match = re.fullmatch(r"n\[(\d+)-(\d+)\]", text)
    if match is None:
        return [text]
    return [f"n{i}" for i in range(int(match.group(1)), int(match.group(2)) + 1)]


def epoch(text: str) -> int:
    return int(datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp())


def held(path: Path) -> set[tuple[str, int, str, int, int]]:
    """``(job id, start, node, gpu, seen)`` for every GPU index the file names."""
    rows = set()
    for line in path.read_text().splitlines():
        job = re.search(r"JobId=(\d+) ", line)
        start = re.search(r" StartTime=(\S+) ", line)
        run = re.search(r" RunTime=(\d\d):(\d\d):(\d\d) ", line)
        for nodes, low, high in _GROUP.findall(line):
            assert job and start and run
            h, m, s = (int(g) for g in run.groups())
            seen = epoch(start.group(1)) + h * 3600 + m * 60 + s
            for node in nodes_of(nodes):
                for gpu in range(int(low), int(high) + 1):
                    rows.add((job.group(1), epoch(start.group(1)), node, gpu, seen))
    return rows
