"""What a release-lineage run does when a node fails, and which remedies may use its spares.

The scenario's vocabulary for a run's failure policy (``LineageConfig.policy``, ``spares_for``);
the simulator's lineage model and the sweeps read the same names.
"""

from __future__ import annotations

from enum import StrEnum


class Policy(StrEnum):
    """What a release-lineage job does when one of its nodes fails."""

    # The whole job stops; it is requeued and restarts from its last checkpoint.
    RESTART = "restart"
    # The failed data-parallel replica is dropped; the job goes on at reduced throughput.
    DROP = "drop"
    # A hot spare node swaps in: a restart from the last checkpoint without the queue wait.
    SPARES = "spares"
    # Recover from a peer's in-memory copy (Gemini): little lost, fast restart. Sweeps only.
    IN_MEMORY = "in-memory"


class SparesFor(StrEnum):
    """Which remedies take a failed node's replacement from a run's spare nodes."""

    # Every remedy: a restarted job starts on a spare, a dropped replica rejoins on one.
    ALL = "all"
    # Only a restart: a dropped replica waits for its own node's repair (down_s + repair time).
    RESTART = "restart"
