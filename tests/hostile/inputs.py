"""A small cluster as the four files an ingest reads, and the CLI run over them.

The cluster has the bundled sample's shape (four nodes n1-n4 of 8 GPUs, registered in the node events,
one hour captured) in single-line records, so a hostile case changes one line and knows its number.
"""

from __future__ import annotations

import json
import traceback
from dataclasses import dataclass, field
from pathlib import Path

import duckdb
from typer.testing import CliRunner

from gpuyield.cli import app

SACCT_HEADER = (
    "JobID|JobIDRaw|JobName|User|Account|Partition|State|Submit|Start|End|ElapsedRaw|"
    "AllocTRES|NodeList|NNodes|Comment"
)
# Job 1: 8 GPUs for 600 s of run a (released): 4,800 GPU-s. Job 2: 8 GPUs for 600 s, failed.
SACCT_ROWS = (
    "1|1|train|alice|ml|gpu|COMPLETED|2026-11-30T10:00:00|2026-11-30T10:00:00|"
    "2026-11-30T10:10:00|600|billing=8,cpu=8,gres/gpu=8,node=1|n1|1|run=a",
    "2|2|probe|bob|ml|gpu|FAILED|2026-11-30T10:05:00|2026-11-30T10:05:00|"
    "2026-11-30T10:15:00|600|billing=8,cpu=8,gres/gpu=8,node=1|n2|1|run=b",
)
EVENTS_HEADER = (
    "Cluster|Cluster Nodes|NodeName|Event|EventRaw|State|StateRaw|TimeStart|TimeEnd|Duration|"
    "Reason|User|TRES"
)
EVENTS_ROWS = (
    "lab|n[1-4]||Cluster|1||0|2026-11-30T10:00:00|Unknown|01:00:00|Cluster Registered TRES||"
    "cpu=32,gres/gpu=32,node=4",
)
NODES_LINES = tuple(
    f"NodeName=n{i} Arch=x86_64 Gres=gpu:8 State=IDLE Partitions=gpu "
    "CfgTRES=cpu=8,mem=4000M,billing=8,gres/gpu=8"
    for i in range(1, 5)
)
MANIFEST = (
    '[runs]\nmatch = "comment:run=(?P<run>[^,\\\\s]+)"\n\n[[releases]]\nmodel = "m"\nruns = ["a"]\n'
)
UNTIL = "2026-11-30T11:00:00"
# Installed: 4 nodes x 8 GPUs x 3,600 s.
INSTALLED_GPU_S = 115_200

# The tables an ingest writes: all of them must be as they were after a failed ingest.
TABLES = (
    "ingests", "rejects", "jobs", "job_nodes", "node_events", "cluster_events", "nodes",
    "manifests", "telemetry", "job_gpus", "gpu_series", "sample_groups", "sample_jobs",
    "sample_nodes", "sample_job_gpus",
)  # fmt: skip


def sacct_text(*rows: str) -> str:
    return "\n".join((SACCT_HEADER, *rows)) + "\n"


def events_text(*rows: str) -> str:
    return "\n".join((EVENTS_HEADER, *rows)) + "\n"


def nodes_text(*lines: str) -> str:
    return "\n".join(lines) + "\n"


def base_files() -> dict[str, str]:
    """The good inputs, by the ingest flag each goes to."""
    return {
        "sacct": sacct_text(*SACCT_ROWS),
        "events": events_text(*EVENTS_ROWS),
        "nodes": nodes_text(*NODES_LINES),
        "manifest": MANIFEST,
    }


_SUFFIX = {"sacct": ".psv", "events": ".psv", "nodes": ".txt", "manifest": ".toml"}
_runner = CliRunner()


@dataclass(frozen=True, kw_only=True, slots=True)
class CliOutcome:
    """What one command did."""

    exit_code: int
    """The process's exit status."""
    output: str
    """stdout and stderr together."""
    traceback: str | None = None
    """The traceback of an exception that escaped (a bug), else None."""
    stdout: str = field(default="")
    """stdout alone (JSON output)."""


def run_cli(args: list[str]) -> CliOutcome:
    result = _runner.invoke(app, args)
    escaped = None
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        escaped = "".join(traceback.format_exception(result.exception))
    return CliOutcome(
        exit_code=result.exit_code,
        output=result.output,
        traceback=escaped,
        stdout=result.stdout,
    )


def write_files(directory: Path, files: dict[str, str | bytes], tag: str) -> dict[str, Path]:
    paths = {}
    for kind, content in files.items():
        path = directory / f"{tag}-{kind}{_SUFFIX.get(kind, '')}"
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8")
        paths[kind] = path
    return paths


def ingest(db: Path, paths: dict[str, Path], *extra: str) -> CliOutcome:
    args = ["ingest", "slurm", "--db", str(db), "--until", UNTIL, *extra]
    for kind, path in paths.items():
        args += [f"--{kind}", str(path)]
    return run_cli(args)


def report_json(db: Path) -> dict[str, object]:
    outcome = run_cli(["report", "--db", str(db), "--json"])
    assert outcome.traceback is None, outcome.traceback
    assert outcome.exit_code == 0, outcome.output
    data = json.loads(outcome.stdout)
    assert isinstance(data, dict)
    return data


def snapshot(db: Path) -> dict[str, list[tuple[object, ...]]]:
    """Every row of every table an ingest writes (the stores here are small)."""
    con = duckdb.connect(str(db), read_only=True)
    try:
        return {t: con.execute(f"SELECT * FROM {t} ORDER BY ALL").fetchall() for t in TABLES}
    finally:
        con.close()


def conserves(data: dict[str, object]) -> bool:
    """The categories add up to installed GPU-seconds."""
    categories = data["categories"]
    assert isinstance(categories, dict)
    installed = data["installed_gpu_seconds"]
    assert isinstance(installed, int | float)
    return abs(sum(categories.values()) - installed) <= 1e-6 * max(1.0, installed)
