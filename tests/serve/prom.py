"""A real Prometheus for the tests: started on loopback with the example config, queried over HTTP."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
import urllib.parse
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from tests.serve.conftest import REPO, free_port, get, stop

EXAMPLES = REPO / "examples" / "prometheus"
RULE_FILES = ("gpuyield-alerts.yml", "gpuyield-recording.yml")
_WAIT_S = 300.0


def find_tool(name: str) -> str:
    """``prometheus`` or ``promtool``: CI installs them (.ci/run), so there a missing one fails."""
    path = shutil.which(name)
    if path is None:
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI=true but {name} is not installed")
        pytest.skip(f"{name} is not installed (apt-get install prometheus)")
    return path


@dataclass(frozen=True, kw_only=True, slots=True)
class Prometheus:
    """A running Prometheus."""

    base: str

    def api(self, path: str, **params: str) -> object:
        reply = get(f"{self.base}/api/v1/{path}?{urllib.parse.urlencode(params)}")
        body = json.loads(reply.body)
        assert reply.status == 200 and body["status"] == "success", body
        return body["data"]

    def query(self, expr: str) -> list[dict[str, object]]:
        data = self.api("query", query=expr)
        assert isinstance(data, dict)
        return list(data["result"])

    def values(self, expr: str, by: str) -> dict[str, float]:
        """An instant vector as {label ``by``: value}."""
        return {str(r["metric"].get(by, "")): float(r["value"][1]) for r in self.query(expr)}  # type: ignore[index,union-attr]

    def scalar(self, expr: str) -> float:
        result = self.query(expr)
        assert len(result) == 1, (expr, result)
        return float(result[0]["value"][1])  # type: ignore[index]


def write_config(directory: Path, targets: list[str]) -> Path:
    """The example prometheus.yml, pointed at ``targets`` and scraping every second."""
    config = yaml.safe_load((EXAMPLES / "prometheus.yml").read_text())
    config["global"] = {"scrape_interval": "1s", "evaluation_interval": "1s"}
    (job,) = config["scrape_configs"]
    job["static_configs"] = [{"targets": targets}]
    for name in RULE_FILES:
        shutil.copy(EXAMPLES / name, directory / name)
    path = directory / "prometheus.yml"
    path.write_text(yaml.safe_dump(config))
    return path


@contextmanager
def running_prometheus(directory: Path, targets: list[str]) -> Iterator[Prometheus]:
    """Prometheus on a free loopback port, its data in ``directory``; stopped on exit."""
    exe = find_tool("prometheus")
    config = write_config(directory, targets)
    port = free_port()
    log = directory / "prometheus.log"
    command = [
        exe, f"--config.file={config}", f"--storage.tsdb.path={directory / 'data'}",
        f"--web.listen-address=127.0.0.1:{port}", "--log.level=warn",
    ]  # fmt: skip
    with log.open("wb") as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, cwd=directory)
    try:
        prom = Prometheus(base=f"http://127.0.0.1:{port}")
        _wait(lambda: get(prom.base + "/-/ready", timeout_s=5).status == 200, process, log)
        yield prom
    finally:
        stop(process)


def wait_for(prom: Prometheus, expr: str, process_log: Path | None = None) -> None:
    """Until ``expr`` returns something (bounded)."""
    deadline = time.monotonic() + _WAIT_S
    while time.monotonic() < deadline:
        if prom.query(expr):
            return
        time.sleep(0.5)
    log = process_log.read_text() if process_log else ""
    pytest.fail(f"Prometheus never returned {expr} in {_WAIT_S:.0f} s\n{log}")


def _wait(ready: object, process: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + _WAIT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            pytest.fail(f"prometheus exited ({process.returncode}):\n{log.read_text()}")
        try:
            if ready():  # type: ignore[operator]
                return
        except OSError:
            pass
        time.sleep(0.25)
    pytest.fail(f"prometheus not ready after {_WAIT_S:.0f} s:\n{log.read_text()}")
