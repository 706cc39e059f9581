"""Hypothesis over manifests (issue 26): generated manifests with hostile numbers, patterns, names
and shapes are refused with a clear error and the store unchanged, or ingested; and a store that
took one answers the report, the ladder and preflight without a traceback.

Each example ingests one generated manifest into a copy of the good cluster's store (inputs.py).
The values are the shapes the probes found: nan, inf, 1e300, negative and huge counts, globs with
reversed ranges or POSIX classes, regexes with lookarounds and backreferences, markup and escapes
in names, and wrong types.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import tomli_w
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpuyield import rungs, store
from gpuyield.errors import GpuyieldError
from gpuyield.ingest.slurm import SlurmInputs, ingest_slurm
from gpuyield.report.ladder import build_ladder
from tests.hostile.test_properties import UNTIL_S, _base_store, _check_report, _snapshot

NUMBERS = st.sampled_from(
    [float("nan"), float("inf"), float("-inf"), 1e300, -1e300, 1e20, -1, 0, 0.5, 1, 30, 3600,
     2**62, True, "30"]
)  # fmt: skip
NAMES = st.sampled_from(["a", "b", "x", "[/x]", "a\x1b[31m", "é", "a b", "", "a,b"])
GLOBS = st.one_of(
    st.sampled_from(["a*", "*", "a*" * 12 + "b", "[z-a]", "[[:alpha:]]", "[!a]*", "a[", "]",
                     "re:a(?=b)", "re:(a)\\1", "re:(?P<r>a)(?P=r)", "re:(", "re:a|b", "re:.*",
                     "re:" + "(a|aa)*" * 5 + "c"]),
    st.text(st.sampled_from(list("ab*?[]!-^\\")), min_size=1, max_size=10),
)  # fmt: skip
MATCHES = st.sampled_from(
    ["comment:run=(?P<run>[^,\\s]+)", "name:(?P<run>.*)", "comment:run=(?P<run>[^,]+)(?=,|$)",
     "comment:(?P<run>a)\\1", "comment:no-group", "other:(?P<run>x)", "comment:(?P<run>(a|aa)*b)"]
)  # fmt: skip


@st.composite
def manifests(draw: st.DrawFn) -> dict[str, Any]:
    """A manifest as a TOML table, every section present or not."""
    data: dict[str, Any] = {}
    if draw(st.booleans()):
        data["runs"] = {"match": draw(MATCHES)}
        if draw(st.booleans()):
            data["runs"]["checkpoint_interval_s"] = draw(NUMBERS)
    if draw(st.booleans()):
        data["releases"] = [{"model": "m", "runs": draw(st.lists(NAMES, min_size=1, max_size=2))}]
    if draw(st.booleans()):
        keys = ("checkpoint_interval_s", "checkpoint_save_s", "restart_s", "failure_detection_s")
        data["run_settings"] = {
            draw(NAMES): {draw(st.sampled_from(keys)): draw(NUMBERS)}
            for _ in range(draw(st.integers(1, 2)))
        }
    if draw(st.booleans()):
        data["families"] = [
            {"name": draw(st.sampled_from(["f", "g", "f x", "[/x]"])),
             "runs": draw(st.one_of(GLOBS, st.lists(GLOBS, min_size=1, max_size=3)))}
            for _ in range(draw(st.integers(1, 2)))
        ]  # fmt: skip
    if draw(st.booleans()):
        data["ladder"] = {
            "rungs": draw(st.lists(st.sampled_from([1, 8, 64, 0, -8, 2**40, 8.5]), max_size=4)),
            "within_days": draw(NUMBERS),
        }
    return data


def _document(data: dict[str, Any]) -> str:
    """TOML text; nan and inf are written by the TOML library as TOML spells them."""
    return tomli_w.dumps(data)


@settings(max_examples=60, suppress_health_check=[HealthCheck.too_slow])
@given(data=manifests())
def test_manifests_are_refused_cleanly_or_work_everywhere(data: dict[str, Any]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "store.duckdb"
        db.write_bytes(_base_store())
        manifest = Path(tmp) / "manifest.toml"
        manifest.write_text(_document(data), encoding="utf-8")
        con = store.connect(db)
        try:
            before = _snapshot(con)
            try:
                ingest_slurm(None, SlurmInputs(manifest=manifest), until_s=UNTIL_S, con=con)
            except GpuyieldError as error:
                assert error.message and "Traceback" not in error.message
                assert _snapshot(con) == before, "a refused manifest changed the store"
                return
            _check_report(con)
            if data.get("families") or data.get("ladder"):
                run = "a" * 41
                family = rungs.family_of_run(con, run)
                rungs.preflight(con, family=family or "f", gpus=64, at_s=UNTIL_S)
        finally:
            con.close()
        if data.get("families") or data.get("ladder"):
            try:
                build_ladder(db)
            except GpuyieldError as error:
                assert error.message
