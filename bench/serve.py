"""Serve benchmark: p99 latency of ``/metrics`` under 50 concurrent clients, and the server's memory.

For each size (100k jobs with ``--quick``; 10M otherwise) it generates (or reuses) the ledger
benchmark's data set, ingests it, starts ``gpuyield serve`` on it and measures

* the first snapshot: seconds from start until ``/healthz`` answers 200 (every ledger the served
  numbers need, plus the HTML page), and the serving process's peak RSS while building it;
* ``/metrics`` under load: 50 keep-alive clients (asyncio, one process) for ``LOAD_S`` seconds:
  requests per second, p50/p99/max latency, errors; the server's RSS after;
* two baselines, in the same run, under the same load: the same bytes from the standard library's
  ``ThreadingHTTPServer`` (HTTP/1.1 keep-alive, nothing else: the floor of serving them in
  Python), and the same metric families from the official ``prometheus_client.start_http_server``
  (which renders the text on every request, as most Python exporters do). The ratios are
  gpuyield's p99 over each baseline's.

Run: ``python -m bench serve [--quick]`` or ``python -m bench.serve --jobs 1000000``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

from bench.gen_slurm import GenParams, cached
from bench.ledger import OUT, _fresh, _memory_mb, ledger_argv, machine, measure
from bench.runner import start_recording, write_figures

QUICK_SIZES = (100_000,)
FULL_SIZES = (10_000_000,)
CLIENTS = 50
LOAD_S = 20.0
START_TIMEOUT_S = 3600.0
_STATIC = """
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
body = open(sys.argv[1], "rb").read()
class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def do_GET(self):
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *args):
        pass
server = ThreadingHTTPServer(("127.0.0.1", int(sys.argv[2])), Handler)
print("ready", flush=True)
server.serve_forever()
"""
_EXPORTER = """
import sys, time
from prometheus_client import start_http_server
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.registry import CollectorRegistry
text = open(sys.argv[1]).read()
class Same:
    def collect(self):
        return text_string_to_metric_families(text)
registry = CollectorRegistry(auto_describe=False)
registry.register(Same())
start_http_server(int(sys.argv[2]), addr="127.0.0.1", registry=registry)
print("ready", flush=True)
time.sleep(1e9)
"""


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


async def _client(port: int, until: float, latencies: list[float], errors: list[str]) -> None:
    """Keep-alive GETs of /metrics; a server that closes after each response (HTTP/1.0, as the
    baseline's stdlib server does) is reconnected, and the reconnect counts in its latency."""
    request = f"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n".encode()
    connection: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None
    try:
        while time.perf_counter() < until:
            began = time.perf_counter()
            if connection is None:
                connection = await asyncio.open_connection("127.0.0.1", port)
            reader, writer = connection
            writer.write(request)
            head = await reader.readuntil(b"\r\n\r\n")
            lines = head.decode().split("\r\n")
            headers = {
                k.lower(): v for k, v in (ln.split(": ", 1) for ln in lines[1:] if ": " in ln)
            }
            keep = lines[0].startswith("HTTP/1.1") and headers.get("connection") != "close"
            if "content-length" in headers:
                await reader.readexactly(int(headers["content-length"]))
            else:
                await reader.read()
                keep = False
            latencies.append(time.perf_counter() - began)
            if " 200 " not in lines[0]:
                errors.append(lines[0])
            if not keep:
                writer.close()
                connection = None
    except (OSError, asyncio.IncompleteReadError) as error:
        errors.append(repr(error))
    finally:
        if connection is not None:
            connection[1].close()


async def _load(port: int, seconds: float) -> dict[str, Any]:
    latencies: list[float] = []
    errors: list[str] = []
    until = time.perf_counter() + seconds
    began = time.perf_counter()
    await asyncio.gather(*(_client(port, until, latencies, errors) for _ in range(CLIENTS)))
    elapsed = time.perf_counter() - began
    ordered = sorted(latencies)

    def pct(q: float) -> float:
        return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000, 2)

    return {
        "requests": len(ordered),
        "requests_per_s": round(len(ordered) / elapsed, 1),
        "p50_ms": pct(0.50),
        "p99_ms": pct(0.99),
        "max_ms": round(ordered[-1] * 1000, 2) if ordered else None,
        "errors": len(errors),
        "first_errors": errors[:3],
    }


def _wait_ready(url: str, proc: subprocess.Popen[bytes]) -> tuple[float, float]:
    """Seconds until ``url`` answers 200, and the process's peak RSS (MB) meanwhile."""
    began, peak = time.perf_counter(), 0.0
    while time.perf_counter() - began < START_TIMEOUT_S:
        peak = max(peak, _memory_mb(proc.pid)[1])
        if proc.poll() is not None:
            raise RuntimeError(f"gpuyield serve exited with {proc.returncode}")
        try:
            with urllib.request.urlopen(url, timeout=5) as reply:
                if reply.status == 200:
                    return time.perf_counter() - began, peak
        except OSError:
            pass
        time.sleep(0.2)
    raise RuntimeError(f"{url} not ready after {START_TIMEOUT_S:.0f} s")


def bench_size(num_jobs: int, out_dir: Path = OUT) -> dict[str, Any]:
    params = GenParams(num_jobs=num_jobs)
    data = cached(params, out_dir / "data")
    db = out_dir / f"serve-{num_jobs}.duckdb"
    commands = ledger_argv(data, params, db)
    assert commands is not None
    _fresh(db)
    ingest = measure(commands[0])
    figures: dict[str, Any] = {"jobs": num_jobs, "ingest": ingest.figures()}
    if ingest.returncode:
        return figures
    port = _free_port()
    serve = subprocess.Popen(
        [sys.executable, "-m", "gpuyield", "serve", "--db", str(db), "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        first_s, build_peak = _wait_ready(f"http://127.0.0.1:{port}/healthz", serve)
        figures["first_snapshot_s"] = round(first_s, 1)
        figures["serve_peak_rss_mb_building"] = round(build_peak, 1)
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics") as reply:
            exposition = reply.read()
        figures["metrics_bytes"] = len(exposition)
        figures["serve_rss_mb_idle"] = round(_memory_mb(serve.pid)[0], 1)
        figures["gpuyield"] = asyncio.run(_load(port, LOAD_S))
        figures["serve_rss_mb_after_load"] = round(_memory_mb(serve.pid)[0], 1)
        figures["serve_peak_rss_mb"] = round(_memory_mb(serve.pid)[1], 1)
    finally:
        serve.terminate()
        serve.wait(timeout=60)
    for name, script in (("baseline_static", _STATIC), ("baseline_exporter", _EXPORTER)):
        figures[name] = _baseline(script, exposition, out_dir)
        base = figures[name]["p99_ms"]
        ratio = figures["gpuyield"]["p99_ms"] / base if base else None
        figures[f"p99_ratio_to_{name.removeprefix('baseline_')}"] = ratio and round(ratio, 4)
    return figures


def _baseline(script: str, exposition: bytes, out_dir: Path) -> dict[str, Any]:
    text_path = out_dir / "serve-baseline.prom"
    text_path.write_bytes(exposition)
    port = _free_port()
    proc = subprocess.Popen(
        [sys.executable, "-c", script, str(text_path), str(port)], stdout=subprocess.PIPE
    )
    try:
        assert proc.stdout is not None
        proc.stdout.readline()
        result = asyncio.run(_load(port, LOAD_S))
        result["rss_mb"] = round(_memory_mb(proc.pid)[0], 1)
        return result
    finally:
        proc.terminate()
        proc.wait(timeout=60)
        if proc.stdout is not None:
            proc.stdout.close()


def run(*, quick: bool = False, sizes: tuple[int, ...] | None = None) -> dict[str, Any]:
    chosen = sizes or (QUICK_SIZES if quick else FULL_SIZES)
    OUT.mkdir(exist_ok=True)
    results = []
    for num_jobs in chosen:
        load = os.getloadavg()[0]
        figures = bench_size(num_jobs)
        figures["load_average_1m"] = round(load, 2)
        print(json.dumps(figures, indent=2))
        results.append(figures)
    return {"machine": machine(), "clients": CLIENTS, "load_s": LOAD_S, "sizes": results}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--jobs", type=int, action="append", help="size (repeatable)")
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args(argv)
    started = start_recording(
        " ".join(["python -m bench.serve", *(sys.argv[1:] if argv is None else argv)])
    )
    figures = run(quick=args.quick, sizes=tuple(args.jobs) if args.jobs else None)
    write_figures("serve", figures, started)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
