"""Hugging Face transformers callback: the divergence watch inside ``Trainer.train``.

>>> from gpuyield.guard.transformers import DivergenceCallback
>>> trainer = Trainer(model=model, args=args, callbacks=[DivergenceCallback(action="stop")])

The Trainer logs the loss (averaged since the last log) and the grad norm every ``logging_steps``;
the callback feeds each log to the watch. Action "stop" sets ``control.should_training_stop`` (the
Trainer finishes the step, saves if configured, and returns); "raise" raises ``DivergenceError`` out
of ``train()``. With a ``Recorder`` the same values are recorded, checkpoint saves are recorded, and
train begin/end become job start/end. Needs ``pip install 'gpuyield[train]'``.
"""

from __future__ import annotations

import time
from typing import Any

from gpuyield.errors import MissingExtraError
from gpuyield.guard.recorder import Recorder
from gpuyield.guard.watch import Action, DivergenceWatch, WatchConfig

try:
    from transformers import TrainerCallback, TrainerControl, TrainerState, TrainingArguments
except ModuleNotFoundError as error:  # pragma: no cover - exercised only without the extra
    raise MissingExtraError("train", error.name or "transformers") from error


class DivergenceCallback(TrainerCallback):
    """Feeds each Trainer log with a loss to a ``DivergenceWatch``; stops or raises on it."""

    def __init__(
        self,
        watch: DivergenceWatch | None = None,
        *,
        action: Action | str = Action.STOP,
        config: WatchConfig | None = None,
        recorder: Recorder | None = None,
    ) -> None:
        self.watch = watch or DivergenceWatch(config, action=action)
        self.recorder = recorder
        self._save_started: float | None = None

    def on_train_begin(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **_: Any
    ) -> None:
        if self.recorder is not None and state.is_world_process_zero:
            self.recorder.job_start()

    def on_log(
        self,
        args: TrainingArguments,
        state: TrainerState,
        control: TrainerControl,
        logs: dict[str, float] | None = None,
        **_: Any,
    ) -> None:
        if not logs or "loss" not in logs:
            return  # eval and end-of-train summaries carry no training loss
        loss, grad_norm = logs["loss"], logs.get("grad_norm")
        if self.recorder is not None and state.is_world_process_zero:
            self.recorder.step(state.global_step, loss=loss, grad_norm=grad_norm)
        self.watch.update(state.global_step, loss=loss, grad_norm=grad_norm)
        if self.watch.should_stop:
            control.should_training_stop = True

    def on_step_end(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **_: Any
    ) -> None:
        # The Trainer saves right after on_step_end when control.should_save is set: time it.
        if control.should_save:
            self._save_started = time.monotonic()

    def on_save(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **_: Any
    ) -> None:
        if self.recorder is None or not state.is_world_process_zero:
            return
        started, self._save_started = self._save_started, None
        duration_s = time.monotonic() - started if started is not None else 0.0
        self.recorder.checkpoint_saved(state.global_step, duration_s=duration_s)

    def on_train_end(
        self, args: TrainingArguments, state: TrainerState, control: TrainerControl, **_: Any
    ) -> None:
        if self.recorder is not None and state.is_world_process_zero:
            self.recorder.job_end("diverged" if self.watch.should_stop else "completed")
