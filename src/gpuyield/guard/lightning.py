"""PyTorch Lightning callback: the divergence watch (and optionally the recorder) inside ``fit``.

>>> from gpuyield.guard.lightning import DivergenceCallback
>>> trainer = L.Trainer(callbacks=[DivergenceCallback(action="stop")])

After every optimizer step the callback feeds the watch the batch loss (``outputs["loss"]``), the
global grad norm measured just before the optimizer step, and the AMP loss scale when a GradScaler
is in use. Action "stop" sets ``trainer.should_stop`` (Lightning ends the epoch loop cleanly, so the
last checkpoint callback still runs); "raise" raises ``DivergenceError`` out of ``trainer.fit``.
With a ``Recorder`` the same values are recorded, and fit start/end become job start/end. Needs
``pip install 'gpuyield[train]'``.
"""

from __future__ import annotations

from typing import Any

from gpuyield.errors import MissingExtraError
from gpuyield.guard.recorder import Recorder
from gpuyield.guard.watch import Action, DivergenceWatch, WatchConfig

try:
    import torch
    from lightning.pytorch import Callback, LightningModule, Trainer
except ModuleNotFoundError as error:  # pragma: no cover - exercised only without the extra
    raise MissingExtraError("train", error.name or "lightning") from error


def _grad_norm(module: torch.nn.Module) -> float | None:
    """Global L2 norm of the gradients (before clipping), or None when no parameter has one."""
    norms = [p.grad.detach().norm(2) for p in module.parameters() if p.grad is not None]
    if not norms:
        return None
    return float(torch.linalg.vector_norm(torch.stack(norms)))


def _loss_scale(trainer: Trainer) -> float | None:
    """The AMP GradScaler's current scale, when mixed precision uses one."""
    scaler = getattr(trainer.precision_plugin, "scaler", None)
    if scaler is None or not scaler.is_enabled():
        return None
    return float(scaler.get_scale())


def _batch_loss(outputs: Any) -> float | None:
    loss = outputs.get("loss") if isinstance(outputs, dict) else outputs
    if loss is None:
        return None
    return float(loss.detach()) if isinstance(loss, torch.Tensor) else float(loss)


class DivergenceCallback(Callback):
    """Feeds every training step to a ``DivergenceWatch``; stops or raises on divergence."""

    def __init__(
        self,
        watch: DivergenceWatch | None = None,
        *,
        action: Action | str = Action.STOP,
        config: WatchConfig | None = None,
        recorder: Recorder | None = None,
        track_grad_norm: bool = True,
    ) -> None:
        super().__init__()
        self.watch = watch or DivergenceWatch(config, action=action)
        self.recorder = recorder
        self.track_grad_norm = track_grad_norm
        self._grad_norm: float | None = None
        self._last_global_step: int | None = None

    def on_fit_start(self, trainer: Trainer, pl_module: LightningModule) -> None:
        if self.recorder is not None and trainer.is_global_zero:
            self.recorder.job_start()

    def on_train_start(self, trainer: Trainer, pl_module: LightningModule) -> None:
        # Resumed runs start at a global step > 0; the first step recorded is the next one.
        self._last_global_step = trainer.global_step

    def on_before_optimizer_step(
        self, trainer: Trainer, pl_module: LightningModule, optimizer: Any
    ) -> None:
        # Gradients are unscaled here under AMP, so this is the true norm before clipping.
        self._grad_norm = _grad_norm(pl_module) if self.track_grad_norm else None

    def on_train_batch_end(
        self,
        trainer: Trainer,
        pl_module: LightningModule,
        outputs: Any,
        batch: Any,
        batch_idx: int,
    ) -> None:
        # With gradient accumulation this runs per micro-batch; only an optimizer step is a step
        # (a repeated step number would read as work redone after a restart).
        if trainer.global_step == self._last_global_step:
            return
        self._last_global_step = trainer.global_step
        loss = _batch_loss(outputs)
        # global_step already counts this batch's optimizer step; report the step that ran.
        step = trainer.global_step - 1
        scale = _loss_scale(trainer)
        grad_norm, self._grad_norm = self._grad_norm, None
        if self.recorder is not None and trainer.is_global_zero:
            self.recorder.step(step, loss=loss, grad_norm=grad_norm, loss_scale=scale)
        self.watch.update(step, loss=loss, grad_norm=grad_norm, loss_scale=scale)
        if self.watch.should_stop:
            trainer.should_stop = True

    def on_fit_end(self, trainer: Trainer, pl_module: LightningModule) -> None:
        if self.recorder is not None and trainer.is_global_zero:
            self.recorder.job_end("diverged" if self.watch.should_stop else "completed")

    def on_exception(
        self, trainer: Trainer, pl_module: LightningModule, exception: BaseException
    ) -> None:
        if self.recorder is not None and trainer.is_global_zero:
            self.recorder.job_end("failed")
