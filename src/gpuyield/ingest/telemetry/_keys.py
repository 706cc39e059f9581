"""Which metric names mean loss, grad norm, loss scale and tokens, across loggers.

Loggers name the same quantity differently: Hugging Face's Trainer logs ``train/loss`` and
``train/grad_norm``, Megatron-LM's TensorBoard writer ``lm loss``, ``grad-norm`` and ``loss-scale``,
Lightning whatever the user passes to ``self.log`` (often ``train_loss`` or ``train_loss_step``).
Names are normalised (lower case, ``/ - space`` -> ``_``) and matched against ordered candidates;
the first candidate present wins, so ``loss`` beats ``train_loss`` when both are logged.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

_SEPARATORS = re.compile(r"[\s/\-.]+")

#: StepRecord field -> normalised metric names, most specific first.
CANDIDATES: dict[str, tuple[str, ...]] = {
    "loss": (
        "loss",
        "train_loss",
        "lm_loss",
        "train_lm_loss",
        "train_loss_step",
        "loss_train",
        "training_loss",
        "train_lm_loss_step",
    ),
    "grad_norm": ("grad_norm", "train_grad_norm", "gradient_norm", "grad_norm_total"),
    "loss_scale": ("loss_scale", "train_loss_scale", "grad_scale"),
    "tokens": (
        "tokens",
        "consumed_tokens",
        "num_tokens",
        "num_input_tokens_seen",
        "train_num_input_tokens_seen",
    ),
}

#: Normalised names of a step column, most specific first.
STEP_CANDIDATES = ("step", "_step", "global_step", "iteration", "iter", "trainer_global_step")

#: Normalised names of a time column (epoch seconds).
TIME_CANDIDATES = ("t", "_timestamp", "timestamp", "time", "wall_time")


def normalise(name: str) -> str:
    """``"train/Loss"`` -> ``"train_loss"``; ``"grad-norm"`` -> ``"grad_norm"``."""
    return _SEPARATORS.sub("_", name.strip().lower())


def pick(names: Iterable[str], candidates: tuple[str, ...]) -> str | None:
    """The original name among ``names`` whose normalised form comes first in ``candidates``."""
    by_norm: dict[str, str] = {}
    for name in names:
        by_norm.setdefault(normalise(name), name)
    for candidate in candidates:
        if candidate in by_norm:
            return by_norm[candidate]
    return None


def metric_columns(names: Iterable[str]) -> dict[str, str]:
    """StepRecord field -> source name, for the fields that ``names`` hold."""
    names = list(names)
    found: dict[str, str] = {}
    for field_name, candidates in CANDIDATES.items():
        chosen = pick(names, candidates)
        if chosen is not None:
            found[field_name] = chosen
    return found
