"""Guards for training code: a cheap telemetry recorder and a divergence watch.

- ``Recorder``: append-only JSON Lines of job starts/ends, steps, checkpoints and evals, for the
  ledger.
- ``DivergenceWatch``: streaming detector of NaN/Inf, loss spikes, sustained divergence, grad-norm
  explosions and loss-scale collapse, with actions warn/stop/raise.
- The same detector over a telemetry file (``gpuyield divergence scan``) is
  ``gpuyield.ingest.telemetry.scan`` (also ``gpuyield.scan``): it needs the telemetry readers, and
  guard imports nothing of gpuyield but the core.
- Callbacks: ``gpuyield.guard.lightning.DivergenceCallback`` and
  ``gpuyield.guard.transformers.DivergenceCallback`` (they import torch and friends; this package
  itself imports only the standard library).
"""

from __future__ import annotations

from gpuyield.guard.recorder import Recorder
from gpuyield.guard.watch import (
    Action,
    DivergenceError,
    DivergenceEvent,
    DivergenceWatch,
    EventKind,
    WatchConfig,
)

__all__ = [
    "Action",
    "DivergenceError",
    "DivergenceEvent",
    "DivergenceWatch",
    "EventKind",
    "Recorder",
    "WatchConfig",
]
