"""A real Spark standalone cluster for the tests: one master and one worker on loopback.

Started from pyspark's own launcher (``bin/spark-class ...deploy.master.Master`` and
``...deploy.worker.Worker``: the pip package ships no ``start-master.sh``), as a user would on a
machine with Java. The worker runs its executors' Python with this interpreter
(``PYSPARK_PYTHON``): gpuyield is shipped to them the way a user shipping the driver's environment
does. Memory is capped (daemons 256 MB each, the executor 1 GB, the driver 1 GB): the machine is
shared. Everything it writes (logs, the worker's scratch space) stays under one directory.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from gpuyield.lake.spark_jvm import jvm_settings

START_TIMEOUT_S = 180
WORKER_CORES = 2
EXECUTOR_MEMORY = "1g"
DRIVER_MEMORY = "1g"


@dataclass(frozen=True, kw_only=True, slots=True)
class SparkCluster:
    """A running standalone cluster."""

    master_url: str
    """``spark://127.0.0.1:PORT``."""
    web_url: str
    """The master's web UI (its ``/json/`` says which workers are alive)."""
    logs: Path
    """Where the daemons write their output."""


def why_unavailable() -> str | None:
    """What is missing to start a cluster here (None: nothing)."""
    try:
        import pyspark  # noqa: F401
    except ImportError:
        return "pyspark is not installed (pip install 'gpuyield[spark]')"
    if subprocess.run(["java", "-version"], capture_output=True, check=False).returncode != 0:
        return "java is not installed"
    return None


def _spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).resolve().parent


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _environment(work: Path) -> dict[str, str]:
    return {
        **os.environ,
        "SPARK_HOME": str(_spark_home()),
        "SPARK_LOCAL_IP": "127.0.0.1",
        "SPARK_MASTER_HOST": "127.0.0.1",
        "SPARK_LOG_DIR": str(work / "logs"),
        "SPARK_WORKER_DIR": str(work / "worker"),
        "SPARK_LOCAL_DIRS": str(work / "scratch"),
        "SPARK_DAEMON_MEMORY": "256m",
        # The executors' Python: this interpreter, whose environment has gpuyield.
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
    }


def _start(args: list[str], env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    spark_class = _spark_home() / "bin" / "spark-class"
    with log.open("ab") as out:
        # A process group of its own: stopping it stops the JVM the launcher script execs.
        return subprocess.Popen(
            ["bash", str(spark_class), *args],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def _alive_workers(web_url: str) -> int:
    try:
        with urllib.request.urlopen(f"{web_url}/json/", timeout=5) as reply:
            return int(json.load(reply).get("aliveworkers", 0))
    except (OSError, ValueError):
        return 0


def _wait_for_worker(web_url: str, processes: list[subprocess.Popen[bytes]], logs: Path) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if _alive_workers(web_url) >= 1:
            return
        dead = [p for p in processes if p.poll() is not None]
        if dead:
            raise RuntimeError(f"a Spark daemon exited ({dead[0].args}); see {logs}")
        time.sleep(1)
    raise RuntimeError(f"no Spark worker registered within {START_TIMEOUT_S} s; see {logs}")


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is not None:
        return
    os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=30)


@contextmanager
def running_cluster(work: Path, *, worker_memory: str = "1536m") -> Iterator[SparkCluster]:
    """Start a master and a worker under ``work`` (``worker_memory`` for its executors); stop
    both (and their executors) after."""
    for sub in ("logs", "worker", "scratch"):
        (work / sub).mkdir(parents=True, exist_ok=True)
    env = _environment(work)
    port, web = _free_port(), _free_port()
    master_url, web_url = f"spark://127.0.0.1:{port}", f"http://127.0.0.1:{web}"
    processes: list[subprocess.Popen[bytes]] = []
    try:
        processes.append(
            _start(
                [
                    "org.apache.spark.deploy.master.Master",
                    "--host",
                    "127.0.0.1",
                    "--port",
                    str(port),
                    "--webui-port",
                    str(web),
                ],
                env,
                work / "logs" / "master.out",
            )
        )
        processes.append(
            _start(
                [
                    "org.apache.spark.deploy.worker.Worker",
                    "--host",
                    "127.0.0.1",
                    "--webui-port",
                    str(_free_port()),
                    "--cores",
                    str(WORKER_CORES),
                    "--memory",
                    worker_memory,
                    "--work-dir",
                    str(work / "worker"),
                    master_url,
                ],
                env,
                work / "logs" / "worker.out",
            )
        )
        _wait_for_worker(web_url, processes, work / "logs")
        yield SparkCluster(master_url=master_url, web_url=web_url, logs=work / "logs")
    finally:
        for process in reversed(processes):
            _stop(process)


def session_for(cluster: SparkCluster, work: Path):
    """The tests' driver on the cluster (one per test session; memory capped)."""
    os.environ.update({"SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable})
    from pyspark.sql import SparkSession

    builder = (
        SparkSession.builder.master(cluster.master_url)
        .appName("gpuyield tests")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.memory", DRIVER_MEMORY)
        .config("spark.executor.memory", EXECUTOR_MEMORY)
        .config("spark.executor.cores", str(WORKER_CORES))
        .config("spark.cores.max", str(WORKER_CORES))
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.sql.warehouse.dir", str(work / "warehouse"))
    )
    # The JVM flags gpuyield gives a session it starts itself (lake/spark_jvm.py), so the tests'
    # driver and executors run as a user's report would.
    for key, value in jvm_settings().items():
        builder = builder.config(key, value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    return session
