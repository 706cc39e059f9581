"""Resource guard: the worst inputs of under 10 MB found for ingest and report, and their cost.

Run: ``python -m bench hostile [--quick]`` (figures also go to ``bench/out/hostile.json``).

Target (issues 20 and 26): no input of under 10 MB makes ``ingest`` or ``report`` use more than
2 GB or 60 s on the bundled sample's cluster (examples/slurm-lab: four nodes of 8 GPUs). Each case ingests the
sample's events, inventory and manifest, then one hostile file (``--lenient`` where it makes every
line count), then computes the report, in a fresh process: wall time and peak RSS (``wait4``) are
that process's. The baseline is the bundled sample itself in the same run; ``ratio`` is a case's
time over the baseline's. A case refused with a clear error is an outcome, not a failure: what is
measured is what it cost to get there. ``--quick`` makes every file 1 MB instead of 10.

Issue 26's ``--sacct-usage`` cases (``ingest utilization`` of Slurm's run averages and jobstats
summaries, after the same sample) bound node lists, GPU counts and summaries by the inventory.

Issue 26 adds sacct as other sites print it (Elapsed, another delimiter, odd node lists), a gzip
bomb, hostile manifests, and preflight's family match of a 41-character run name against a glob
with 12 ``*`` (target: under 100 ms of matching; ``ratio`` there is over a plain glob and name).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SAMPLE = REPO / "examples" / "slurm-lab"
LIMIT_BYTES = 2 << 30
LIMIT_S = 60.0
SACCT_HEADER = "JobID|JobIDRaw|State|Submit|Start|End|ElapsedRaw|AllocTRES|NodeList|NNodes|Comment"
EVENTS_HEADER = (
    "Cluster|Cluster Nodes|NodeName|Event|EventRaw|State|StateRaw|TimeStart|TimeEnd|Duration|"
    "Reason|User|TRES"
)


def _fill(line_of: Callable[[int], str], size: int, header: str | None) -> str:
    """Lines ``line_of(0), line_of(1)...`` up to ``size`` bytes, after ``header``."""
    lines = [header] if header else []
    total = sum(len(x) + 1 for x in lines)
    i = 0
    while total < size:
        line = line_of(i)
        lines.append(line)
        total += len(line) + 1
        i += 1
    return "\n".join(lines) + "\n"


def _job(i: int, *, nodes: str = "n[1-4]", nnodes: str = "4", gpus: str = "32") -> str:
    start = 1796035300 + (i % 1000)  # inside the sample's window (10:41-10:59)
    return (
        f"{i + 1000}|{i + 1000}|COMPLETED|{start}|{start}|{start + 60}|60|gres/gpu={gpus}|"
        f"{nodes}|{nnodes}|run=r{i % 50}"
    )


def _elapsed_job(i: int, *, nodes: str = "n[1-4]") -> str:
    """``_job`` with Elapsed (H:MM:SS) in place of ElapsedRaw (issue 26's older --format lists)."""
    return _job(i, nodes=nodes).replace("|60|", "|00:01:00|", 1)


def _gzip_bomb(inflated_bytes: int) -> bytes:
    """gzip of ``inflated_bytes`` newlines (about 1.4 MB for 1.4 GB)."""
    import zlib

    deflate = zlib.compressobj(9, zlib.DEFLATED, 31)
    chunk = b"\n" * (1 << 20)
    parts = [deflate.compress(chunk) for _ in range(inflated_bytes >> 20)]
    return b"".join(parts) + deflate.flush()


def _issue26_cases(size: int) -> dict[str, tuple[str, str | bytes, bool]]:
    """Issue 26's inputs at ``size`` bytes (the gzip bomb: its 1.4 MB whatever the size)."""
    elapsed_header = SACCT_HEADER.replace("ElapsedRaw", "Elapsed")
    stars = "a*" * 12 + "b"
    return {
        "sacct Elapsed instead of ElapsedRaw": (
            "sacct", _fill(_elapsed_job, size, elapsed_header), False,
        ),
        "sacct written with --delimiter=☃": (
            "sacct", _fill(_job, size, SACCT_HEADER).replace("|", "☃"), False,
        ),
        "sacct NodeList n[4-1] every line (lenient)": (
            "sacct", _fill(lambda i: _job(i, nodes="n[4-1]"), size, SACCT_HEADER), True,
        ),
        "sacct NodeList with blanks every line": (
            "sacct", _fill(lambda i: _job(i, nodes="n1, n2 ,n[3-4]"), size, SACCT_HEADER), False,
        ),
        "sacct gzip bomb, 1.4 MB to 1.4 GB": ("sacct.gz", _gzip_bomb(1400 << 20), False),
        "manifest 12-star glob families": (
            "manifest",
            _fill(lambda i: f'[[families]]\nname = "f{i}"\nruns = "{stars}{i}"', size, None),
            False,
        ),
        "manifest run_settings = nan/inf/1e300": (
            "manifest",
            _fill(lambda i: f"[run_settings.r{i}]\nrestart_s = {('nan', 'inf', '1e300')[i % 3]}",
                  size, None),
            False,
        ),
    }  # fmt: skip


USAGE_HEADER = "JobID|JobIDRaw|Start|End|NodeList|AllocTRES|TRESUsageInAve|AdminComment"


def _usage(i: int, *, nodes: str = "n[1-4]", gpus: str = "32", comment: str = "") -> str:
    """A ``--sacct-usage`` step line: a minute inside the sample's window, 50% busy."""
    from datetime import UTC, datetime

    start = 1796035300 + (i % 1000)
    start_text, end_text = (
        datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%S") for t in (start, start + 60)
    )
    usage = "" if comment else "gres/gpuutil=50"
    return f"{i}|{i}|{start_text}|{end_text}|{nodes}|gres/gpu={gpus}|{usage}|{comment}"


def _jobstats_summary(inflated_bytes: int) -> str:
    """A jobstats ``JS1:`` summary of 8 GPUs padded with blanks to ``inflated_bytes``, compressed
    a MiB at a time (the bench's own memory stays small: its children's peak would include it)."""
    import base64
    import zlib

    gpus = json.dumps({"nodes": {"n1": {"gpu_utilization": {str(g): 50 for g in range(8)}}}})
    deflate = zlib.compressobj(9, zlib.DEFLATED, 31)
    parts = [deflate.compress(gpus[:-1].encode())]
    blanks = b" " * (1 << 20)
    parts += [deflate.compress(blanks) for _ in range(inflated_bytes >> 20)]
    parts.append(deflate.compress(b"}") + deflate.flush())
    return "JS1:" + base64.b64encode(b"".join(parts)).decode()


def _usage_cases(size: int) -> dict[str, tuple[str, str | bytes, bool]]:
    """Issue 26's ``--sacct-usage`` inputs (``ingest utilization``) at ``size`` bytes."""
    bomb = _jobstats_summary(1 << 30)  # 1 GiB of blanks: about 1 MB of gzip
    summary = _jobstats_summary(0)
    return {
        "sacct-usage 32-GPU steps every line (the most samples a line)": (
            "usage", _fill(_usage, size, USAGE_HEADER), False,
        ),
        "sacct-usage gres/gpu=1e9 every line": (
            "usage", _fill(lambda i: _usage(i, gpus="1e9"), size, USAGE_HEADER), False,
        ),
        "sacct-usage NodeList=n[0-999999] every line": (
            "usage",
            _fill(lambda i: _usage(i, nodes="n[0-999999]", gpus="8000000"), size, USAGE_HEADER),
            False,
        ),
        "sacct-usage jobstats summaries every line": (
            "usage",
            _fill(lambda i: _usage(i, nodes="n1", gpus="8", comment=summary), size, USAGE_HEADER),
            False,
        ),
        "sacct-usage jobstats gzip bomb, 1 MB to 1 GiB": (
            "usage", USAGE_HEADER + "\n" + _usage(0, nodes="n1", gpus="8", comment=bomb) + "\n",
            False,
        ),
    }  # fmt: skip


def _cases(size: int) -> dict[str, tuple[str, str | bytes, bool]]:
    """Case -> (file kind, content, lenient)."""
    registration = "lab|n[0-999999]||Cluster|1||0|{t}|Unknown|00:00:01|Cluster Registered TRES||gres/gpu=8000000"
    return {
        "sacct valid jobs on all 4 nodes": ("sacct", _fill(_job, size, SACCT_HEADER), False),
        "sacct NodeList=n[0-99999999] every line (lenient)": (
            "sacct",
            _fill(lambda i: _job(i, nodes="n[0-99999999]", nnodes="100000000"), size, SACCT_HEADER),
            True,
        ),
        "sacct gres/gpu=100000 every line (lenient)": (
            "sacct", _fill(lambda i: _job(i, gpus="100000"), size, SACCT_HEADER), True,
        ),
        "sacct one record over 10 MB of lines": (
            "sacct", SACCT_HEADER + "\n" + _job(0) + "\n" * (size // 2) + "x\n", True,
        ),
        "sacct one field of 1.9 MB, repeated": (
            "sacct", _fill(lambda i: _job(i)[:-5] + "x" * 1_900_000, size, SACCT_HEADER), True,
        ),
        "events registrations of 1M names each": (
            "events",
            _fill(lambda i: registration.format(t=1796000000 + i), size, EVENTS_HEADER),
            False,
        ),
        "events NodeName=n[1-4] every line": (
            "events",
            _fill(
                lambda i: f"lab||n[1-4]|Node|2|DOWN|1|{1796035300 + i % 1000}|"
                f"{1796035301 + i % 1000}|00:00:01|fault|root(0)|",
                size,
                EVENTS_HEADER,
            ),
            False,
        ),
        "sinfo n[0-999999] (1M nodes, the cap)": ("nodes", "n[0-999999]|gpu:8\n", False),
        "sinfo ranges past the cap": (
            "nodes", _fill(lambda i: f"m{i}[0-99999]|gpu:8", size, None), True,
        ),
        "manifest nested 5M deep": ("manifest", "a = " + "[" * (size // 2) + "\n", False),
        "manifest 100k run_settings": (
            "manifest",
            _fill(lambda i: f"[run_settings.r{i}]\ncheckpoint_interval_s = 60", size, None),
            False,
        ),
        **_issue26_cases(size),
        **_usage_cases(size),
    }  # fmt: skip


_ONE = """
import json, sys, time
from pathlib import Path
from gpuyield.errors import GpuyieldError
from gpuyield.ingest.slurm import SlurmInputs, ingest_slurm
from gpuyield.report.summary import build_report
db, kind, path, lenient, sample = sys.argv[1:6]
outcome = "report"
started = time.perf_counter()
try:
    base = Path(sample)
    ingest_slurm(db, SlurmInputs(
        sacct=base / "sacct-X-D-wide.psv", events=base / "sacctmgr-event-format.psv",
        nodes=base / "scontrol-show-nodes-oneliner.txt", manifest=base / "manifest.toml"),
        until_s=1796032800 + 3600)
    if kind == "usage":
        from gpuyield.ingest.utilization import ingest_utilization
        ingest_utilization(db, sacct_usage=[Path(path)])
    elif kind != "baseline":
        ingest_slurm(db, SlurmInputs(**{kind.removesuffix(".gz"): Path(path)}),
                     lenient=lenient == "1", until_s=1796032800 + 3600)
    build_report(db)
except GpuyieldError as error:
    outcome = "refused: " + error.message[:160]
print(json.dumps({"outcome": outcome, "seconds": time.perf_counter() - started}))
"""


def _measure(kind: str, path: Path, lenient: bool, work: Path) -> dict[str, object]:
    db = work / f"{path.stem}.duckdb"
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    started = time.perf_counter()
    # Output to files, not pipes: a full pipe would stall the child before wait4 returns.
    with (work / "out.txt").open("wb") as out_file, (work / "err.txt").open("wb") as err_file:
        process = subprocess.Popen(
            [sys.executable, "-c", _ONE, str(db), kind, str(path), "1" if lenient else "0",
             str(SAMPLE)],
            stdout=out_file, stderr=err_file, env=env,
        )  # fmt: skip
        _, status, usage = os.wait4(process.pid, 0)
    wall = time.perf_counter() - started
    process.returncode = status
    out = (work / "out.txt").read_text(errors="replace").strip().splitlines()
    err = (work / "err.txt").read_text(errors="replace")
    peak = usage.ru_maxrss * 1024
    result = json.loads(out[-1]) if out else {"outcome": "crashed: " + err[-300:]}
    return {
        "outcome": result["outcome"],
        "exit_status": status,
        "wall_s": round(wall, 2),
        "peak_rss_mb": round(peak / 2**20, 1),
        "within_limits": peak <= LIMIT_BYTES and wall <= LIMIT_S,
    }


# preflight inside a Slurm prolog: which family a run belongs to, for a hostile pattern and name
# (issue 26: Python's re took 88 s here) against a plain glob and name, in the same process.
_PREFLIGHT = """
import json, sys, time
from pathlib import Path
from gpuyield import rungs, store
from gpuyield.ingest.slurm import SlurmInputs, ingest_slurm
db, sample, manifest = sys.argv[1:4]
base = Path(sample)
ingest_slurm(db, SlurmInputs(
    sacct=base / "sacct-X-D-wide.psv", events=base / "sacctmgr-event-format.psv",
    nodes=base / "scontrol-show-nodes-oneliner.txt", manifest=Path(manifest)),
    until_s=1796032800 + 3600)
con = store.connect(db, read_only=True)
def best_ms(run):
    times = []
    for _ in range(5):
        started = time.perf_counter()
        family = rungs.family_of_run(con, run)
        times.append((time.perf_counter() - started) * 1e3)
    return min(times), family
hostile_ms, hostile_family = best_ms("a" * 41)
plain_ms, plain_family = best_ms("llama3-70b-run2")
print(json.dumps({"hostile_ms": hostile_ms, "hostile_family": hostile_family,
                  "plain_ms": plain_ms, "plain_family": plain_family}))
"""
PREFLIGHT_TARGET_MS = 100.0


def _preflight(work: Path) -> dict[str, object]:
    """Time the family match of a 41-character run name against a glob with 12 ``*``."""
    manifest = work / "families.toml"
    manifest.write_text(
        '[[families]]\nname = "stars"\nruns = "' + "a*" * 12 + 'b"\n\n'
        '[[families]]\nname = "llama"\nruns = "llama3-*"\n'
    )
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    done = subprocess.run(
        [sys.executable, "-c", _PREFLIGHT, str(work / "preflight.duckdb"), str(SAMPLE),
         str(manifest)],
        env=env, capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    if done.returncode != 0:
        return {"outcome": "crashed: " + done.stderr[-300:], "within_limits": False}
    figures = json.loads(done.stdout.strip().splitlines()[-1])
    figures["ratio"] = round(figures["hostile_ms"] / max(figures["plain_ms"], 1e-3), 2)
    figures["within_limits"] = (
        figures["hostile_ms"] < PREFLIGHT_TARGET_MS
        and figures["hostile_family"] is None
        and figures["plain_family"] == "llama"
    )
    return figures


def run(*, quick: bool = False) -> dict[str, object]:
    size = (1 if quick else 10) * 1_000_000
    results: dict[str, object] = {}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        baseline = _measure("baseline", SAMPLE / "manifest.toml", False, work)
        results["baseline (bundled sample)"] = baseline
        print(f"  baseline: {baseline}")
        for number, (name, (kind, content, lenient)) in enumerate(_cases(size).items()):
            path = work / f"case{number}-{kind}.txt"
            if isinstance(content, bytes):  # a compressed input: its name says so
                path = work / f"case{number}.psv.gz"
                path.write_bytes(content)
            else:
                path.write_text(content, encoding="utf-8")
            figures = _measure(kind, path, lenient, work)
            base_s = float(baseline["wall_s"])  # type: ignore[arg-type]
            figures["input_mb"] = round(path.stat().st_size / 1e6, 2)
            figures["ratio"] = round(float(figures["wall_s"]) / base_s, 1)  # type: ignore[arg-type]
            results[name] = figures
            print(f"  {name}: {figures}")
            path.unlink()
        results["preflight: 12-star glob, 41-character name"] = _preflight(work)
        print(f"  preflight: {results['preflight: 12-star glob, 41-character name']}")
    worst = max(
        (
            v
            for k, v in results.items()
            if isinstance(v, dict) and "wall_s" in v and not k.startswith("baseline")
        ),
        key=lambda v: float(v["wall_s"]),
    )
    results["all_within_limits"] = all(
        isinstance(v, dict) and v["within_limits"] for v in results.values() if isinstance(v, dict)
    )
    results["slowest"] = worst
    return results


if __name__ == "__main__":
    from bench.runner import benchmark_main

    raise SystemExit(benchmark_main("hostile", run, sys.argv[1:]))
