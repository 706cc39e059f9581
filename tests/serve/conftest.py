"""Fixtures for `gpuyield serve`: the bundled sample and a simulated cluster, servers started for real.

Servers run as subprocesses (`python -m gpuyield serve`, or tests/serve/live_server.py when a test
needs its own collection callable) on free loopback ports, with bounded waits, and are stopped at the
end of the test or session that started them.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpuyield.cli import app
from gpuyield.ingest.slurm import SlurmInputs, ingest_slurm
from gpuyield.simulate.api import run_scenario

REPO = Path(__file__).resolve().parents[2]
SAMPLE = REPO / "examples" / "slurm-lab"
SAMPLE_UNTIL = "2026-11-30T11:00:00"
SIM_UNTIL = "2026-11-04T00:00:00"
# A snapshot of a small store takes seconds; on a loaded CI machine much longer. Bounded, not timed.
START_TIMEOUT_S = 300.0


def run_cli(*args: str) -> str:
    """Run ``gpuyield ARGS`` in-process; fail the test with its output if it exits non-zero."""
    result = CliRunner().invoke(app, list(args))
    assert result.exit_code == 0, result.output
    return result.output


def report_cli(db: Path, *extra: str) -> str:
    """``gpuyield report --db DB --json EXTRA`` exactly as printed."""
    return run_cli("report", "--db", str(db), "--json", *extra)


def free_port(host: str = "127.0.0.1") -> int:
    """A port nobody listens on right now (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((host, 0))
        return int(probe.getsockname()[1])


@dataclass(frozen=True, kw_only=True, slots=True)
class Reply:
    """One HTTP response."""

    status: int
    body: bytes
    headers: dict[str, str]

    def json(self) -> dict[str, object]:
        return dict(json.loads(self.body))


def get(url: str, *, headers: dict[str, str] | None = None, timeout_s: float = 120.0) -> Reply:
    """GET ``url`` with the standard library; HTTP errors are replies, not exceptions."""
    request = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as response:
            return Reply(
                status=response.status, body=response.read(), headers=dict(response.headers)
            )
    except urllib.error.HTTPError as error:
        with error:
            return Reply(status=error.code, body=error.read(), headers=dict(error.headers))


def wait_until_ready(
    url: str, process: subprocess.Popen[bytes], log: Path, token: str | None = None
) -> None:
    """Poll ``url`` until it answers 200; fail with the server's log if it exits or never does."""
    deadline = time.monotonic() + START_TIMEOUT_S
    headers = {} if token is None else {"Authorization": f"Bearer {token}"}
    while time.monotonic() < deadline:
        if process.poll() is not None:
            pytest.fail(f"server exited ({process.returncode}):\n{log.read_text()}")
        try:
            if get(url, timeout_s=5, headers=headers).status == 200:
                return
        except OSError:
            pass
        time.sleep(0.25)
    pytest.fail(f"{url} not ready after {START_TIMEOUT_S:.0f} s:\n{log.read_text()}")


def stop(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM (uvicorn shuts down cleanly on it), then SIGKILL if it lingers."""
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=30)


@dataclass(frozen=True, kw_only=True, slots=True)
class Server:
    """A running `gpuyield serve`."""

    base: str
    """``http://host:port``."""
    db: Path
    process: subprocess.Popen[bytes]
    log: Path
    token: str | None = None
    """The token of ``--token-file`` when given (every request then needs it)."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Store:
    """An ingested store and the capture it came from."""

    db: Path
    capture: Path


def launch_serve(db: Path, log: Path, *args: str, host: str = "127.0.0.1") -> Server:
    """``python -m gpuyield serve --db DB --port <free> ARGS``, started (see ``ready``)."""
    port = free_port("0.0.0.0" if host == "0.0.0.0" else host)
    command = [sys.executable, "-m", "gpuyield", "serve", "--db", str(db)]
    command += ["--host", host, "--port", str(port), *args]
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    with log.open("wb") as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=env)
    base = f"http://{'127.0.0.1' if host == '0.0.0.0' else host}:{port}"
    token = None
    if "--token-file" in args:
        token = Path(args[args.index("--token-file") + 1]).read_text(encoding="utf-8").strip()
    return Server(base=base, db=db, process=process, log=log, token=token)


def ready(server: Server) -> Server:
    """Wait until ``server`` answers /healthz with 200; stop it if it never does."""
    try:
        wait_until_ready(server.base + "/healthz", server.process, server.log, server.token)
    except BaseException:
        stop(server.process)
        raise
    return server


def start_serve(db: Path, log: Path, *args: str, host: str = "127.0.0.1") -> Server:
    """``launch_serve``, ready to answer."""
    return ready(launch_serve(db, log, *args, host=host))


@pytest.fixture(scope="session")
def sample_store(tmp_path_factory: pytest.TempPathFactory) -> Store:
    """The bundled real Slurm sample, ingested as ``make demo`` does."""
    db = tmp_path_factory.mktemp("serve-sample") / "sample.duckdb"
    inputs = SlurmInputs(
        sacct=SAMPLE / "sacct-X-D-wide.psv",
        events=SAMPLE / "sacctmgr-event-format.psv",
        nodes=SAMPLE / "scontrol-show-nodes-oneliner.txt",
        manifest=SAMPLE / "manifest.toml",
    )
    ingest_slurm(db, inputs, until_s=_epoch(SAMPLE_UNTIL))
    return Store(db=db, capture=SAMPLE)


@pytest.fixture(scope="session")
def sim_store(tmp_path_factory: pytest.TempPathFactory) -> Store:
    """The simulator's ledger-check cluster (64 nodes, 3 days, every sacct state), ingested."""
    root = tmp_path_factory.mktemp("serve-sim")
    run_scenario("ledger-check", root / "capture")
    (root / "capture" / "truth.json").unlink()
    db = root / "sim.duckdb"
    ingest_slurm(db, SlurmInputs.from_dir(root / "capture"), until_s=_epoch(SIM_UNTIL))
    return Store(db=db, capture=root / "capture")


@pytest.fixture(scope="session")
def servers(
    sample_store: Store, sim_store: Store, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, Server]]:
    """`gpuyield serve` on the sample and on the simulated cluster, started side by side (their
    first snapshots are the slow part), for the whole session."""
    launched = {
        name: launch_serve(store.db, tmp_path_factory.mktemp(f"{name}-server") / "serve.log")
        for name, store in (("sample", sample_store), ("sim", sim_store))
    }
    try:
        for server in launched.values():
            ready(server)
        yield launched
    finally:
        for server in launched.values():
            stop(server.process)


@pytest.fixture(scope="session")
def sim_server(servers: dict[str, Server]) -> Server:
    """`gpuyield serve` on the simulated cluster."""
    return servers["sim"]


@pytest.fixture(scope="session")
def sample_server(servers: dict[str, Server]) -> Server:
    """`gpuyield serve` on the bundled sample."""
    return servers["sample"]


def _epoch(text: str) -> int:
    from datetime import UTC, datetime

    return int(datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp())
