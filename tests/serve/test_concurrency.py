"""50 clients read for 30 s while collections really change the store: no error, no torn number.

Each collection ingests a later cut of the simulated capture (tests/serve/live_server.py), so the
coverage end and every category move between snapshots. A response is consistent when its numbers
belong to one snapshot: categories sum to installed, the rolling windows end where the coverage
ends, and every response that names the same coverage end carries the same numbers.
"""

from __future__ import annotations

import http.client
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.serve.conftest import REPO, Store, get, stop, wait_until_ready
from tests.serve.live_server import sacct_until

CLIENTS = 50
READ_S = 30.0
# Past this the machine is too slow for the test to mean anything: fail rather than hang.
CAP_S = 900.0
FIRST_CUTOFF = "2026-11-03T00:00:00"
STEP_S = 3600


@dataclass(kw_only=True)
class Seen:
    """What the readers saw, shared between their threads."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    by_end: dict[float, tuple[float, ...]] = field(default_factory=dict)
    api_by_end: dict[str, dict[str, float]] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    responses: int = 0


@pytest.fixture
def live(sim_store: Store, tmp_path: Path) -> Iterator[str]:
    db = tmp_path / "live.duckdb"
    from gpuyield.ingest.slurm import SlurmInputs, ingest_slurm
    from tests.serve.conftest import _epoch

    capture = sim_store.capture
    first_s = _epoch(FIRST_CUTOFF)
    sacct = tmp_path / "sacct-first.psv"
    sacct_until(capture, sacct, first_s)
    first = SlurmInputs(
        sacct=sacct,
        events=capture / "events.psv",
        nodes=capture / "nodes.txt",
        manifest=capture / "manifest.toml",
    )
    ingest_slurm(db, first, until_s=first_s)
    env = {**os.environ, "PYTHONPATH": f"{REPO / 'src'}:{REPO}"}
    command = [sys.executable, "-m", "tests.serve.live_server", str(db), str(capture)]
    command += [str(tmp_path), FIRST_CUTOFF, str(STEP_S)]
    log = tmp_path / "serve.log"
    with log.open("wb") as err:
        process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=err, env=env, cwd=REPO)
    try:
        assert process.stdout is not None
        port = int(process.stdout.readline())
        base = f"127.0.0.1:{port}"
        wait_until_ready(f"http://{base}/healthz", process, log)
        yield base
    finally:
        stop(process)
        if process.stdout is not None:
            process.stdout.close()


def _check_metrics(text: str, seen: Seen) -> float:
    samples = {}
    gpu_s = 0.0
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name == "gpuyield_gpu_seconds_total":
                gpu_s += s.value
            samples[(s.name, s.labels.get("window", ""), s.labels.get("category", ""),
                     s.labels.get("subcategory", ""))] = s.value  # fmt: skip
    end = samples[("gpuyield_coverage_end_timestamp_seconds", "", "", "")]
    start = samples[("gpuyield_coverage_start_timestamp_seconds", "", "", "")]
    installed = samples[("gpuyield_installed_gpu_seconds_total", "", "", "")]
    if abs(gpu_s - installed) > 1e-9 * installed:
        seen.problems.append(f"categories {gpu_s} != installed {installed} at {end}")
    day_start = samples[("gpuyield_window_start_timestamp_seconds", "1d", "", "")]
    if day_start != max(start, end - 86400):
        seen.problems.append(f"1d window starts {day_start}, coverage ends {end}")
    numbers = tuple(v for k, v in sorted(samples.items()) if k[0] in _SNAPSHOT_METRICS)
    with seen.lock:
        if seen.by_end.setdefault(end, numbers) != numbers:
            seen.problems.append(f"two different sets of numbers for coverage end {end}")
    return end


_SNAPSHOT_METRICS = {
    "gpuyield_gpu_seconds_total", "gpuyield_installed_gpu_seconds_total", "gpuyield_yield_ratio",
    "gpuyield_idle_gpus", "gpuyield_pending_gpus", "gpuyield_account_gpu_seconds_total",
}  # fmt: skip


def _reader(base: str, seen: Seen, stop_at: threading.Event, index: int) -> None:
    host, port = base.split(":")
    connection = http.client.HTTPConnection(host, int(port), timeout=120)
    try:
        n = 0
        while not stop_at.is_set():
            path = "/api/report" if (n + index) % 5 == 0 else "/metrics"
            n += 1
            connection.request("GET", path)
            response = connection.getresponse()
            body = response.read()
            if response.status != 200:
                seen.problems.append(f"{path}: {response.status} {body[:200]!r}")
                continue
            if path == "/metrics":
                _check_metrics(body.decode(), seen)
            else:
                report = json.loads(body)
                with seen.lock:
                    first = seen.api_by_end.setdefault(
                        report["window"]["end"], report["categories"]
                    )
                    if first != report["categories"]:
                        seen.problems.append(f"/api/report changed for {report['window']['end']}")
            with seen.lock:
                seen.responses += 1
    except Exception as error:  # every failure is a finding, reported by the test
        seen.problems.append(f"reader {index}: {error!r}")
    finally:
        connection.close()


@pytest.mark.slow
def test_fifty_clients_read_while_collections_change_the_store(live: str) -> None:
    seen = Seen()
    stop_at = threading.Event()
    readers = [
        threading.Thread(target=_reader, args=(live, seen, stop_at, i)) for i in range(CLIENTS)
    ]
    started = time.monotonic()
    for reader in readers:
        reader.start()
    # At least 30 s, and at least three snapshots seen (two collections landed while reading).
    while time.monotonic() - started < CAP_S and not seen.problems:
        with seen.lock:
            ends = len(seen.by_end)
        if time.monotonic() - started >= READ_S and ends >= 3:
            break
        time.sleep(0.5)
    stop_at.set()
    for reader in readers:
        reader.join(timeout=180)
    assert seen.problems == []
    assert len(seen.by_end) >= 3, f"only {len(seen.by_end)} snapshots in {CAP_S:.0f} s"
    ends = sorted(seen.by_end)
    assert ends[-1] - ends[0] >= 2 * STEP_S
    assert len(set(seen.by_end.values())) == len(seen.by_end), "a collection changed nothing"
    final = text_string_to_metric_families(get(f"http://{live}/metrics").body.decode())
    counts = {
        s.name: s.value for f in final for s in f.samples if s.name.startswith("gpuyield_coll")
    }
    assert counts["gpuyield_collection_errors_total"] == 0
    assert counts["gpuyield_collections_total"] >= 2
    # The API served the snapshots too, and agrees with /metrics on every coverage end both saw.
    assert seen.api_by_end
    assert seen.responses >= CLIENTS
