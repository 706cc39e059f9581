"""`gpuyield serve` with a collection that re-ingests a growing capture: run by test_concurrency.py.

``python -m tests.serve.live_server DB CAPTURE WORK FIRST_CUTOFF STEP_S`` prints the port it listens
on, then serves. Each collection writes a new dump of the capture's sacct file into WORK and ingests
it for real with a capture time one ``STEP_S`` later, as a periodic `sacct` dump would arrive: the
store changes under the readers, and every snapshot has a later coverage end and other numbers.
"""

from __future__ import annotations

import socket
import sys
from datetime import UTC, datetime
from pathlib import Path

from gpuyield.ingest.slurm import SlurmInputs, ingest_slurm
from gpuyield.serve import Listen, ServeSettings, serve
from gpuyield.serve.state import ReadWriteLock


def sacct_until(capture: Path, out: Path, cutoff_s: int) -> None:
    """A fresh dump of the capture's sacct file for a capture at ``cutoff_s``.

    Every job is in it (the release manifest names runs from all three days), in an order rotated by
    the cutoff so each dump is a new file to the store; the ledger clips at the capture time.
    """
    lines = (capture / "sacct.psv").read_text(encoding="utf-8").splitlines(keepends=True)
    rows = lines[1:]
    turn = (cutoff_s // 60) % len(rows)
    out.write_text(lines[0] + "".join(rows[turn:] + rows[:turn]), encoding="utf-8")


def ingest_until(db: Path, capture: Path, work: Path, cutoff_s: int) -> None:
    """Ingest a dump of the capture taken at ``cutoff_s``."""
    sacct = work / f"sacct-{cutoff_s}.psv"
    sacct_until(capture, sacct, cutoff_s)
    ingest_slurm(db, SlurmInputs(sacct=sacct), until_s=cutoff_s)


class Recollect:
    """The scheduled collection: each call moves the cutoff one step and ingests."""

    def __init__(self, db: Path, capture: Path, work: Path, first_s: int, step_s: int) -> None:
        self.db, self.capture, self.work = db, capture, work
        self.cutoff_s, self.step_s = first_s, step_s

    def __call__(self, lock: ReadWriteLock) -> None:
        self.cutoff_s += self.step_s
        with lock.writing():  # the whole collection is a store write here
            ingest_until(self.db, self.capture, self.work, self.cutoff_s)


def main(argv: list[str]) -> None:
    db, capture, work = Path(argv[0]), Path(argv[1]), Path(argv[2])
    first_s = int(datetime.fromisoformat(argv[3]).replace(tzinfo=UTC).timestamp())
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    print(listener.getsockname()[1], flush=True)
    settings = ServeSettings(
        db=db,
        collect_fn=Recollect(db, capture, work, first_s, int(argv[4])),
        collect_every_s=0.5,
        watch_every_s=0.5,
        with_page=False,
    )
    serve(settings, Listen(host="127.0.0.1", port=listener.getsockname()[1]), sockets=[listener])


if __name__ == "__main__":
    main(sys.argv[1:])
