"""Run one fault-tolerance experiment: start the groups, restart what dies, summarise.

``drop``: a torchft lighthouse in this process and one worker process per replica group; a group
killed by SIGKILL is started again at once (what torchelastic or Slurm would do for one group) and
heals from a live peer. ``restart``: one ``torchrun --max-restarts`` job holding every group; a
killed worker makes torchrun stop and restart all of them from the last checkpoint.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from gpuyield.errors import FieldError, GpuyieldError
from gpuyield.ingest.ft_rows import ft_table
from gpuyield.ingest.telemetry import StepRecord, read
from gpuyield.ledger.ft import account
from gpuyield.train.config import EvalPoint, Mode, RunSummary, TrainConfig
from gpuyield.train.worker import TELEMETRY

#: Lighthouse settings: a group silent this long is dropped from the next quorum.
HEARTBEAT_TIMEOUT_MS = 2000
JOIN_TIMEOUT_MS = 10000
QUORUM_TICK_MS = 50
#: Restarts allowed per group (drop) or for the whole job (restart) beyond the planned failures.
SPARE_RESTARTS = 2


class TrainRunError(GpuyieldError):
    """A training run did not finish (a worker crashed unplanned, or it ran past its timeout)."""


@dataclass(kw_only=True, slots=True)
class _Group:
    group: int
    attempt: int = 0
    process: subprocess.Popen[bytes] | None = None
    done: bool = False
    #: When a killed group's next process may start (monotonic clock); None while it runs.
    respawn_at: float | None = None
    logs: list[Path] = field(default_factory=list)


def _prepare(config: TrainConfig, out: Path) -> None:
    if (out / TELEMETRY).exists():
        raise FieldError(
            "train.out",
            f": {out / TELEMETRY} exists: a run was already written there",
            hint="pass a new train.out directory",
        )
    out.mkdir(parents=True, exist_ok=True)
    for stale in ("ready", "failures", "finished", "logs"):
        shutil.rmtree(out / stale, ignore_errors=True)
    (out / "checkpoint.pt").unlink(missing_ok=True)
    (out / "logs").mkdir()
    (out / "config.json").write_text(json.dumps(config.to_dict()), encoding="utf-8")


def _env(config: TrainConfig) -> dict[str, str]:
    env = dict(os.environ)
    src = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = src + os.pathsep + env.get("PYTHONPATH", "")
    env["OMP_NUM_THREADS"] = str(config.threads)
    return env


def _tail(paths: list[Path]) -> str:
    return "".join(p.read_text(errors="replace")[-1500:] for p in paths[-2:] if p.exists())


def _spawn(config: TrainConfig, out: Path, group: _Group, env: dict[str, str]) -> None:
    log = out / "logs" / f"group{group.group}-attempt{group.attempt}.log"
    group.logs.append(log)
    args = [sys.executable, "-m", "gpuyield.train.worker", "drop", str(out / "config.json")]
    args += [str(out), str(group.group), str(group.attempt)]
    with log.open("wb") as sink:
        group.process = subprocess.Popen(args, env=env, stdout=sink, stderr=subprocess.STDOUT)


def _run_drop(config: TrainConfig, out: Path) -> None:
    os.environ.setdefault("RUST_LOG", "warn")  # the lighthouse logs every quorum tick at info
    from torchft._torchft import LighthouseServer

    lighthouse = LighthouseServer(
        bind="[::]:0",
        min_replicas=1,
        join_timeout_ms=JOIN_TIMEOUT_MS,
        quorum_tick_ms=QUORUM_TICK_MS,
        heartbeat_timeout_ms=HEARTBEAT_TIMEOUT_MS,
    )
    env = _env(config)
    env["TORCHFT_LIGHTHOUSE"] = lighthouse.address()
    groups = [_Group(group=g) for g in range(config.replicas)]
    allowed = {
        g: SPARE_RESTARTS + sum(p.group == g for p in config.failures)
        for g in range(config.replicas)
    }
    try:
        for group in groups:
            _spawn(config, out, group, env)
        _supervise(config, out, groups, allowed, env)
    finally:
        for group in groups:
            if group.process is not None and group.process.poll() is None:
                group.process.kill()
                group.process.wait()
        lighthouse.shutdown()


def _supervise(
    config: TrainConfig,
    out: Path,
    groups: list[_Group],
    allowed: dict[int, int],
    env: dict[str, str],
) -> None:
    deadline = time.monotonic() + config.timeout_s
    while not all(g.done for g in groups):
        if time.monotonic() > deadline:
            raise TrainRunError(f"drop run did not finish in {config.timeout_s:.0f} s")
        time.sleep(0.05)
        for group in groups:
            assert group.process is not None
            if group.respawn_at is not None:
                if time.monotonic() >= group.respawn_at:
                    group.respawn_at = None
                    _spawn(config, out, group, env)
                continue
            code = group.process.poll()
            if group.done or code is None:
                continue
            if code == 0:
                group.done = True
            elif code == -signal.SIGKILL and group.attempt < allowed[group.group]:
                group.attempt += 1
                group.respawn_at = time.monotonic() + config.restart_delay_s
            else:
                raise TrainRunError(
                    f"replica group {group.group} exited with {code}:\n{_tail(group.logs)}"
                )


def _run_restart(config: TrainConfig, out: Path) -> None:
    log = out / "logs" / "torchrun.log"
    args = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nnodes", "1"]
    args += ["--nproc-per-node", str(config.replicas), "--monitor-interval", "0.1"]
    args += ["--max-restarts", str(len(config.failures) + SPARE_RESTARTS)]
    args += ["--module", "gpuyield.train.worker", "restart", str(out / "config.json"), str(out)]
    with log.open("wb") as sink:
        try:
            code = subprocess.run(
                args,
                env=_env(config),
                stdout=sink,
                stderr=subprocess.STDOUT,
                timeout=config.timeout_s,
            ).returncode
        except subprocess.TimeoutExpired as error:
            raise TrainRunError(
                f"restart run did not finish in {config.timeout_s:.0f} s"
            ) from error
    if code != 0:
        raise TrainRunError(f"torchrun exited with {code}:\n{_tail([log])}")


def _last_step_t(steps: tuple[StepRecord, ...]) -> float:
    return max(s.t for s in steps if s.t is not None)


def summarise(config: TrainConfig, out: Path, wall_s: float) -> RunSummary:
    """``summary.json`` from the run's telemetry, through the ledger's accounting."""
    log = read(out / TELEMETRY, "jsonl")
    table = ft_table(config.run_name, log)
    steps = log.steps
    evals = [EvalPoint(step=e.step, loss=e.metrics["val_loss"]) for e in log.evals]
    if not steps or not evals:
        raise TrainRunError(f"{out / TELEMETRY}: the run recorded no steps or no held-out loss")
    steps_done = max(s.step for s in steps) + 1
    loss = account(config.run_name, table) if table is not None else None
    return RunSummary(
        mode=config.mode,
        run=config.run_name,
        replicas=config.replicas,
        steps_done=steps_done,
        final_loss=evals[-1].loss,
        wall_s=wall_s,
        to_last_step_s=_last_step_t(steps) - min(j.t for j in log.job_starts if j.t is not None),
        steps_per_s=steps_done / wall_s,
        lost_gpu_seconds=loss.lost_gpu_s if loss else 0.0,
        stall_s=loss.stall_s if loss else 0.0,
        stall_gpu_seconds=loss.stall_gpu_s if loss else 0.0,
        lost_work_gpu_seconds=loss.lost_work_gpu_s if loss else 0.0,
        heal_s=loss.heal_s if loss else 0.0,
        heal_gpu_seconds=loss.heal_gpu_s if loss else 0.0,
        restart_s=loss.restart_s if loss else 0.0,
        restart_gpu_seconds=loss.restart_gpu_s if loss else 0.0,
        failures=len(loss.failures) if loss else 0,
        restarts=loss.restarts if loss else 0,
        eval_curve=tuple(sorted(evals, key=lambda e: e.step)),
    )


def train_ft(config: TrainConfig, out: Path) -> RunSummary:
    """Run ``config`` into ``out`` (telemetry.jsonl, summary.json, logs/) and return its summary."""
    _prepare(config, out)
    started = time.monotonic()
    if config.mode is Mode.DROP:
        _run_drop(config, out)
    else:
        _run_restart(config, out)
    summary = summarise(config, out, time.monotonic() - started)
    summary.write(out / "summary.json")
    return summary
