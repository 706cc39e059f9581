"""Hypothesis: mixed valid and invalid sacct, events, inventory and manifest files never give a
traceback, never a report that does not conserve, and never a failed ingest that changed the store.

Each example ingests the good cluster (inputs.py), then a mutated set of files into the same store.
The mutations are the shapes of issue 20 (hostile numbers, times, hostlists, duplicates, control
characters, truncation, stray bytes) applied to random fields of random lines. No deadline: CI
machines are shared. GPUYIELD_HOSTILE_EXAMPLES sets the number of examples (default 80, about a
minute; the first run of a branch that changes ingest is worth one with 1000).
"""

from __future__ import annotations

import functools
import os
import tempfile
from datetime import UTC, datetime
from pathlib import Path

import duckdb
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpuyield import store
from gpuyield.errors import ConservationError, GpuyieldError
from gpuyield.ingest.slurm import SlurmInputs, ingest_slurm
from gpuyield.ledger.ledger import backend_for, compute_ledger
from tests.hostile.inputs import MANIFEST, TABLES, UNTIL, base_files, write_files

UNTIL_S = int(datetime.fromisoformat(UNTIL).replace(tzinfo=UTC).timestamp())
EXAMPLES = int(os.environ.get("GPUYIELD_HOSTILE_EXAMPLES", "60"))

HOSTILE_VALUES = (
    "", "Unknown", "None", "0", "-8", "1.4", "0.4", "2.5", "0x10", "100000", "9" * 40,
    "1970-01-01T00:00:00", "2999-01-01T00:00:00", "2026-11-30T10:59:59", "2026-13-45T99:99:99",
    "n[0-99999999]", "n[0-9999999999]", "n[3-4]", "n[1-", "n1,n2", "n[4-1]",
    "gres/gpu=-8", "gres/gpu=1.4", "gres/gpu=0x10", "gres/gpu=100000", "gpu:-8", "gpu:8",
    "run=abc\x1b[31mRED\x1b]0;pwned\x07", "COMPLETED", "RUNNING", "CANCELLED by 0", "MAINT",
    "a|b", "\u202e", "é",
)  # fmt: skip
MANIFEST_VARIANTS = (
    MANIFEST,
    MANIFEST.replace('runs = ["a"]', 'runs = ["b"]'),
    MANIFEST + '\n[[diverged]]\nrun = "b"\nafter = "2026-11-30T10:10:00"\n',
    MANIFEST + '\n[[diverged]]\nrun = "a"\n',
    MANIFEST + "\n[run_settings.a]\ncheckpoint_interval_s = nan\n",
    MANIFEST + "\n[run_settings.a]\ncheckpoint_interval_s = 60\n",
    MANIFEST.replace("[^,\\\\s]+", "[^,]+)(?=,|$"),
    MANIFEST.replace("[runs]", "[runs]\nextra = 1"),
    '[runs]\nmatch = "name:(?P<run>.*)"\n',
    "a = " + "[" * 3000 + "]" * 3000 + "\n",
    "[[releases]]\nmodel = 1\n",
)  # fmt: skip


@st.composite
def mutated_text(draw: st.DrawFn, text: str, separator: str) -> str:
    """``text`` with one to three mutations of its fields or lines."""
    lines = text.splitlines()
    for _ in range(draw(st.integers(1, 3))):
        how = draw(st.sampled_from(["field", "field", "field", "duplicate", "drop", "truncate"]))
        at = draw(st.integers(0, len(lines) - 1))
        if how == "field":
            parts = lines[at].split(separator)
            index = draw(st.integers(0, len(parts) - 1))
            value = draw(st.one_of(st.sampled_from(HOSTILE_VALUES), st.text(max_size=8)))
            if separator == " ":  # scontrol: keep the key, change the value
                key = parts[index].partition("=")[0]
                value = f"{key}={value}"
            parts[index] = value
            lines[at] = separator.join(parts)
        elif how == "duplicate":
            lines.insert(at, lines[at])
        elif how == "drop" and len(lines) > 1:
            del lines[at]
        elif how == "truncate":
            lines[at] = lines[at][: draw(st.integers(0, len(lines[at])))]
    return "\n".join(lines) + "\n"


@st.composite
def file_sets(draw: st.DrawFn) -> dict[str, str]:
    """A set of files to ingest: each kind absent, good, or mutated; at least one present."""
    base = base_files()
    chosen: dict[str, str] = {}
    for kind, text in base.items():
        mode = draw(st.sampled_from(["absent", "good", "mutated", "mutated"]))
        if mode == "good":
            chosen[kind] = text
        elif mode == "mutated" and kind == "manifest":
            chosen[kind] = draw(st.sampled_from(MANIFEST_VARIANTS))
        elif mode == "mutated":
            chosen[kind] = draw(mutated_text(text, " " if kind == "nodes" else "|"))
    if not chosen:
        chosen["sacct"] = draw(mutated_text(base["sacct"], "|"))
    return chosen


def _snapshot(con: duckdb.DuckDBPyConnection) -> dict[str, list[tuple[object, ...]]]:
    return {t: con.execute(f"SELECT * FROM {t} ORDER BY ALL").fetchall() for t in TABLES}


def _inputs(paths: dict[str, Path]) -> SlurmInputs:
    return SlurmInputs(
        sacct=paths.get("sacct"),
        events=paths.get("events"),
        nodes=paths.get("nodes"),
        manifest=paths.get("manifest"),
    )


def _check_report(con: duckdb.DuckDBPyConnection) -> None:
    """The report conserves, or says clearly why it cannot be made (never ConservationError)."""
    try:
        ledger = compute_ledger(backend_for(con))
    except ConservationError:
        raise
    except GpuyieldError:
        return  # e.g. a job on a node the inventory lacks: a clear error, not a wrong number
    total = sum(ledger.categories.values())
    assert abs(total - ledger.installed_gpu_seconds) <= 1e-6 * max(1.0, total)


@functools.cache
def _base_store() -> bytes:
    """The good cluster's store, ingested once per session (each example starts from a copy)."""
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "base.duckdb"
        base = write_files(Path(tmp), dict(base_files()), "base")
        ingest_slurm(db, _inputs(base), until_s=UNTIL_S)
        return db.read_bytes()


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(files=file_sets())
def test_mixed_inputs_never_traceback_always_conserve(files: dict[str, str]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp)
        db = directory / "store.duckdb"
        db.write_bytes(_base_store())
        con = store.connect(db)
        try:
            before = _snapshot(con)
            paths = write_files(directory, dict(files), "hostile")
            try:
                ingest_slurm(None, _inputs(paths), until_s=UNTIL_S, con=con)
            except GpuyieldError as error:
                assert error.message
                assert _snapshot(con) == before, "a failed ingest changed the store"
                return
            _check_report(con)
        finally:
            con.close()
