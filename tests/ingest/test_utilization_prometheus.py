"""The Prometheus path against a real server holding the fixture as backfilled blocks.

The saved ``query_range`` JSON becomes OpenMetrics, ``promtool tsdb create-blocks-from openmetrics``
writes TSDB blocks, and a real ``prometheus`` serves them on a free loopback port; ``gpuyield ingest
utilization --prometheus`` must then give the same ledger as ``--prom-json`` on the saved file.
"""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpuyield.ingest.utilization import PrometheusSource, ingest_utilization
from gpuyield.report.summary import build_report
from tests.ledger.test_utilization import FIXTURE, STEP_S, UNTIL_S, slurm_db
from tests.ledger.timeline import T0_S

_READY_TIMEOUT_S = 60.0

pytestmark = pytest.mark.skipif(
    shutil.which("promtool") is None or shutil.which("prometheus") is None,
    reason="needs the Debian package prometheus (.ci/run installs it)",
)


def openmetrics(document: dict[str, object]) -> str:
    """The samples of a query_range response as OpenMetrics text, one family per metric."""
    families: dict[str, list[str]] = {}
    result = document["data"]["result"]  # type: ignore[index]
    for series in result:
        labels = dict(series["metric"])
        name = labels.pop("__name__")
        text = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
        lines = families.setdefault(name, [])
        lines.extend(f"{name}{{{text}}} {v} {t}" for t, v in series["values"])
    out = []
    for name, lines in families.items():
        out.append(f"# TYPE {name} gauge")
        out.extend(lines)
    out.append("# EOF")
    return "\n".join(out) + "\n"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def prometheus_url(tmp_path: Path) -> Iterator[str]:
    document = json.loads((FIXTURE / "dcgm_query_range.json").read_text())
    metrics = tmp_path / "fixture.om"
    metrics.write_text(openmetrics(document))
    data = tmp_path / "tsdb"
    subprocess.run(
        ["promtool", "tsdb", "create-blocks-from", "openmetrics", str(metrics), str(data)],
        check=True,
        capture_output=True,
        timeout=120,
    )
    config = tmp_path / "prometheus.yml"
    config.write_text("global:\n  scrape_interval: 1h\n")
    port = _free_port()
    log = (tmp_path / "prometheus.log").open("w")
    process = subprocess.Popen(
        [
            "prometheus",
            f"--config.file={config}",
            f"--storage.tsdb.path={data}",
            # The fixture is from 2026-01-01: keep its blocks, whatever today's date is.
            "--storage.tsdb.retention.time=100y",
            f"--web.listen-address=127.0.0.1:{port}",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_ready(url, process, tmp_path / "prometheus.log")
        yield url
    finally:
        process.terminate()
        process.wait(timeout=30)
        log.close()


def _wait_ready(url: str, process: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + _READY_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            pytest.fail(f"prometheus exited: {log.read_text()[-2000:]}")
        try:
            with urllib.request.urlopen(f"{url}/-/ready", timeout=2) as response:
                if response.status == 200:
                    return
        except OSError:
            time.sleep(0.2)
    pytest.fail(f"prometheus not ready after {_READY_TIMEOUT_S} s: {log.read_text()[-2000:]}")


def test_server_path_gives_the_saved_json_ledger(tmp_path: Path, prometheus_url: str) -> None:
    saved = slurm_db(tmp_path / "saved")
    ingest_utilization(saved, prom_json=[FIXTURE / "dcgm_query_range.json"], step_s=STEP_S)
    served = slurm_db(tmp_path / "served")
    server = PrometheusSource(url=prometheus_url, since_s=T0_S, until_s=UNTIL_S)
    results = ingest_utilization(served, server=server, step_s=STEP_S)
    assert results[0].samples == 16 * 120 - 10  # every GPU sample, the exporter's gap kept
    a, b = build_report(saved).to_dict(), build_report(served).to_dict()
    assert b["subcategories"]["idle.allocated"] > 0
    assert b["categories"] == pytest.approx(a["categories"])
    assert b["subcategories"] == pytest.approx(a["subcategories"])
    assert _nested_approx(a["gpu_activity"], b["gpu_activity"])


def _nested_approx(a: object, b: object) -> bool:
    if isinstance(a, dict) and isinstance(b, dict):
        assert a.keys() == b.keys()
        return all(_nested_approx(a[k], b[k]) for k in a)
    if isinstance(a, float) and isinstance(b, float):
        assert b == pytest.approx(a, rel=1e-9)
        return True
    assert a == b
    return True
