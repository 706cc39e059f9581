"""The Lightning and transformers callbacks, run for real on a tiny model on CPU.

The model fits y = 2x with MSE. One batch, at ``_POISON_STEP``, has targets multiplied by
``_POISON_FACTOR``: its loss is ~1e6 times the healthy loss, a spike by any measure, so the watch
must report it at exactly that step and stop (or raise) there.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")

from gpuyield.guard import DivergenceError, EventKind, Recorder, WatchConfig  # noqa: E402

pytestmark = [
    pytest.mark.train,
    # Lightning's advice for production loaders (more workers, a logger) does not apply to a test.
    pytest.mark.filterwarnings("ignore:.*does not have many workers.*"),
    pytest.mark.filterwarnings("ignore:.*`log_every_n_steps`.*"),
    pytest.mark.filterwarnings("ignore:.*GPU available but not used.*"),
    # This machine has Slurm's srun installed (for the Slurm lab); the test is not a Slurm job.
    pytest.mark.filterwarnings("ignore:The `srun` command is available"),
    # Lightning 2.6 against torch 2.13 uses a torch.utils._pytree name torch deprecated.
    pytest.mark.filterwarnings("ignore:.*LeafSpec.*is deprecated:FutureWarning"),
]

_NUM_BATCHES = 40
_BATCH = 8
_POISON_STEP = 30
_POISON_FACTOR = 1000.0
# A short warm-up so that 30 healthy steps are plenty.
_CONFIG = WatchConfig(warmup_points=10, window=20)


class _Data(torch.utils.data.Dataset):  # type: ignore[misc]
    """Batches of y = 2x; the batch of ``_POISON_STEP`` has its targets blown up."""

    def __init__(self) -> None:
        generator = torch.Generator().manual_seed(0)
        self.x = torch.randn(_NUM_BATCHES * _BATCH, 4, generator=generator)
        self.y = 2 * self.x.sum(dim=1, keepdim=True)
        poisoned = slice(_POISON_STEP * _BATCH, (_POISON_STEP + 1) * _BATCH)
        self.y[poisoned] *= _POISON_FACTOR

    def __len__(self) -> int:
        return len(self.x)

    def __getitem__(self, index: int) -> dict[str, Any]:
        return {"x": self.x[index], "labels": self.y[index]}


def _read_steps(path: Path) -> list[dict[str, Any]]:
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    return [line for line in lines if line["event"] == "step"]


# -- Lightning ----------------------------------------------------------------------------------


def _lightning_fit(callback: Any, max_steps: int = _NUM_BATCHES, accumulate: int = 1) -> Any:
    lightning = pytest.importorskip("lightning.pytorch")

    class Regressor(lightning.LightningModule):  # type: ignore[misc]
        def __init__(self) -> None:
            super().__init__()
            self.layer = torch.nn.Linear(4, 1)

        def training_step(self, batch: dict[str, Any], batch_idx: int) -> Any:
            return torch.nn.functional.mse_loss(self.layer(batch["x"]), batch["labels"])

        def configure_optimizers(self) -> Any:
            return torch.optim.SGD(self.parameters(), lr=0.01)

    torch.manual_seed(0)
    trainer = lightning.Trainer(
        max_steps=max_steps,
        accelerator="cpu",
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        accumulate_grad_batches=accumulate,
        callbacks=[callback],
    )
    loader = torch.utils.data.DataLoader(_Data(), batch_size=_BATCH, shuffle=False)
    trainer.fit(Regressor(), loader)
    return trainer


def test_lightning_stops_at_the_poisoned_step(tmp_path: Path) -> None:
    from gpuyield.guard.lightning import DivergenceCallback

    recorder = Recorder(tmp_path / "run.jsonl", enabled=True)
    callback = DivergenceCallback(action="stop", config=_CONFIG, recorder=recorder)
    trainer = _lightning_fit(callback)
    spikes = [e for e in callback.watch.events if e.kind is EventKind.LOSS_SPIKE]
    assert [e.step for e in spikes] == [_POISON_STEP]
    # Stopped right after the poisoned step instead of running all batches.
    assert trainer.global_step == _POISON_STEP + 1
    steps = _read_steps(tmp_path / "run.jsonl")
    assert [s["step"] for s in steps] == list(range(_POISON_STEP + 1))
    assert all(s["grad_norm"] > 0 for s in steps)
    # The recorded loss at the spike is the poisoned batch's: far above the healthy median.
    assert steps[_POISON_STEP]["loss"] > 1e4 * steps[_POISON_STEP - 1]["loss"]
    ends = [json.loads(x) for x in (tmp_path / "run.jsonl").read_text().splitlines()][-1]
    assert ends == {**ends, "event": "job_end", "status": "diverged"}


def test_lightning_raise_action_propagates() -> None:
    from gpuyield.guard.lightning import DivergenceCallback

    with pytest.raises(DivergenceError) as caught:
        _lightning_fit(DivergenceCallback(action="raise", config=_CONFIG))
    assert caught.value.event.step == _POISON_STEP


def test_lightning_healthy_run_finishes(tmp_path: Path) -> None:
    from gpuyield.guard.lightning import DivergenceCallback

    callback = DivergenceCallback(action="stop", config=_CONFIG)
    trainer = _lightning_fit(callback, max_steps=_POISON_STEP)
    assert callback.watch.events == ()
    assert trainer.global_step == _POISON_STEP


def test_lightning_gradient_accumulation_records_optimizer_steps(tmp_path: Path) -> None:
    from gpuyield.guard.lightning import DivergenceCallback

    recorder = Recorder(tmp_path / "run.jsonl", enabled=True)
    callback = DivergenceCallback(action="warn", config=_CONFIG, recorder=recorder)
    # 2 micro-batches per optimizer step: 10 optimizer steps use the 20 healthy batches.
    trainer = _lightning_fit(callback, max_steps=10, accumulate=2)
    assert trainer.global_step == 10
    assert [s["step"] for s in _read_steps(tmp_path / "run.jsonl")] == list(range(10))


# -- transformers -------------------------------------------------------------------------------


def _hf_train(callback: Any, tmp_path: Path) -> Any:
    transformers = pytest.importorskip("transformers")

    class Regressor(torch.nn.Module):  # type: ignore[misc]
        def __init__(self) -> None:
            super().__init__()
            self.layer = torch.nn.Linear(4, 1)

        def forward(self, x: Any, labels: Any = None) -> dict[str, Any]:
            prediction = self.layer(x)
            return {"loss": torch.nn.functional.mse_loss(prediction, labels), "logits": prediction}

    torch.manual_seed(0)
    args = transformers.TrainingArguments(
        output_dir=str(tmp_path / "out"),
        max_steps=_NUM_BATCHES,
        per_device_train_batch_size=_BATCH,
        learning_rate=0.01,
        logging_steps=1,
        save_strategy="no",
        report_to=[],
        use_cpu=True,
        disable_tqdm=True,
        dataloader_drop_last=True,
        lr_scheduler_type="constant",
        optim="sgd",
    )
    trainer = transformers.Trainer(
        model=Regressor(), args=args, train_dataset=_Data(), callbacks=[callback]
    )
    # The Trainer shuffles with a seeded sampler; keep batches in order so the poison step is known.
    trainer._get_train_sampler = lambda *a, **k: torch.utils.data.SequentialSampler(_Data())
    trainer.train()
    return trainer


def test_transformers_stops_at_the_poisoned_step(tmp_path: Path) -> None:
    from gpuyield.guard.transformers import DivergenceCallback

    recorder = Recorder(tmp_path / "run.jsonl", enabled=True)
    callback = DivergenceCallback(action="stop", config=_CONFIG, recorder=recorder)
    trainer = _hf_train(callback, tmp_path)
    spikes = [e for e in callback.watch.events if e.kind is EventKind.LOSS_SPIKE]
    # The Trainer counts steps from 1: the poisoned batch is global step _POISON_STEP + 1.
    assert [e.step for e in spikes] == [_POISON_STEP + 1]
    assert trainer.state.global_step == _POISON_STEP + 1
    steps = _read_steps(tmp_path / "run.jsonl")
    assert [s["step"] for s in steps] == list(range(1, _POISON_STEP + 2))


def test_transformers_raise_action_propagates(tmp_path: Path) -> None:
    from gpuyield.guard.transformers import DivergenceCallback

    with pytest.raises(DivergenceError) as caught:
        _hf_train(DivergenceCallback(action="raise", config=_CONFIG), tmp_path)
    assert caught.value.event.step == _POISON_STEP + 1
