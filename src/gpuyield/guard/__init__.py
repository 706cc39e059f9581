"""Guards for training code: a cheap telemetry recorder and a divergence watch.

- ``Recorder``: append-only JSON Lines of job starts/ends, steps, checkpoints and evals, for the
  ledger.
- ``DivergenceWatch``: streaming detector of NaN/Inf, loss spikes, sustained divergence, grad-norm
  explosions and loss-scale collapse, with actions warn/stop/raise.
- The same detector over a telemetry file (``gpuyield divergence scan``) is
  ``gpuyield.ingest.telemetry.scan`` (also ``gpuyield.scan``): it needs the telemetry readers, and
  guard imports nothing of gpuyield but the core.
- ``check_init`` / ``clip_init_``: values of a model's initial weights beyond 3 standard deviations,
  and OLMo's remedy (``gpuyield.guard.init``; needs torch, loaded on first use).
- Callbacks: ``gpuyield.guard.lightning.DivergenceCallback`` and
  ``gpuyield.guard.transformers.DivergenceCallback`` (they import torch and friends; this package
  itself imports only the standard library).
"""

from __future__ import annotations

from typing import Any

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
    "check_init",
    "clip_init_",
]

# Torch loads only when these are used: the rest of the package runs in any training job.
_TORCH_EXPORTS = ("check_init", "clip_init_")


def __getattr__(name: str) -> Any:
    if name in _TORCH_EXPORTS:
        from gpuyield.guard import init

        return getattr(init, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
