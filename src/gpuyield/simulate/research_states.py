"""State codes of research rows, and the sacct text of each.

The research workload has millions of rows, held in numpy arrays; arrays cannot hold strings
cheaply, so a row's state is a small integer until the sacct file is written.
"""

from __future__ import annotations

# ``STATE_NAMES[code]`` is the sacct text of a state code.
S_COMPLETED, S_FAILED, S_PREEMPTED, S_REQUEUED, S_TIMEOUT, S_OOM, S_CANCELLED = range(7)
S_NODE_FAIL, S_RUNNING, S_PENDING = 7, 8, 9
STATE_NAMES = (
    "COMPLETED",
    "FAILED",
    "PREEMPTED",
    "REQUEUED",
    "TIMEOUT",
    "OUT_OF_MEMORY",
    "CANCELLED",
    "NODE_FAIL",
    "RUNNING",
    "PENDING",
)


__all__ = [
    "STATE_NAMES",
    "S_CANCELLED",
    "S_COMPLETED",
    "S_FAILED",
    "S_NODE_FAIL",
    "S_OOM",
    "S_PENDING",
    "S_PREEMPTED",
    "S_REQUEUED",
    "S_RUNNING",
    "S_TIMEOUT",
]
