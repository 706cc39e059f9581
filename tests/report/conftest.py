"""Fixtures: the bundled real Slurm sample, ingested once; its HTML report, written once."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from gpuyield.cli import app

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "slurm-lab"
# The sample's capture ends here (the Makefile's demo uses the same --until).
UNTIL = "2026-11-30T11:00:00"
# A window with jobs in it: 10:40:47 registers the cluster, the first job starts at 10:41:05.
IDLE_ONLY = ("2026-11-30T10:40:47", "2026-11-30T10:40:57")
EMPTY = ("2026-11-30T10:50:00", "2026-11-30T10:50:00")
REGISTERED = "2026-11-30T10:40:47"  # the sample's "Cluster Registered TRES" event


def run_cli(*args: str) -> str:
    """Run ``gpuyield ARGS`` in-process; fail the test with its output if it exits non-zero."""
    result = CliRunner().invoke(app, list(args))
    assert result.exit_code == 0, result.output
    return result.output


def report_json(db: Path, *window: str) -> dict[str, Any]:
    """``gpuyield report --json`` for the same DB and window."""
    since_until = ["--since", window[0], "--until", window[1]] if window else []
    return dict(json.loads(run_cli("report", "--db", str(db), "--json", *since_until)))


@dataclass(frozen=True, kw_only=True, slots=True)
class Written:
    """One HTML report written by the CLI, with the JSON of the same window."""

    html: Path
    """The page."""
    png_dir: Path | None
    """Where its PNGs went, if asked."""
    json: dict[str, Any]
    """``gpuyield report --json`` for the same DB and window."""


@pytest.fixture(scope="session")
def sample_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The bundled sample, ingested exactly as ``make demo`` does."""
    db = tmp_path_factory.mktemp("sample") / "sample.duckdb"
    run_cli(
        "ingest", "slurm", "--db", str(db),
        "--sacct", str(EXAMPLES / "sacct-X-D-wide.psv"),
        "--events", str(EXAMPLES / "sacctmgr-event-format.psv"),
        "--nodes", str(EXAMPLES / "scontrol-show-nodes-oneliner.txt"),
        "--manifest", str(EXAMPLES / "manifest.toml"),
        # Covered from the cluster's registration (sacct's -S was 10:00, before it).
        "--since", REGISTERED, "--until", UNTIL,
    )  # fmt: skip
    return db


def _write(db: Path, out: Path, window: tuple[str, ...], png: bool) -> Written:
    html = out / "report.html"
    png_dir = out / "png" if png else None
    since_until = ["--since", window[0], "--until", window[1]] if window else []
    png_args = ["--png", str(png_dir)] if png_dir else []
    run_cli("report", "--db", str(db), "--html", str(html), *png_args, *since_until)
    return Written(html=html, png_dir=png_dir, json=report_json(db, *window))


@pytest.fixture(scope="session")
def sample_report(sample_db: Path, tmp_path_factory: pytest.TempPathFactory) -> Written:
    """The report of the whole sample, with slide PNGs."""
    return _write(sample_db, tmp_path_factory.mktemp("full"), (), png=True)


@pytest.fixture(scope="session")
def empty_report(sample_db: Path, tmp_path_factory: pytest.TempPathFactory) -> Written:
    """An empty window (--since = --until)."""
    return _write(sample_db, tmp_path_factory.mktemp("empty"), EMPTY, png=False)


@pytest.fixture(scope="session")
def idle_report(sample_db: Path, tmp_path_factory: pytest.TempPathFactory) -> Written:
    """A window with one category only: the ten seconds before the first job, all idle."""
    return _write(sample_db, tmp_path_factory.mktemp("idle"), IDLE_ONLY, png=False)
