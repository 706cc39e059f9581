"""``report``/``ladder``/``idle-now --wait``: a store another process is writing is waited for.

DuckDB lets one process write a store and nobody else open it meanwhile; a collection holds it for
seconds. Another process holds the store open for writing until told to let go; a report with
``--wait 0`` fails at once with the hint, one with a long ``--wait`` finishes once it is let go.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from gpuyield.ingest.slurm import SlurmInputs, ingest_slurm

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "slurm-lab"
HOLDER = """
import sys, time, pathlib
from gpuyield.store import connect
con = connect(sys.argv[1])
con.execute("BEGIN TRANSACTION")
pathlib.Path(sys.argv[2]).touch()
while not pathlib.Path(sys.argv[3]).exists():
    time.sleep(0.05)
con.execute("ROLLBACK")
con.close()
"""


@pytest.fixture
def db(tmp_path: Path) -> Path:
    store = tmp_path / "db.duckdb"
    manifest = tmp_path / "manifest.toml"
    manifest.write_text(
        (EXAMPLES / "manifest.toml").read_text()
        + '\n[[families]]\nname = "abc"\nruns = "abc*"\n\n[ladder]\nrungs = [1, 8]\n'
    )
    ingest_slurm(store, SlurmInputs(sacct=EXAMPLES / "sacct-X-D-wide.psv",
                                    events=EXAMPLES / "sacctmgr-event-format.psv",
                                    manifest=manifest),
                 since_s=1_796_032_800, until_s=1_796_036_400)  # fmt: skip
    return store


def _gpuyield(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "gpuyield", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)  # fmt: skip


@pytest.mark.parametrize("command", [["report", "--json"], ["ladder", "--json"], ["idle-now"]])
def test_a_held_store_is_waited_for(db: Path, tmp_path: Path, command: list[str]) -> None:
    held, release = tmp_path / "held", tmp_path / "release"
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(db), str(held), str(release)])
    try:
        deadline = time.monotonic() + 120
        while not held.exists():
            assert time.monotonic() < deadline and holder.poll() is None
            time.sleep(0.05)
        started = time.monotonic()
        impatient = _gpuyield(*command, "--db", str(db), "--wait", "0")
        out, err = impatient.communicate(timeout=300)
        one_try_s = time.monotonic() - started
        assert impatient.returncode == 1, out + err
        err = " ".join(err.split())  # the message may be wrapped
        assert "another process holds it" in err and "--wait" in err and "Traceback" not in err
        if command[0] != "report":
            return  # the same store-level wait (cli/_common.py); the full cycle once is enough
        patient = _gpuyield(*command, "--db", str(db), "--wait", "10m")
        # Twice as long as the impatient one took to fail: the patient one has met the held
        # store by then (on a slow machine it may not have, and the test only checks less).
        time.sleep(2 * one_try_s)
        assert patient.poll() is None, patient.communicate()
        release.touch()
        out, err = patient.communicate(timeout=600)
        assert patient.returncode == 0, err
    finally:
        release.touch()
        holder.wait(timeout=120)
