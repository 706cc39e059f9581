"""Issue 30: the divergence watch on real curves (tests/guard/fixtures/training-curves, cited in
its README): no alarm on 138 healthy runs, every real NaN caught at its first non-finite step, a
jump that persists caught within 5 logged points."""

from __future__ import annotations

import gzip
import json
import math
from dataclasses import dataclass
from pathlib import Path

import pytest

from gpuyield.guard import DivergenceWatch, EventKind

DATA = Path(__file__).parent / "fixtures" / "training-curves"
#: A jump of this factor that persists must be reported within this many logged points.
JUMP_FACTOR = 1.6
WITHIN_POINTS = 5


@dataclass(frozen=True)
class Curve:
    id: str
    metric: str
    steps: list[int]
    losses: list[float]


def _steps(raw: dict | list) -> list[int]:
    if isinstance(raw, list):
        return raw
    return [raw["first"] + i * raw["stride"] for i in range(raw["count"])]


@pytest.fixture(scope="module")
def curves() -> list[Curve]:
    with gzip.open(DATA / "modded-nanogpt-curves.jsonl.gz", "rt", encoding="utf-8") as fh:
        rows = [json.loads(line) for line in fh]
    out = [
        Curve(
            id=row["id"],
            metric=row["metric"],
            steps=_steps(row["steps"]),
            losses=[float(x) for x in row["loss"].split()],
        )
        for row in rows
    ]
    for c in out:
        assert len(c.steps) == len(c.losses) >= 50, c.id
        assert all(math.isfinite(x) for x in c.losses), c.id
    return out


def test_at_least_100_healthy_curves_of_both_kinds(curves: list[Curve]) -> None:
    assert len(curves) >= 100
    assert len({c.id for c in curves}) == len(curves)
    assert {c.metric for c in curves} == {"train_loss", "val_loss"}
    assert sum(len(c.losses) for c in curves) > 250_000


def test_no_alarm_on_any_healthy_curve(curves: list[Curve]) -> None:
    alarms = {}
    for c in curves:
        watch = DivergenceWatch(action="warn", act_on=())
        for step, loss in zip(c.steps, c.losses, strict=True):
            watch.update(step, loss=loss)
        if watch.events:
            alarms[c.id] = [e.describe() for e in watch.events[:3]]
    assert alarms == {}


def test_a_persistent_jump_is_reported_within_5_points(curves: list[Curve]) -> None:
    late = []
    for c in curves:
        for share in (0.4, 0.7):
            jump = int(len(c.losses) * share)
            watch = DivergenceWatch(action="warn", act_on=())
            reported = None
            for i in range(min(jump + WITHIN_POINTS + 1, len(c.losses))):
                loss = c.losses[i] * (JUMP_FACTOR if i >= jump else 1.0)
                if watch.update(c.steps[i], loss=loss) and reported is None:
                    reported = i
            spikes = [e for e in watch.events if e.kind is EventKind.LOSS_SPIKE]
            if reported is None or reported < jump or not spikes or spikes[0].step != c.steps[jump]:
                late.append((c.id, share, reported, jump))
    assert late == []


def test_real_nan_divergences_are_caught_at_their_first_nonfinite_step() -> None:
    excerpts = json.loads((DATA / "nan-excerpts.json").read_text(encoding="utf-8"))["excerpts"]
    assert len(excerpts) >= 5
    for x in excerpts:
        assert x["url"].startswith("https://github.com/"), x["id"]
        for (step, text), line in zip(x["points"], x["lines"], strict=True):
            assert text in line, (x["id"], line)
            assert x.get("steps_are_line_order") or str(step) in line, (x["id"], line)
        watch = DivergenceWatch(action="warn", act_on=())
        for step, text in x["points"]:
            watch.update(step, loss=float(text))
        first = watch.events[0]
        assert (first.kind, first.step) == (EventKind.NONFINITE, x["first_nonfinite"]), x["id"]
        assert all(e.step >= x["first_nonfinite"] for e in watch.events), x["id"]
