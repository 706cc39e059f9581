"""A small GPT (character level) and the corpus slice it reads; imports torch.

The batch of replica group ``r`` at a step is a pure function of (seed, global batch index): the
index is ``batches_committed + participating rank``, so every committed step consumes fresh batches
in one global order whatever the number of live groups, and a run with failures sees the same
batches as one without, just spread over different steps.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from importlib import resources

import torch
from torch import nn
from torch.nn import functional as F

from gpuyield.train.config import TrainConfig

CORPUS = "tinyshakespeare-300k.txt"
#: Share of the slice that trains; the rest is held out.
TRAIN_SHARE = 0.9


@dataclass(frozen=True, kw_only=True, slots=True)
class Corpus:
    """The slice encoded as character ids, split into train and held-out parts."""

    train: torch.Tensor
    held_out: torch.Tensor
    vocab_size: int


def load_corpus() -> Corpus:
    """Read the bundled slice (gpuyield/data/corpus/README.md cites it)."""
    text = resources.files("gpuyield").joinpath("data", "corpus", CORPUS).read_text("utf-8")
    chars = sorted(set(text))
    lookup = {c: i for i, c in enumerate(chars)}
    ids = torch.tensor([lookup[c] for c in text], dtype=torch.long)
    cut = int(len(ids) * TRAIN_SHARE)
    return Corpus(train=ids[:cut], held_out=ids[cut:], vocab_size=len(chars))


@dataclass(frozen=True, kw_only=True, slots=True)
class Batch:
    """One global batch of character ids, each tensor shaped (``config.batch``, ``config.block``)."""

    inputs: torch.Tensor
    """The characters the model reads."""
    targets: torch.Tensor
    """The next character after each input: the inputs shifted by one."""


def batch(data: torch.Tensor, config: TrainConfig, index: int, *, salt: int = 0) -> Batch:
    """Inputs and next-character targets of global batch ``index`` (deterministic)."""
    gen = torch.Generator().manual_seed(config.seed * 1_000_003 + index * 7919 + salt)
    starts = torch.randint(0, len(data) - config.block - 1, (config.batch,), generator=gen)
    x = torch.stack([data[s : s + config.block] for s in starts.tolist()])
    y = torch.stack([data[s + 1 : s + config.block + 1] for s in starts.tolist()])
    return Batch(inputs=x, targets=y)


def _init(module: nn.Module) -> None:
    # GPT-2's initialisation: small weights keep the tied head's first logits near uniform.
    if isinstance(module, nn.Linear | nn.Embedding):
        nn.init.normal_(module.weight, mean=0.0, std=0.02)
    if isinstance(module, nn.Linear) and module.bias is not None:
        nn.init.zeros_(module.bias)


class _Block(nn.Module):
    def __init__(self, config: TrainConfig) -> None:
        super().__init__()
        self.ln1 = nn.LayerNorm(config.n_embd)
        self.attn = nn.MultiheadAttention(config.n_embd, config.n_head, batch_first=True)
        self.ln2 = nn.LayerNorm(config.n_embd)
        self.mlp = nn.Sequential(
            nn.Linear(config.n_embd, 4 * config.n_embd),
            nn.GELU(),
            nn.Linear(4 * config.n_embd, config.n_embd),
        )

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        h = self.ln1(x)
        x = x + self.attn(h, h, h, attn_mask=mask, need_weights=False)[0]
        return x + self.mlp(self.ln2(x))


class GPT(nn.Module):
    """Decoder-only transformer: token + position embeddings, pre-norm blocks, tied head."""

    def __init__(self, config: TrainConfig, vocab_size: int) -> None:
        super().__init__()
        self.tok = nn.Embedding(vocab_size, config.n_embd)
        self.pos = nn.Embedding(config.block, config.n_embd)
        self.blocks = nn.ModuleList(_Block(config) for _ in range(config.n_layer))
        self.ln = nn.LayerNorm(config.n_embd)
        self.head = nn.Linear(config.n_embd, vocab_size, bias=False)
        self.head.weight = self.tok.weight
        mask = torch.triu(torch.ones(config.block, config.block, dtype=torch.bool), diagonal=1)
        self.causal: torch.Tensor
        self.register_buffer("causal", mask, persistent=False)
        self.apply(_init)

    def forward(self, idx: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        t = idx.shape[1]
        x = self.tok(idx) + self.pos(torch.arange(t))
        mask = self.causal[:t, :t]
        for block in self.blocks:
            x = block(x, mask)
        logits = self.head(self.ln(x))
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))


@dataclass(frozen=True, kw_only=True, slots=True)
class Trainable:
    """A model and the optimizer that steps its parameters."""

    model: GPT
    optimizer: torch.optim.Optimizer


def build(config: TrainConfig, vocab_size: int) -> Trainable:
    """The model and its optimizer, initialised from the seed (identical in every group)."""
    torch.manual_seed(config.seed)
    model = GPT(config, vocab_size)
    optimizer = torch.optim.AdamW(model.parameters(), lr=config.lr, weight_decay=0.01)
    return Trainable(model=model, optimizer=optimizer)


def learning_rate(config: TrainConfig, step: int) -> float:
    """Linear warm-up, then cosine decay to 10% over the run; a function of the step only."""
    if step < config.warmup_steps:
        return config.lr * (step + 1) / config.warmup_steps
    progress = (step - config.warmup_steps) / max(config.steps - config.warmup_steps, 1)
    return config.lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * min(progress, 1.0))))


@torch.no_grad()
def held_out_loss(model: GPT, corpus: Corpus, config: TrainConfig) -> float:
    """Mean loss over ``eval_batches`` fixed batches of held-out text."""
    model.eval()
    batches = (batch(corpus.held_out, config, i, salt=104_729) for i in range(config.eval_batches))
    losses = [float(model(b.inputs, b.targets)) for b in batches]
    model.train()
    return sum(losses) / len(losses)


def flat_grads(model: nn.Module, loss: torch.Tensor) -> torch.Tensor:
    """All gradients and the loss in one buffer: one allreduce per step."""
    parts = [p.grad.reshape(-1) for p in model.parameters() if p.grad is not None]
    return torch.cat([*parts, loss.detach().reshape(1)])


def unflatten_grads(model: nn.Module, flat: torch.Tensor) -> float:
    """Write the averaged gradients back; return the averaged loss."""
    offset = 0
    for p in model.parameters():
        if p.grad is None:
            continue
        n = p.grad.numel()
        p.grad.copy_(flat[offset : offset + n].view_as(p.grad))
        offset += n
    return float(flat[offset])
