"""The inputs the lake tests report on, each ingested into a store and written into a lake.

The bundled capture (examples/slurm-lab, one real Slurm hour), the simulator's output with
utilization samples, and two clusters: the simulator's cluster and a second one (another seed,
its cluster renamed in the files, as another site's capture would name itself).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from typer.testing import CliRunner

from gpuyield.cli import app
from gpuyield.report.document import report_json_text
from gpuyield.report.source import ReportSource
from gpuyield.report.summary import build_report_with_breakdown
from tests.conftest import REPO, SAMPLE

SIM_DAYS = "0.25"


def cli(*args: str | Path) -> str:
    """``gpuyield ARGS`` in-process; fails with the output if it exits non-zero."""
    result = CliRunner().invoke(app, [str(a) for a in args])
    assert result.exit_code == 0, result.output
    return result.output


@dataclass(frozen=True, kw_only=True, slots=True)
class Ingested:
    """One input set in a store and in a lake (the same ingests, ``--lake`` given)."""

    db: Path
    lake: Path


def sample_args(db: Path) -> list[str | Path]:
    """``ingest slurm`` of the bundled capture over its hour."""
    return [
        "ingest",
        "slurm",
        "--db",
        db,
        "--sacct",
        SAMPLE / "sacct-X-D-wide.psv",
        "--events",
        SAMPLE / "sacctmgr-event-format.psv",
        "--nodes",
        SAMPLE / "scontrol-show-nodes-oneliner.txt",
        "--manifest",
        SAMPLE / "manifest.toml",
        "--since",
        "2026-11-30T10:00:00",
        "--until",
        "2026-11-30T11:00:00",
        "-q",
    ]


def ingest_sample(where: Path) -> Ingested:
    """The bundled capture, into a store and (``ingest --lake``) a lake."""
    db, lake = where / "sample.duckdb", where / "sample-lake"
    cli(*sample_args(db), "--lake", lake)
    return Ingested(db=db, lake=lake)


def ingest_ladder(where: Path) -> Ingested:
    """The ladder capture (its manifest declares a ladder), into a store and a lake."""
    capture = REPO / "examples" / "ladder" / "lab-capture"
    until = (capture / "until.txt").read_text(encoding="utf-8").strip()
    db, lake = where / "ladder.duckdb", where / "ladder-lake"
    cli(
        "ingest",
        "slurm",
        "--db",
        db,
        "--sacct",
        capture / "sacct.psv",
        "--events",
        capture / "events.psv",
        "--nodes",
        capture / "nodes.txt",
        "--manifest",
        capture / "manifest.toml",
        "--until",
        until,
        "--lake",
        lake,
        "-q",
    )
    return Ingested(db=db, lake=lake)


def simulate(out: Path, *, seed: int, cluster: str | None = None) -> Path:
    """The ledger-check scenario with utilization; ``cluster`` renames its cluster, and its
    nodes (``n01`` becomes ``e01``), in every file: another site's nodes have other names (the
    store keys a sample by node, GPU and time, so two clusters' samples of one node name would
    replace each other)."""
    cli(
        "simulate",
        "run",
        "ledger-check",
        "--out",
        out,
        "--days",
        SIM_DAYS,
        "--seed",
        str(seed),
        "--utilization",
    )
    if cluster is not None:
        for path in out.iterdir():
            if path.suffix in (".psv", ".txt", ".json"):
                text = re.sub(r"\bn(\[|\d)", r"e\1", path.read_text())
                text = re.sub(r"(^|\|)check(\||$)", rf"\1{cluster}\2", text, flags=re.MULTILINE)
                path.write_text(text)
    return out


def ingest_simulated(out: Path, db: Path, lake: Path, *, cluster: str | None = None) -> None:
    """A simulated cluster's files and samples into ``db``, each ingest synced into ``lake``."""
    named = [] if cluster is None else ["--cluster", cluster]
    cli("ingest", "slurm", "--dir", out, "--db", db, "--lake", lake, "-q", *named)
    cli(
        "ingest",
        "utilization",
        "--prom-json",
        out / "utilization.json",
        "--db",
        db,
        "--lake",
        lake,
        *named,
    )


def report_text(source: ReportSource, by: str | None = None) -> str:
    """``gpuyield report --json [--by BY]``'s output for ``source``, as the CLI prints it."""
    result = build_report_with_breakdown(source, by=by)
    return report_json_text(result.report, result.breakdown)


def without_ingest_ids(text: str) -> dict[str, object]:
    """A report's JSON without the ingest ids of its sources (two stores number theirs apart)."""
    data = json.loads(text)
    for source in data["sources"]:
        source.pop("ingest_id")
    return dict(data)
