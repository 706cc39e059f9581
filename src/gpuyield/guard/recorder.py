"""``Recorder``: append-only run telemetry (JSON Lines) that costs next to nothing per step.

Call it from rank 0 of the training job (other ranks get a recorder that does nothing)::

    rec = Recorder(run="pt-main", directory="/shared/telemetry")
    rec.job_start()
    for step in range(start, total):
        ...
        rec.step(step, loss=loss_value, grad_norm=gn, tokens=tokens_seen)
        if step % 1000 == 0:
            save_checkpoint(); rec.checkpoint_saved(step, duration_s=save_seconds)
    rec.job_end("completed")

Why it is cheap: ``step()`` appends one tuple to a deque (thread-safe, no lock) and returns. A
daemon thread wakes every ``flush_interval_s`` seconds, or as soon as ``flush_every`` records are
waiting, turns the tuples into JSON lines and appends them with one ``os.write`` per batch.
Checkpoints and job ends flush synchronously and ``fsync``, so what the ledger needs most is on disk
when it matters.

Why it is crash safe: the file is opened with ``O_APPEND`` and only whole lines are written, so a
killed process loses at most the records since the last flush plus, at worst, one torn last line; it
never rewrites earlier lines. A restart that appends to the same file first ends a torn line with a
newline, so the next ``job_start`` starts on a line of its own; the reader skips and counts torn
lines.

Format: docs/contracts.md, "Run telemetry". Non-finite numbers are written as ``NaN``/``Infinity``
(what Python's json module reads and writes), because a NaN loss is exactly what must be recorded.
This module imports only the standard library.
"""

from __future__ import annotations

import atexit
import json
import os
import socket
import threading
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import Any

from gpuyield.errors import InputError

#: Format version written in every line ("v").
FORMAT_VERSION = 1

_STEP = 0  # tag of buffered step tuples; other events are buffered as ready-made dicts


def slurm_job_id(environ: dict[str, str] | None = None) -> str | None:
    """The Slurm job id the ledger knows this job by (``<array job>_<task>`` for array tasks)."""
    env = os.environ if environ is None else environ
    array_job, task = env.get("SLURM_ARRAY_JOB_ID"), env.get("SLURM_ARRAY_TASK_ID")
    if array_job and task:
        return f"{array_job}_{task}"
    return env.get("SLURM_JOB_ID") or None


def host_name(environ: dict[str, str] | None = None) -> str:
    """The Slurm node name when inside a job (what sacct's NodeList shows), else the hostname."""
    env = os.environ if environ is None else environ
    return env.get("SLURMD_NODENAME") or socket.gethostname()


def is_rank_zero(environ: dict[str, str] | None = None) -> bool:
    """Whether this process is global rank 0 (torchrun's RANK, else Slurm's SLURM_PROCID)."""
    env = os.environ if environ is None else environ
    rank = env.get("RANK", env.get("SLURM_PROCID", "0"))
    return rank.strip() == "0"


def _step_template(has: tuple[bool, bool, bool, bool]) -> str:
    """The %-format of a step line with these optional fields (loss, grad_norm, scale, tokens)."""
    # Step times to the millisecond: steps take far longer, and %.3f costs half of repr here.
    parts = ['{"v":1,"event":"step","t":%.3f,"step":%d']
    names = ("loss", "grad_norm", "loss_scale")
    parts += [f',"{name}":%r' for name, present in zip(names, has[:3], strict=True) if present]
    if has[3]:
        parts.append(',"tokens":%d')
    return "".join(parts) + "}\n"


# One template per combination of present fields: formatting is the flusher's main cost, and a
# single %-format per line is the cheapest way CPython has to write floats as shortest reprs.
_STEP_TEMPLATES = {
    (a, b, c, d): _step_template((a, b, c, d))
    for a in (False, True)
    for b in (False, True)
    for c in (False, True)
    for d in (False, True)
}

# repr() writes nan/inf; JSON readers (Python's json included) expect NaN/Infinity. A step line's
# keys never contain ":nan" or ":inf", so replacing after formatting is safe and cheaper than
# testing every value.
_NONFINITE = ((":nan", ":NaN"), (":inf", ":Infinity"), (":-inf", ":-Infinity"))


def _step_line(item: tuple[Any, ...]) -> str:
    """One step line; float() also turns numpy and 0-d torch scalars into plain numbers."""
    _, t, step, loss, grad_norm, loss_scale, tokens = item
    template = _STEP_TEMPLATES[
        (loss is not None, grad_norm is not None, loss_scale is not None, tokens is not None)
    ]
    values: list[Any] = [float(t), int(step)]
    values += [float(v) for v in (loss, grad_norm, loss_scale) if v is not None]
    if tokens is not None:
        values.append(int(tokens))
    return _finite_spelling(template % tuple(values))


def _finite_spelling(text: str) -> str:
    """Spell non-finite numbers as Python's json module does (NaN, Infinity, -Infinity)."""
    if "nan" in text or "inf" in text:
        for old, new in _NONFINITE:
            text = text.replace(old, new)
    return text


def _event_line(event: dict[str, Any]) -> str:
    return json.dumps(event, separators=(",", ":")) + "\n"


class Recorder:
    """Append-only telemetry of one run: job starts/ends, steps, checkpoints, evals."""

    def __init__(
        self,
        path: str | Path | None = None,
        *,
        run: str | None = None,
        directory: str | Path | None = None,
        flush_every: int = 4096,
        flush_interval_s: float = 5.0,
        enabled: bool | None = None,
        clock: Callable[[], float] = time.time,
        replica: int | None = None,
    ) -> None:
        if path is None and run is None:
            raise InputError(
                "Recorder needs a path or a run name",
                hint="Recorder(run='pt-main') writes ./pt-main.jsonl",
            )
        if flush_every < 1:
            raise InputError(f"recorder.flush_every must be >= 1, got {flush_every}")
        if not flush_interval_s > 0:
            raise InputError(f"recorder.flush_interval_s must be > 0, got {flush_interval_s}")
        if replica is not None and replica < 0:
            raise InputError(f"recorder.replica must be >= 0, got {replica}")
        base = Path(directory or os.environ.get("GPUYIELD_TELEMETRY_DIR", "."))
        self.path = Path(path) if path is not None else base / f"{run}.jsonl"
        self.run = run if run is not None else self.path.stem
        self.enabled = is_rank_zero() if enabled is None else enabled
        self._flush_every = flush_every
        self._flush_interval_s = flush_interval_s
        self._clock = clock
        # Fault-tolerant jobs write one file from several replica groups: every line names its group.
        self.replica = replica
        self._replica_tail = None if replica is None else f',"replica":{int(replica)}}}\n'
        self._pending: deque[Any] = deque()
        self._write_lock = threading.Lock()
        self._wake = threading.Event()
        self._closed = False
        # One attribute for step()'s hot path: enabled and not closed.
        self._accepting = self.enabled
        self._error: BaseException | None = None
        self._fd: int | None = None
        self._thread: threading.Thread | None = None
        if self.enabled:
            self._open()

    # -- the hot path -------------------------------------------------------------------------

    def step(
        self,
        step: int,
        loss: float | None = None,
        grad_norm: float | None = None,
        loss_scale: float | None = None,
        tokens: int | None = None,
    ) -> None:
        """Record one training step; never blocks on I/O. Pass Python numbers (``loss.item()``)."""
        if not self._accepting:
            if self.enabled:
                raise InputError(f"Recorder for {self.path} is closed; cannot record a step")
            return
        pending = self._pending
        pending.append((_STEP, self._clock(), step, loss, grad_norm, loss_scale, tokens))
        if len(pending) >= self._flush_every:
            self._wake.set()

    # -- rare events: written through, fsynced where the ledger depends on them ----------------

    def job_start(self) -> None:
        """Record the start of this job (Slurm job id, host, pid); call once per process start."""
        self._event(
            "job_start",
            run=self.run,
            job_id=slurm_job_id(),
            host=host_name(),
            pid=os.getpid(),
        )
        self.flush()

    def checkpoint_saved(self, step: int, duration_s: float) -> None:
        """Record a finished checkpoint save (call right after it); flushed and fsynced."""
        if not duration_s >= 0:
            raise InputError(f"checkpoint_saved.duration_s must be >= 0, got {duration_s!r}")
        self._event("checkpoint_saved", step=int(step), duration_s=float(duration_s))
        self.flush(fsync=True)

    def checkpoint_loaded(self, step: int) -> None:
        """Record that the run resumed from the checkpoint of ``step``."""
        self._event("checkpoint_loaded", step=int(step))
        self.flush()

    # -- fault tolerance: what a failure cost, for gpuyield.ledger.ft -------------------------------

    def replica_lost(self, step: int, *, replicas: int, gpus: int = 1) -> None:
        """Record that this replica group fails now, at ``step``; flushed and fsynced first.

        ``replicas`` is how many replica groups the job has, ``gpus`` how many GPUs each holds: the
        ledger multiplies lost seconds by them.
        """
        if replicas < 1 or gpus < 1:
            raise InputError(
                f"replica_lost needs replicas >= 1 and gpus >= 1, got {replicas}, {gpus}"
            )
        self._event("replica_lost", step=int(step), replicas=int(replicas), gpus=int(gpus))
        self.flush(fsync=True)

    def quorum(self, step: int, *, quorum_id: int, participants: int) -> None:
        """Record a new quorum (a changed set of replica groups) seen by this group at ``step``."""
        self._event(
            "quorum", step=int(step), quorum_id=int(quorum_id), participants=int(participants)
        )

    def heal_started(self, step: int) -> None:
        """Record that this (restarted) group starts fetching live state from a peer."""
        self._event("heal_started", step=int(step))
        self.flush()

    def heal_done(self, step: int) -> None:
        """Record that this group holds a peer's state of ``step`` and rejoins the job."""
        self._event("heal_done", step=int(step))
        self.flush()

    def restart(self, attempt: int) -> None:
        """Record that a process (or, without ``replica``, the whole job) starts again."""
        if attempt < 1:
            raise InputError(f"restart.attempt must be >= 1, got {attempt}")
        self._event("restart", attempt=int(attempt))
        self.flush()

    def eval(self, step: int, **metrics: float) -> None:
        """Record evaluation metrics at ``step`` (e.g. ``rec.eval(1000, val_loss=2.4)``)."""
        self._event("eval", step=int(step), metrics={k: float(v) for k, v in metrics.items()})

    def job_end(self, status: str = "completed") -> None:
        """Record the end of this job, flush, fsync and close the file."""
        if not status:
            raise InputError("job_end.status must not be empty")
        self._event("job_end", status=status)
        self.close()

    def __enter__(self) -> Recorder:
        self.job_start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._closed:
            return
        self.job_end("completed" if exc_type is None else "failed")

    # -- flushing --------------------------------------------------------------------------------

    def flush(self, *, fsync: bool = False) -> None:
        """Write everything buffered now (and fsync if asked); raises a background write error."""
        if not self.enabled:
            return
        self._drain()
        if fsync and self._fd is not None:
            os.fsync(self._fd)
        self._raise_background_error()

    def close(self) -> None:
        """Flush, fsync, stop the flusher thread and close the file. Idempotent."""
        self._accepting = False
        if self._closed or not self.enabled:
            self._closed = True
            return
        self._closed = True
        self._wake.set()
        if self._thread is not None:
            self._thread.join()
        self._drain()
        assert self._fd is not None
        os.fsync(self._fd)
        os.close(self._fd)
        self._fd = None
        atexit.unregister(self._at_exit)
        self._raise_background_error()

    def _event(self, event: str, **fields: Any) -> None:
        if not self.enabled:
            return
        if self._closed:
            raise InputError(f"Recorder for {self.path} is closed; cannot record {event!r}")
        line = {"v": FORMAT_VERSION, "event": event, "t": self._clock(), **fields}
        if self.replica is not None:
            line["replica"] = self.replica
        self._pending.append(line)

    def _open(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        self._end_torn_line()
        self._thread = threading.Thread(
            target=self._flush_loop, name=f"gpuyield-recorder-{self.run}", daemon=True
        )
        self._thread.start()
        # A clean interpreter exit without job_end (an exception in training) still flushes.
        atexit.register(self._at_exit)

    def _end_torn_line(self) -> None:
        """If a killed writer left a partial last line, end it so our lines start clean."""
        assert self._fd is not None
        size = os.fstat(self._fd).st_size
        if size == 0:
            return
        with self.path.open("rb") as handle:
            handle.seek(size - 1)
            last = handle.read(1)
        if last != b"\n":
            self._write_all(b"\n")

    def _flush_loop(self) -> None:
        while not self._closed:
            self._wake.wait(self._flush_interval_s)
            self._wake.clear()
            try:
                self._drain()
            except BaseException as error:  # kept, and raised on the caller's next flush/close
                self._error = error
                return

    def _drain(self) -> None:
        """Serialise and write every buffered record, in order, as whole lines.

        A record that cannot be serialised (a tensor or a string passed as a number) is dropped
        and raised as ``InputError`` after the lines before it are written; later records stay
        buffered for the next flush.
        """
        pending = self._pending
        with self._write_lock:
            if self._fd is None:
                return
            lines: list[str] = []
            bad: InputError | None = None
            # popleft until empty: records appended meanwhile by step() are simply taken too.
            tail = self._replica_tail
            while pending and bad is None:
                item = pending.popleft()
                try:
                    if type(item) is not tuple:
                        lines.append(_event_line(item))
                    elif tail is None:
                        lines.append(_step_line(item))
                    else:
                        lines.append(_step_line(item)[:-2] + tail)
                except (TypeError, ValueError) as error:
                    bad = InputError(
                        f"Recorder: cannot write record {item!r}: {error}",
                        hint="pass Python numbers to step() (loss.item(), not a tensor)",
                    )
            if lines:
                self._write_all("".join(lines).encode())
            if bad is not None:
                raise bad

    def _write_all(self, data: bytes) -> None:
        assert self._fd is not None
        view = memoryview(data)
        while view:
            written = os.write(self._fd, view)
            view = view[written:]

    def _raise_background_error(self) -> None:
        if self._error is not None:
            error, self._error = self._error, None
            raise InputError(
                f"Recorder could not write {self.path}: {error}",
                hint="pass numbers to step() (loss.item(), not a tensor) and a writable path",
            ) from error

    def _at_exit(self) -> None:
        if not self._closed:
            self._closed = True
            self._accepting = False
            self._drain()
