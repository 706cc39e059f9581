"""Guard benchmark: recorder cost per step; the divergence watch's recall, false alarms, delay.

Run: ``python -m bench guard [--quick]`` (figures also go to ``bench/out/guard.json``).

1. **Recorder** (target, issue 5: at most 2 us per ``step()`` amortized, against a bare loop).
   ``bare``: ``for i in range(n): pass``. Three timings of ``rec.step(i, loss=..., grad_norm=...,
   tokens=...)`` in that loop, best of 5:
   - ``step_call_us``: the loop with the flusher idle (it is woken only after the loop): what the
     training thread pays per call;
   - ``serialise_write_us``: the one flush after that loop (JSON formatting and ``os.write``) per
     record: the work the background thread does;
   - ``amortized_us``: the loop with the default flusher (every 4096 records / 5 s) running
     concurrently, plus the final ``close()``: everything, on the caller's clock. In a pure-Python
     loop the flusher competes for the GIL; in real training it runs while the main thread waits on
     the GPU with the GIL released.
2. **Recall on real spikes**: the BigScience excerpts in ``../shared/data/megatron-loss-excerpts``
   (Megatron lines around loss spikes of tr1-13B, tr8-104B, BLOOM-176B). An excerpt is a positive if
   some loss is >= 1.2x its first loss (the onset is the first such line); the others (the BLOOM
   reshaping restarts) are negatives. Excerpts are a handful of lines, too short for a warm-up, so
   each is preceded by 100 synthetic healthy points at its first line's values (loss with 0.5%
   Gaussian noise, the same grad norm and loss scale) at the excerpt's logging cadence. Delay =
   detection iteration - onset iteration (negative when the grad norm warns first).
3. **False alarms on healthy curves**: generated 100k-step curves (power-law loss with Student-t
   noise, warm-up and final LR decay, benign bumps, data-boundary shifts, grad norms with benign
   spikes, fp16 dynamic loss scaling with random overflows; see ``healthy_curve``); every event is a
   false alarm. Reported per 100k steps.
4. **Delay on injected faults**: healthy 20k-step curves with one fault injected at a random step:
   a recovering spike (1.3-3x), a small one (+3% to +20%: below the default threshold at its low
   end, to show the limit), a jump that stays (divergence), a slow exponential climb, NaN, a
   grad-norm explosion. Recall within 2,000 steps and the detection delay in steps (median, p90).
"""

from __future__ import annotations

import csv
import math
import os
import platform
import random
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpuyield.guard import DivergenceWatch, EventKind, Recorder, WatchConfig

EXCERPTS = (
    Path(__file__).resolve().parents[2]
    / "shared"
    / "data"
    / "megatron-loss-excerpts"
    / "megatron_log_lines.csv"
)
TARGET_STEP_US = 2.0
_LOSS_KINDS = {EventKind.LOSS_SPIKE, EventKind.DIVERGENCE, EventKind.NONFINITE}

# -- 1. recorder ----------------------------------------------------------------------------------


def _best(fn: Callable[[], float], repeat: int = 5) -> float:
    return min(fn() for _ in range(repeat))


def _bare_loop(n: int) -> float:
    start = time.perf_counter()
    for _ in range(n):
        pass
    return time.perf_counter() - start


def _recorder_loop(n: int, directory: Path, *, idle_flusher: bool) -> tuple[float, float]:
    """(loop seconds, close seconds) for n step() calls."""
    path = directory / f"r{time.perf_counter_ns()}.jsonl"
    if idle_flusher:
        rec = Recorder(path, enabled=True, flush_every=n + 1, flush_interval_s=3600.0)
    else:
        rec = Recorder(path, enabled=True)
    step = rec.step
    start = time.perf_counter()
    for i in range(n):
        step(i, loss=2.5, grad_norm=0.9, tokens=i * 4096)
    loop_s = time.perf_counter() - start
    start = time.perf_counter()
    rec.close()
    close_s = time.perf_counter() - start
    path.unlink()
    return loop_s, close_s


def bench_recorder(quick: bool) -> dict[str, Any]:
    n = 200_000 if quick else 1_000_000
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp)
        bare_s = _best(lambda: _bare_loop(n))
        idle = [_recorder_loop(n, directory, idle_flusher=True) for _ in range(5)]
        live = [_recorder_loop(n, directory, idle_flusher=False) for _ in range(5)]
    step_call_us = (min(loop for loop, _ in idle) - bare_s) / n * 1e6
    serialise_us = min(close for _, close in idle) / n * 1e6
    amortized_us = (min(loop + close for loop, close in live) - bare_s) / n * 1e6
    return {
        "steps": n,
        "bare_loop_us": round(bare_s / n * 1e6, 4),
        "step_call_us": round(step_call_us, 3),
        "serialise_write_us": round(serialise_us, 3),
        "amortized_us": round(amortized_us, 3),
        "target_us": TARGET_STEP_US,
        "step_call_meets_target": step_call_us <= TARGET_STEP_US,
        "amortized_meets_target": amortized_us <= TARGET_STEP_US,
    }


# -- 2. real excerpts -----------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True, slots=True)
class Point:
    """One logged training step."""

    step: int
    loss: float | None
    grad_norm: float | None = None
    loss_scale: float | None = None


def _excerpt_blocks() -> dict[str, list[Point]]:
    blocks: dict[str, list[Point]] = {}
    with EXCERPTS.open(newline="") as handle:
        for row in csv.DictReader(handle):
            if row["kind"] != "train":
                continue
            key = f"{row['source_file']}#{row['code_block']}"
            blocks.setdefault(key, []).append(
                Point(
                    step=int(row["iteration"]),
                    loss=float(row["lm_loss"]),
                    grad_norm=float(row["grad_norm"]) if row["grad_norm"] else None,
                    loss_scale=float(row["loss_scale"]) if row["loss_scale"] else None,
                )
            )
    return {key: points for key, points in blocks.items() if len(points) >= 2}


def _healthy_prefix(first: Point, cadence: int, rng: random.Random, n: int = 100) -> list[Point]:
    assert first.loss is not None
    return [
        Point(
            step=first.step - cadence * (n - i),
            loss=first.loss * (1 + rng.gauss(0, 0.005)),
            grad_norm=first.grad_norm,
            loss_scale=first.loss_scale,
        )
        for i in range(n)
    ]


def _replay(points: list[Point], config: WatchConfig) -> list[tuple[int, EventKind]]:
    """(step reported at, kind) of every event: a jump is reported once it has persisted
    (``reported_step``), later than the step it names."""
    watch = DivergenceWatch(config, act_on=())
    found = []
    for p in points:
        events = watch.update(p.step, loss=p.loss, grad_norm=p.grad_norm, loss_scale=p.loss_scale)
        found += [(e.reported_step or e.step, e.kind) for e in events]
    return found


def bench_excerpts(config: WatchConfig) -> dict[str, Any]:
    rng = random.Random(5)
    rows = []
    for key, points in _excerpt_blocks().items():
        first = points[0]
        assert first.loss is not None
        onset = next((p.step for p in points if p.loss and p.loss >= 1.2 * first.loss), None)
        cadence = max(1, points[1].step - first.step)
        if first.step - cadence * 100 < 0:
            continue
        events = [e for e in _replay(_healthy_prefix(first, cadence, rng) + points, config)]
        inside = [(s, k) for s, k in events if s >= first.step]
        loss_hits = [s for s, k in inside if k in _LOSS_KINDS]
        rows.append(
            {
                "excerpt": key,
                "positive": onset is not None,
                "onset_step": onset,
                "events": [f"{k.value}@{s}" for s, k in inside],
                "loss_delay_steps": loss_hits[0] - onset if onset and loss_hits else None,
                "any_delay_steps": inside[0][0] - onset if onset and inside else None,
            }
        )
    positives = [r for r in rows if r["positive"]]
    negatives = [r for r in rows if not r["positive"]]
    return {
        "positives": len(positives),
        "recall_any_event": sum(bool(r["events"]) for r in positives) / len(positives),
        "recall_loss_event": sum(r["loss_delay_steps"] is not None for r in positives)
        / len(positives),
        "negatives": len(negatives),
        "negatives_with_events": sum(bool(r["events"]) for r in negatives),
        "excerpts": rows,
    }


# -- 3. healthy curves ----------------------------------------------------------------------------


def _student_t(rng: random.Random, df: int) -> float:
    """A Student-t draw scaled to unit variance (heavier tails than Gaussian, like batch losses)."""
    chi2 = sum(rng.gauss(0, 1) ** 2 for _ in range(df))
    return rng.gauss(0, 1) / math.sqrt(chi2 / df) / math.sqrt(df / (df - 2))


def healthy_curve(rng: random.Random, num_steps: int) -> Iterator[Point]:
    """A healthy pre-training run, logged every step.

    Loss: L_inf + A (1 + s/s0)^-alpha (initial loss ~ ln(vocab) ~ 8-11), x (1 + noise) with
    Student-t(5) noise of 0.5-2% relative; a slower start during LR warm-up; a 1-4% extra drop in
    the final LR decay (last 20%); benign bumps (about 3 per 100k steps, 1-4 noise sigmas high,
    ramping up over 20-100 steps and decaying over 50-500); data boundaries every 10-30k steps that
    shift the level by -1%..+2% and fade over ~2k steps. Grad norm: decaying from 1-5 to 0.15-0.4
    with lognormal noise and benign 2-5x single-step spikes (10 per 100k). fp16 loss scale on half
    the curves: 2^16, halved on an overflow (p = 3e-4 per step), doubled after 1000 clean steps.
    """
    l_inf, amp = rng.uniform(1.6, 2.2), rng.uniform(6.0, 9.0)
    alpha, s0 = rng.uniform(0.3, 0.6), rng.uniform(200.0, 1000.0)
    noise, warmup = rng.uniform(0.005, 0.02), rng.randint(500, 2000)
    final_drop = rng.uniform(0.01, 0.04)
    g_inf, g0, g_tau, g_noise = (
        rng.uniform(0.15, 0.4),
        rng.uniform(1.0, 5.0),
        rng.uniform(500, 3000),
        rng.uniform(0.1, 0.3),
    )
    fp16 = rng.random() < 0.5
    scale, clean = 65536.0, 0
    bumps: list[tuple[int, float, int, float]] = []  # start, height, ramp, decay
    boundary_next, shifts = rng.randint(10_000, 30_000), []  # shifts: (start, size)
    for s in range(num_steps):
        if rng.random() < 3 / 100_000:
            bumps.append((s, rng.uniform(1, 4) * noise, rng.randint(20, 100), rng.uniform(50, 500)))
        if s == boundary_next:
            shifts.append((s, rng.uniform(-0.01, 0.02)))
            boundary_next += rng.randint(10_000, 30_000)
        slow_start = 1 + 0.3 * max(0.0, 1 - s / warmup)  # LR warm-up: loss falls slower at first
        base = l_inf + amp * (1 + s / s0 / slow_start) ** -alpha
        decay = max(0.0, (s / num_steps - 0.8) / 0.2)
        level = 1 - final_drop * decay**2
        for start, height, ramp, tau in bumps:
            age = s - start
            level += height * (age / ramp if age < ramp else math.exp(-(age - ramp) / tau))
        for start, size in shifts:
            level += size * math.exp(-(s - start) / 2000)
        loss = base * level * (1 + noise * _student_t(rng, 5))
        grad = (g_inf + g0 * math.exp(-s / g_tau)) * math.exp(rng.gauss(0, g_noise))
        if rng.random() < 10 / 100_000:
            grad *= rng.uniform(2, 5)
        if fp16:
            clean += 1
            if rng.random() < 3e-4:
                scale, clean = scale / 2, 0
            elif clean >= 1000:
                scale, clean = min(scale * 2, 2.0**24), 0
        yield Point(step=s, loss=loss, grad_norm=grad, loss_scale=scale if fp16 else None)


def bench_false_alarms(config: WatchConfig, quick: bool) -> dict[str, Any]:
    num_curves, steps = (3, 100_000) if quick else (10, 100_000)
    rng = random.Random(2026)
    by_kind: dict[str, int] = {k.value: 0 for k in EventKind}
    start = time.perf_counter()
    for _ in range(num_curves):
        for _, kind in _replay(list(healthy_curve(rng, steps)), config):
            by_kind[kind.value] += 1
    elapsed_s = time.perf_counter() - start
    total_steps = num_curves * steps
    per_100k = {k: v / (total_steps / 100_000) for k, v in by_kind.items()}
    return {
        "curves": num_curves,
        "steps": total_steps,
        "false_alarms_per_100k_steps": round(sum(per_100k.values()), 3),
        "by_kind_per_100k_steps": {k: round(v, 3) for k, v in per_100k.items()},
        "seconds_incl_generation": round(elapsed_s, 1),
    }


# -- 4. injected faults ---------------------------------------------------------------------------


def _inject(kind: str, points: list[Point], at: int, rng: random.Random) -> list[Point]:
    """The curve with one fault from step ``at`` on."""
    out = points[:at]
    height, tau = rng.uniform(1.3, 3.0), rng.uniform(20, 200)
    for p in points[at:]:
        age = p.step - at
        assert p.loss is not None
        loss, grad = p.loss, p.grad_norm
        if kind == "recovering_spike":
            loss *= 1 + (height - 1) * math.exp(-age / tau)
        elif kind == "small_spike":
            loss *= 1 + (height - 1) / 10 * math.exp(-age / tau)  # +3% .. +20%
        elif kind == "divergence":
            loss *= height * (1 + 0.001 * age)
        elif kind == "slow_climb":
            loss *= min(1.005**age, 5.0)
        elif kind == "nan":
            loss = math.nan
        elif kind == "grad_explosion" and age < 5 and grad is not None:
            grad *= rng.uniform(20, 100)
        out.append(Point(step=p.step, loss=loss, grad_norm=grad, loss_scale=p.loss_scale))
    return out


_EXPECTED = {
    "recovering_spike": {EventKind.LOSS_SPIKE},
    "small_spike": {EventKind.LOSS_SPIKE},
    "divergence": {EventKind.DIVERGENCE},
    "slow_climb": {EventKind.LOSS_SPIKE, EventKind.DIVERGENCE},
    "nan": {EventKind.NONFINITE},
    "grad_explosion": {EventKind.GRAD_NORM_EXPLOSION},
}


def _quantile(values: list[int], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return float(ordered[min(len(ordered) - 1, int(q * len(ordered)))])


def bench_injected(config: WatchConfig, quick: bool) -> dict[str, Any]:
    trials, steps = (5, 20_000) if quick else (20, 20_000)
    rng = random.Random(7)
    results: dict[str, Any] = {}
    for kind, expected in _EXPECTED.items():
        delays: list[int] = []
        for _ in range(trials):
            at = rng.randint(8_000, steps - 2_000)
            points = _inject(kind, list(healthy_curve(rng, steps)), at, rng)
            hits = [s - at for s, k in _replay(points, config) if k in expected and s >= at]
            if hits and hits[0] <= 2_000:
                delays.append(hits[0])
        results[kind] = {
            "trials": trials,
            "recall": len(delays) / trials,
            "delay_steps_median": statistics.median(delays) if delays else None,
            "delay_steps_p90": _quantile(delays, 0.9),
        }
    return results


# -- driver ---------------------------------------------------------------------------------------


def run(quick: bool) -> dict[str, Any]:
    config = WatchConfig()
    figures: dict[str, Any] = {
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
        "load_average_1m": os.getloadavg()[0],
        "watch_config": {k: getattr(config, k) for k in config.__slots__},
    }
    figures["recorder"] = rec = bench_recorder(quick)
    print(
        f"recorder: step() {rec['step_call_us']:.2f} us/call (flusher idle), serialise+write "
        f"{rec['serialise_write_us']:.2f} us/record, all-in {rec['amortized_us']:.2f} us/step "
        f"(target {TARGET_STEP_US} us; bare loop {rec['bare_loop_us']} us)"
    )
    if EXCERPTS.exists():
        figures["real_excerpts"] = real = bench_excerpts(config)
        print(
            f"real spikes: recall {real['recall_any_event']:.2f} (loss events "
            f"{real['recall_loss_event']:.2f}) on {real['positives']} excerpts; "
            f"{real['negatives_with_events']}/{real['negatives']} negatives with events"
        )
        for row in real["excerpts"]:
            print(f"  {row['excerpt']}: onset {row['onset_step']} events {row['events']}")
    else:
        print(f"real spikes: skipped ({EXCERPTS} not found)")
    figures["healthy"] = healthy = bench_false_alarms(config, quick)
    print(
        f"healthy curves: {healthy['false_alarms_per_100k_steps']} false alarms per 100k steps "
        f"over {healthy['steps']} steps {healthy['by_kind_per_100k_steps']}"
    )
    figures["injected"] = injected = bench_injected(config, quick)
    for kind, r in injected.items():
        print(
            f"injected {kind}: recall {r['recall']:.2f}, delay median {r['delay_steps_median']} "
            f"p90 {r['delay_steps_p90']} steps"
        )
    return figures


if __name__ == "__main__":
    import sys

    from bench.runner import benchmark_main

    raise SystemExit(benchmark_main("guard", run, sys.argv[1:]))
