"""Drop a failed replica instead of restarting the job: a small real training run, both ways.

``gpuyield train-ft --mode drop|restart`` trains a character-level GPT on a public-domain text slice
(``gpuyield/data/corpus``) with data-parallel replica groups over Gloo on CPU, injects failures by
SIGKILL of a replica's process and writes ``telemetry.jsonl`` (the Recorder's format, with
fault-tolerance events) and ``summary.json``:

- ``restart``: ``torchrun --max-restarts``; a failure kills the whole job, which restarts from its
  last checkpoint (what every NCCL user has);
- ``drop``: torchft replica groups under a lighthouse; a failed group is dropped at the next quorum,
  the others keep stepping, the restarted group heals from a live peer and rejoins.

Needs the ``train`` extra (torch, torchft); importing this package does not import torch.
"""

from __future__ import annotations

from gpuyield.train.config import EvalPoint, FailurePlan, Mode, RunSummary, TrainConfig

__all__ = ["EvalPoint", "FailurePlan", "Mode", "RunSummary", "TrainConfig"]
