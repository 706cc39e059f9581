"""One replica group's process: ``python -m gpuyield.train.worker drop|restart CONFIG OUT [GROUP ATTEMPT]``.

Started by ``gpuyield.train.launch`` (drop: one process per group under a torchft lighthouse;
restart: by torchrun, which sets RANK, WORLD_SIZE and TORCHELASTIC_RESTART_COUNT). Every process
appends to ``OUT/telemetry.jsonl`` through its own Recorder (whole lines, O_APPEND), each line
tagged with its group. A planned failure (``--fail-at STEP:GROUP``) SIGKILLs the group's process
after it computed the step's gradients and before the allreduce, once (a marker file remembers it).
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from datetime import timedelta
from pathlib import Path

import torch

from gpuyield.guard.recorder import Recorder
from gpuyield.train import model as gpt
from gpuyield.train.config import Mode, TrainConfig

TELEMETRY = "telemetry.jsonl"


def _recorder(config: TrainConfig, out: Path, group: int) -> Recorder:
    rec = Recorder(
        out / TELEMETRY, run=config.run_name, enabled=True, replica=group, flush_interval_s=1.0
    )

    def flush_and_exit(signum: int, frame: object) -> None:
        # torchrun stops the survivors with SIGTERM: keep what they recorded, then die.
        rec.close()
        os._exit(128 + signum)

    signal.signal(signal.SIGTERM, flush_and_exit)
    return rec


def _maybe_fail(config: TrainConfig, out: Path, rec: Recorder, group: int, step: int) -> None:
    for plan in config.failures:
        if plan.step != step or plan.group != group:
            continue
        marker = out / "failures" / f"{step}-{group}"
        marker.parent.mkdir(exist_ok=True)
        try:
            marker.touch(exist_ok=False)
        except FileExistsError:
            return  # injected before this restart: the replayed step runs through
        rec.replica_lost(step, replicas=config.replicas, gpus=config.gpus_per_replica)
        os.kill(os.getpid(), signal.SIGKILL)


def _barrier(out: Path, group: int, replicas: int, timeout_s: float) -> None:
    """Wait until every group's first process is up, so the first quorum holds them all."""
    ready = out / "ready"
    ready.mkdir(exist_ok=True)
    (ready / str(group)).touch()
    deadline = time.monotonic() + timeout_s
    while len(list(ready.iterdir())) < replicas:
        if time.monotonic() > deadline:
            raise TimeoutError(f"only {len(list(ready.iterdir()))} of {replicas} groups started")
        time.sleep(0.05)


def run_drop(config: TrainConfig, out: Path, group: int, attempt: int) -> None:
    """A torchft replica group: steps under quorum; heals from a peer after a restart."""
    from torchft import Manager, ProcessGroupGloo
    from torchft.process_group import ProcessGroupBabyNCCL

    rec = _recorder(config, out, group)
    rec.job_start()
    if attempt:
        rec.restart(attempt)
    corpus = gpt.load_corpus()
    trainable = gpt.build(config, corpus.vocab_size)
    net, optim = trainable.model, trainable.optimizer

    def load(state: dict[str, object]) -> None:
        net.load_state_dict(state["model"])  # type: ignore[arg-type]
        optim.load_state_dict(state["optim"])  # type: ignore[arg-type]

    store = torch.distributed.TCPStore("127.0.0.1", 0, is_master=True, wait_for_workers=False)
    pg = (
        ProcessGroupGloo(timeout=timedelta(seconds=10))
        if config.backend == "gloo"
        else ProcessGroupBabyNCCL(timeout=timedelta(seconds=10))
    )
    manager = Manager(
        pg=pg,
        load_state_dict=load,
        state_dict=lambda: {"model": net.state_dict(), "optim": optim.state_dict()},
        min_replica_size=1,
        use_async_quorum=False,
        init_sync=False,
        replica_id=f"group_{group}",
        rank=0,
        world_size=1,
        store_addr="127.0.0.1",
        store_port=store.port,
        timeout=timedelta(seconds=10),
        quorum_timeout=timedelta(seconds=120),
    )
    if not attempt:
        _barrier(out, group, config.replicas, config.timeout_s)
    else:
        rec.heal_started(0)
    _drop_loop(config, out, rec, manager, net, optim, corpus, group, healing=attempt > 0)
    _wait_for_rejoin(config, out, group, manager)
    rec.job_end("completed")
    manager.shutdown(wait=False)


def _drop_loop(
    config: TrainConfig,
    out: Path,
    rec: Recorder,
    manager: object,
    net: gpt.GPT,
    optim: torch.optim.Optimizer,
    corpus: gpt.Corpus,
    group: int,
    *,
    healing: bool,
) -> bool:
    """Train to the last step; False when a restarted group found no live peer to heal from."""
    from torchft import Manager

    assert isinstance(manager, Manager)
    seen_quorum = -1
    # The run's budget is in batches (tokens), as at scale: a step with a group missing consumes
    # fewer batches, so the run takes a few more steps and sees exactly the data a clean run sees.
    budget = config.steps * config.replicas
    while manager.batches_committed() < budget:
        manager.start_quorum()  # synchronous: a restarted group has healed when it returns
        step = manager.current_step()
        if healing:
            if step == 0:
                return False  # the others finished meanwhile: nothing to rejoin, never train alone
            rec.heal_done(step)
            healing = False
        quorum_id = int(manager._quorum_id)  # torchft has no public accessor for it
        if quorum_id != seen_quorum:
            rec.quorum(step, quorum_id=quorum_id, participants=manager.num_participants())
            seen_quorum = quorum_id
        seen = manager.batches_committed()
        if seen >= budget:
            break  # healed to the end of the run: nothing left to compute
        for group_lr in optim.param_groups:
            # The schedule follows the data consumed, in clean-run steps.
            group_lr["lr"] = gpt.learning_rate(config, seen // config.replicas)
        optim.zero_grad()
        rank = manager.participating_rank() or 0
        data = gpt.batch(corpus.train, config, seen + rank)
        loss = net(data.inputs, data.targets)
        loss.backward()
        _maybe_fail(config, out, rec, group, step)
        flat = gpt.flat_grads(net, loss)
        manager.allreduce(flat).wait()
        mean_loss = gpt.unflatten_grads(net, flat)
        if not manager.should_commit():
            continue  # a peer failed mid-step: the step is discarded, the next quorum drops it
        optim.step()
        rec.step(step, loss=mean_loss)
        if rank == 0:
            _drop_eval(config, rec, net, corpus, seen, manager.batches_committed())
    return True


def _drop_eval(
    config: TrainConfig, rec: Recorder, net: gpt.GPT, corpus: gpt.Corpus, before: int, after: int
) -> None:
    """Held-out loss when the data consumed crosses an eval point (in clean-run steps)."""
    done, was = after // config.replicas, before // config.replicas
    budget = config.steps * config.replicas
    crossed = config.eval_every and done // config.eval_every > was // config.eval_every
    if after >= budget or crossed:
        point = config.steps if after >= budget else done - done % config.eval_every
        rec.eval(point, val_loss=gpt.held_out_loss(net, corpus, config))
        rec.flush()  # a peer's failure can stop this process any moment: keep the point


def _wait_for_rejoin(config: TrainConfig, out: Path, group: int, manager: object) -> None:
    """After the last step, keep serving quorums (and state) until every group has finished.

    A group restarted late heals from a live peer even at the end, so every run measures its heal;
    the wait comes after the last step, so no step gap (and no stall) includes it.
    """
    from torchft import Manager

    assert isinstance(manager, Manager)
    finished = out / "finished"
    finished.mkdir(exist_ok=True)
    (finished / str(group)).touch()
    deadline = time.monotonic() + config.timeout_s
    while len(list(finished.iterdir())) < config.replicas and time.monotonic() < deadline:
        if manager.num_participants() < config.replicas:
            manager.start_quorum()
        else:
            time.sleep(0.05)  # everyone is in the quorum; the late group is applying our state


def run_restart(config: TrainConfig, out: Path) -> None:
    """A torchrun worker: plain data parallel over Gloo, checkpoints every K steps."""
    import torch.distributed as dist

    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    attempt = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))
    rec = _recorder(config, out, rank)
    rec.job_start()
    if attempt and rank == 0:
        rec.restart(attempt)
    _join_attempt(config, rank, world, attempt)
    corpus = gpt.load_corpus()
    trainable = gpt.build(config, corpus.vocab_size)
    net, optim = trainable.model, trainable.optimizer
    checkpoint = out / "checkpoint.pt"
    step = _resume(checkpoint, net, optim) if attempt else 0
    if attempt and rank == 0:
        rec.checkpoint_loaded(step)  # step 0: no checkpoint yet, the seed's initial state
    while step < config.steps:
        for group_lr in optim.param_groups:
            group_lr["lr"] = gpt.learning_rate(config, step)
        optim.zero_grad()
        data = gpt.batch(corpus.train, config, step * world + rank)
        loss = net(data.inputs, data.targets)
        loss.backward()
        _maybe_fail(config, out, rec, rank, step)
        flat = gpt.flat_grads(net, loss)
        dist.all_reduce(flat)
        mean_loss = gpt.unflatten_grads(net, flat / world)
        optim.step()
        rec.step(step, loss=mean_loss)
        step += 1
        if rank == 0:
            _after_step(config, rec, net, optim, corpus, checkpoint, step)
    rec.job_end("completed")
    dist.destroy_process_group()


def _join_attempt(config: TrainConfig, rank: int, world: int, attempt: int) -> None:
    """Join this restart attempt's process group (Gloo over torchrun's store)."""
    import torch.distributed as dist

    # torchrun keeps one store across restarts; a fresh key prefix per attempt keeps the new Gloo
    # mesh from reading the dead attempt's addresses ("Connection refused" at connectFullMesh).
    hosted = os.environ.get("TORCHELASTIC_USE_AGENT_STORE", "").lower() == "true"
    base = dist.TCPStore(
        os.environ["MASTER_ADDR"],
        int(os.environ["MASTER_PORT"]),
        world,
        is_master=rank == 0 and not hosted,
        timeout=timedelta(seconds=60),
    )
    dist.init_process_group(
        config.backend,
        store=dist.PrefixStore(f"attempt{attempt}", base),
        rank=rank,
        world_size=world,
        timeout=timedelta(seconds=60),
    )


def _resume(checkpoint: Path, net: torch.nn.Module, optim: torch.optim.Optimizer) -> int:
    """Load the last checkpoint into ``net`` and ``optim``; the step it was saved at (0: none)."""
    if not checkpoint.exists():
        return 0
    state = torch.load(checkpoint, weights_only=True)
    net.load_state_dict(state["model"])
    optim.load_state_dict(state["optim"])
    return int(state["step"])


def _after_step(
    config: TrainConfig,
    rec: Recorder,
    net: gpt.GPT,
    optim: torch.optim.Optimizer,
    corpus: gpt.Corpus,
    checkpoint: Path,
    step: int,
) -> None:
    if step % config.checkpoint_every == 0 and step < config.steps:
        started = time.monotonic()
        partial = checkpoint.with_suffix(".tmp")
        torch.save({"model": net.state_dict(), "optim": optim.state_dict(), "step": step}, partial)
        partial.replace(checkpoint)  # atomic: a kill mid-save leaves the previous checkpoint
        rec.checkpoint_saved(step, duration_s=time.monotonic() - started)
    if step == config.steps or (config.eval_every and step % config.eval_every == 0):
        rec.eval(step, val_loss=gpt.held_out_loss(net, corpus, config))
        rec.flush()  # a peer's failure can stop this process any moment: keep the point


def main(argv: list[str]) -> int:
    """Entry point of the worker processes."""
    mode, config_path, out = Mode(argv[0]), Path(argv[1]), Path(argv[2])
    config = TrainConfig.from_dict(json.loads(config_path.read_text(encoding="utf-8")))
    torch.set_num_threads(config.threads)
    if mode is Mode.DROP:
        run_drop(config, out, int(argv[3]), int(argv[4]))
    else:
        run_restart(config, out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
