"""Drop vs restart, measured: ``python -m bench ft [--quick]``.

Both modes of ``gpuyield train-ft`` on the same model, data, seeds and failure schedule (a SIGKILL of
one replica group every ``EVERY`` steps, a different group each time), plus the same run without
failures for the loss curves. Per mode, over 3 seeds: wall time, steps/s, lost GPU-seconds per
failure by kind (from ``gpuyield.ledger.ft``), held-out loss; and the ratio drop/restart of lost
GPU-seconds. Writes ``bench/out/ft.json``, ``bench/out/ft-curves.png`` (with matplotlib) and the
simulator's calibration ``src/gpuyield/data/calibration/ft-costs.toml`` (docs/simulate.md).
"""

from __future__ import annotations

import os
import platform
import shutil
import statistics
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

import tomli_w

from gpuyield.train.config import FailurePlan, Mode, RunSummary, TrainConfig
from gpuyield.train.launch import HEARTBEAT_TIMEOUT_MS, train_ft

OUT = Path(__file__).parent / "out" / "ft"
CALIBRATION = Path(__file__).parents[1] / "src" / "gpuyield" / "data" / "calibration"
SEEDS = (0, 1, 2)
STEPS, EVERY, REPLICAS = 400, 150, 3
# The model every run trains (2 layers x 64 wide, ~0.1M parameters): small enough that nine runs fit
# in minutes on a shared 2-core machine, large enough that its loss curve is a real learning curve.
MODEL = {"n_layer": 2, "n_embd": 64, "n_head": 4, "block": 64, "batch": 8}
CHECKPOINT_EVERY = 50


def _config(mode: Mode, seed: int, steps: int, every: int, failures: bool) -> TrainConfig:
    # A different group each time (1, 2, 0, ...), half-way between two checkpoints: a failure
    # right after a checkpoint would make restarting look cheaper than it is on average.
    first = every + CHECKPOINT_EVERY // 2
    plans = tuple(
        FailurePlan(step=s, group=(i + 1) % REPLICAS)
        for i, s in enumerate(range(first, steps, every))
    )
    return TrainConfig(
        mode=mode,
        replicas=REPLICAS,
        steps=steps,
        seed=seed,
        failures=plans if failures else (),
        checkpoint_every=CHECKPOINT_EVERY,
        eval_every=50,
        timeout_s=1200.0,
        run=f"{mode.value}{'' if failures else '-clean'}-s{seed}",
        **MODEL,
    )


def _one(config: TrainConfig) -> RunSummary:
    out = OUT / config.run_name
    shutil.rmtree(out, ignore_errors=True)
    started = time.monotonic()
    summary = train_ft(config, out)
    print(
        f"  {config.run_name}: {time.monotonic() - started:.0f} s, loss {summary.final_loss:.4f}, "
        f"lost {summary.lost_gpu_seconds:.1f} GPU-s over {summary.failures} failures",
        flush=True,
    )
    return summary


def _per_failure(runs: list[RunSummary], field: str) -> float:
    return statistics.mean(getattr(r, field) / max(r.failures, 1) for r in runs)


def _mode_figures(runs: list[RunSummary]) -> dict[str, Any]:
    return {
        "wall_s": statistics.mean(r.wall_s for r in runs),
        "to_last_step_s": statistics.mean(r.to_last_step_s for r in runs),
        "steps_per_s": statistics.mean(r.steps_per_s for r in runs),
        "failures_per_run": statistics.mean(r.failures for r in runs),
        "lost_gpu_s_per_failure": _per_failure(runs, "lost_gpu_seconds"),
        "lost_gpu_s_per_failure_by_seed": [r.lost_gpu_seconds / max(r.failures, 1) for r in runs],
        "stall_gpu_s_per_failure": _per_failure(runs, "stall_gpu_seconds"),
        "lost_work_gpu_s_per_failure": _per_failure(runs, "lost_work_gpu_seconds"),
        "heal_gpu_s_per_failure": _per_failure(runs, "heal_gpu_seconds"),
        "restart_gpu_s_per_failure": _per_failure(runs, "restart_gpu_seconds"),
        "final_loss_mean": statistics.mean(r.final_loss for r in runs),
        "final_loss_by_seed": [r.final_loss for r in runs],
        "curve": _curve(runs),
    }


def _curve(runs: list[RunSummary]) -> list[list[float]]:
    by_step: dict[int, list[float]] = {}
    for r in runs:
        for point in r.eval_curve:
            by_step.setdefault(point.step, []).append(point.loss)
    return [[step, statistics.mean(v)] for step, v in sorted(by_step.items())]


def _calibration(
    drop: list[RunSummary], restart: list[RunSummary], ratio: float, steps: int
) -> dict[str, Any]:
    failures = sum(r.failures for r in drop)
    return {
        "source": {
            "command": "python -m bench ft",
            "measured_on": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "machine": f"{platform.machine()}, {os.cpu_count()} CPUs (shared), Gloo on CPU",
            "seeds": len(drop),
            # The budget in clean-run steps (drop runs take more, smaller steps while a group is out).
            "steps": steps,
            "drop_steps_done_mean": statistics.mean(r.steps_done for r in drop),
            "failures": failures,
            "lighthouse_heartbeat_timeout_ms": HEARTBEAT_TIMEOUT_MS,
        },
        "measured": {
            "replicas": REPLICAS,
            # Per failure and per surviving group: the survivors' stall.
            "stall_s": sum(r.stall_s for r in drop) / failures / (REPLICAS - 1),
            "heal_s": sum(r.heal_s for r in drop) / failures,
            "restart_s": sum(r.restart_s for r in restart) / sum(r.failures for r in restart),
            "ratio_drop_to_restart": ratio,
        },
        "scale": {
            # A data-parallel replica at scale: 16 nodes x 8 GPUs (tensor x pipeline parallel).
            "gpus_per_group": 128,
            # A node to restart the group on: 0 with a hot spare pool (torchft's usual setup).
            "replacement_s": 0.0,
            # Llama 3 405B: 405e9 parameters x 16 bytes (bf16 weights, fp32 master and Adam)
            # spread over a 128-GPU group = 50.6 GB per GPU, sent by one peer GPU at 400 Gbit/s.
            "state_gb_per_gpu": 50.6,
            "link_gbps": 400.0,
            # Reading the same 6.5 TB checkpoint from storage at 2 TB/s aggregate.
            "checkpoint_load_s": 3.2,
        },
    }


def run(quick: bool) -> dict[str, Any]:
    """Figures for bench/out/ft.json."""
    seeds = SEEDS[:1] if quick else SEEDS
    steps, every = (200, 100) if quick else (STEPS, EVERY)
    runs: dict[str, list[RunSummary]] = {"drop": [], "restart": [], "clean": []}
    for seed in seeds:
        runs["clean"].append(_one(_config(Mode.DROP, seed, steps, every, failures=False)))
        for mode in (Mode.DROP, Mode.RESTART):
            runs[mode.value].append(_one(_config(mode, seed, steps, every, failures=True)))
    figures = {name: _mode_figures(r) for name, r in runs.items()}
    ratio = figures["drop"]["lost_gpu_s_per_failure"] / figures["restart"]["lost_gpu_s_per_failure"]
    calibration = _calibration(runs["drop"], runs["restart"], ratio, steps)
    if not quick:
        CALIBRATION.mkdir(parents=True, exist_ok=True)
        text = tomli_w.dumps(calibration)
        header = (
            "# Written by `python -m bench ft` (bench/ft.py); read by gpuyield.simulate.ft_costs.\n"
        )
        (CALIBRATION / "ft-costs.toml").write_text(header + text, encoding="utf-8")
    _plot(figures)
    _print_table(figures, ratio)
    return {
        "steps": steps,
        "failure_every": every,
        "replicas": REPLICAS,
        "model": MODEL,
        "seeds": list(seeds),
        "modes": figures,
        "ratio_drop_to_restart": ratio,
        "calibration": calibration,
        "runs": {k: [asdict(r) for r in v] for k, v in runs.items()},
    }


def _print_table(figures: dict[str, Any], ratio: float) -> None:
    print(
        "| mode | wall s | to last step s | steps/s | lost GPU-s / failure | stall | lost work "
        "| heal | restart | held-out loss |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for name, f in figures.items():
        print(
            f"| {name} | {f['wall_s']:.1f} | {f['to_last_step_s']:.1f} | {f['steps_per_s']:.2f} | "
            f"{f['lost_gpu_s_per_failure']:.1f} | {f['stall_gpu_s_per_failure']:.1f} | "
            f"{f['lost_work_gpu_s_per_failure']:.1f} | {f['heal_gpu_s_per_failure']:.1f} | "
            f"{f['restart_gpu_s_per_failure']:.1f} | {f['final_loss_mean']:.4f} |"
        )
    print(f"ratio drop/restart of lost GPU-seconds per failure: {ratio:.3f}")


def _plot(figures: dict[str, Any]) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    fig, ax = plt.subplots(figsize=(6, 3.5))
    for name, f in figures.items():
        xs, ys = zip(*f["curve"], strict=True)
        ax.plot(xs, ys, marker="o", label=name)
    ax.set_xlabel("step")
    ax.set_ylabel("held-out loss (mean of seeds)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(OUT.parent / "ft-curves.png", dpi=120)
    plt.close(fig)


if __name__ == "__main__":
    import sys

    from bench.runner import benchmark_main

    raise SystemExit(benchmark_main("ft", run, sys.argv[1:]))
