"""Hypothesis: any utilization input the ingest accepts keeps every category and subcategory at
or above zero and the ledger conserved; one it refuses leaves the store unchanged; and the order
of the ingests does not change the numbers (samples before their jobs are attributed when the
jobs arrive).

Each example draws a ``query_range`` answer over the good cluster's hour (inputs.py: nodes n1-n4
of 8 GPUs, jobs 1 and 2 on n1 and n2) with the shapes that broke the ledger (issue 24): steps of
15 s to 2 min with the default or a declared ``--step``, repeated and unordered times, gaps,
labels of the cluster's jobs, of no job and of unknown ones, GPU indices beyond the node,
nodes the inventory lacks, percentages above 100 and values that are not numbers; and at times a
Slurm usage file (run averages). No deadline: CI machines are shared. GPUYIELD_HOSTILE_EXAMPLES
sets the number of examples, as for the Slurm inputs' properties.
"""

from __future__ import annotations

import functools
import json
import os
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpuyield import store
from gpuyield.errors import GpuyieldError
from gpuyield.ingest.slurm import SlurmInputs, ingest_slurm
from gpuyield.ingest.utilization import ingest_utilization
from gpuyield.ledger.ledger import Ledger, backend_for, compute_ledger
from tests.hostile.inputs import TABLES, UNTIL, base_files, write_files
from tests.hostile.test_properties import UNTIL_S

EXAMPLES = int(os.environ.get("GPUYIELD_HOSTILE_EXAMPLES", "25"))
T0 = 1_796_032_800  # 2026-11-30T10:00:00Z
VALUES = ("0", "0", "0.5", "45", "95", "100", "NaN", "150", "-1", "1e400", "x", "0.004")


@st.composite
def one_series(draw: st.DrawFn) -> dict[str, object]:
    step = draw(st.sampled_from([15, 30, 60, 60, 60, 45, 120]))
    start = T0 + draw(st.integers(-600, 3000)) // step * step
    count = draw(st.integers(1, 40))
    times = [start + step * (i + 1) for i in range(count)]
    shape = draw(st.sampled_from(["plain", "plain", "gaps", "repeat", "unordered"]))
    if shape == "gaps":
        times = [t for i, t in enumerate(times) if i % 3 != 1]
    elif shape == "repeat":
        times = sorted(times + times[: count // 2])
    elif shape == "unordered":
        times = list(reversed(times))
    values = [draw(st.sampled_from(VALUES)) for _ in times]
    labels = {
        "__name__": draw(
            st.sampled_from(["DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_PROF_GR_ENGINE_ACTIVE"])
        ),
        "Hostname": draw(st.sampled_from(["n1", "n1", "n2", "n3", "n5"])),
        "gpu": draw(st.sampled_from(["0", "1", "7", "7", "3", "8", "16", "-1"])),
    }
    job = draw(st.sampled_from([None, None, "1", "2", "99"]))
    if job is not None:
        labels["hpc_job"] = job
    return {"metric": labels, "values": [[t, v] for t, v in zip(times, values, strict=True)]}


@st.composite
def usage_rows(draw: st.DrawFn) -> str:
    rows = ["JobID|JobIDRaw|Start|End|NodeList|AllocTRES|TRESUsageInAve|AdminComment"]
    for _ in range(draw(st.integers(1, 3))):
        job = draw(st.sampled_from(["1", "2", "7"]))
        start = draw(st.sampled_from(["10:00:00", "10:05:00", "10:20:00"]))
        end = draw(st.sampled_from(["10:10:00", "10:15:00", "10:50:00"]))
        gpus = draw(st.sampled_from(["8", "4", "16", "1.5", "1e9"]))
        util = draw(st.sampled_from(["0", "0.5", "70", "100", "250"]))
        node = draw(st.sampled_from(["n1", "n2", "n[1-2]", "n9"]))
        rows.append(
            f"{job}|{job}|2026-11-30T{start}|2026-11-30T{end}|{node}|gres/gpu={gpus}|"
            f"gres/gpuutil={util}|"
        )
    return "\n".join(rows) + "\n"


@st.composite
def utilization_inputs(draw: st.DrawFn) -> dict[str, object]:
    result = draw(st.lists(one_series(), min_size=1, max_size=6))
    document = {"status": "success", "data": {"resultType": "matrix", "result": result}}
    return {
        "answer": json.dumps(document),
        "usage": draw(st.one_of(st.none(), usage_rows())),
        "step_s": draw(st.sampled_from([None, None, 60, 15])),
    }


def _slurm(db: Path, directory: Path) -> None:
    paths = write_files(directory, dict(base_files()), "base")
    inputs = SlurmInputs(
        sacct=paths["sacct"],
        events=paths["events"],
        nodes=paths["nodes"],
        manifest=paths["manifest"],
    )
    ingest_slurm(db, inputs, until_s=UNTIL_S)


@functools.cache
def _base_store() -> bytes:
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "base.duckdb"
        _slurm(db, Path(tmp))
        return db.read_bytes()


def _snapshot(db: Path) -> dict[str, list[tuple[object, ...]]]:
    con = store.connect(db, read_only=True)
    try:
        return {t: con.execute(f"SELECT * FROM {t} ORDER BY ALL").fetchall() for t in TABLES}
    finally:
        con.close()


def _ingest(db: Path, directory: Path, drawn: dict[str, object]) -> None:
    answer = directory / "answer.json"
    answer.write_text(str(drawn["answer"]))
    usage = []
    if drawn["usage"] is not None:
        usage = [directory / "usage.psv"]
        usage[0].write_text(str(drawn["usage"]))
    step_s = drawn["step_s"]
    assert step_s is None or isinstance(step_s, int)
    ingest_utilization(db, prom_json=[answer], sacct_usage=usage, step_s=step_s)


def _ledger(db: Path) -> Ledger:
    con = store.connect(db, read_only=True)
    try:
        return compute_ledger(backend_for(con))
    finally:
        con.close()


def _check(ledger: Ledger) -> None:
    """Conserved; no category or subcategory below zero (beyond float rounding)."""
    total = sum(ledger.categories.values())
    assert abs(total - ledger.installed_gpu_seconds) <= 1e-6 * max(1.0, total)
    assert min(ledger.categories.values()) >= -1e-6, ledger.categories
    assert min(ledger.subcategories.values(), default=0.0) >= -1e-6, ledger.subcategories
    util = ledger.utilization
    if util is not None:
        for category, activity in util.activity.items():
            held = ledger.categories[category] + activity.idle_gpu_seconds
            assert activity.measured_gpu_seconds <= held + 1e-6, (category, activity)


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(drawn=utilization_inputs())
def test_accepted_utilization_conserves_and_order_does_not_matter(drawn: dict[str, object]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp)
        after = directory / "after.duckdb"
        after.write_bytes(_base_store())
        before = _snapshot(after)
        try:
            _ingest(after, directory, drawn)
        except GpuyieldError as error:
            assert error.message
            assert _snapshot(after) == before, "a refused ingest changed the store"
            return
        ledger = _ledger(after)
        _check(ledger)
        # The same samples ingested before the jobs: attributed when the jobs arrive.
        first = directory / "first.duckdb"
        try:
            _ingest(first, directory, drawn)
        except GpuyieldError:
            return  # refused without the inventory's bounds only when they decide nothing here
        _slurm(first, directory)
        other = _ledger(first)
        for key, value in ledger.categories.items():
            assert abs(other.categories[key] - value) <= 1e-6 * max(1.0, value), key
        assert ledger.subcategories.keys() == other.subcategories.keys()
        for key, value in ledger.subcategories.items():
            assert abs(other.subcategories[key] - value) <= 1e-6 * max(1.0, value), key


def test_until_is_the_good_clusters_capture() -> None:
    """The examples' times sit in the good cluster's hour (a guard on the constants above)."""
    assert UNTIL == "2026-11-30T11:00:00"
    assert UNTIL_S - T0 == 3600
