"""Maintenance reservations, on real sacctmgr and scontrol output, and through the ledger."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuyield.errors import UnknownFormat
from gpuyield.ingest.reservations import FORMAT, read_reservations
from gpuyield.ingest.slurm import SlurmInputs, ingest_slurm
from gpuyield.ledger import compute_ledger
from gpuyield.ledger.ledger import backend_for
from gpuyield.report.failures import failures_of
from gpuyield.store import connect
from tests.ledger.timeline import HOUR_S, T0_S, Cluster, Job, ts

FIXTURES = Path(__file__).with_name("fixtures")
# 2026-11-30T19:25:04 .. 19:28:04 UTC
MAINT_N4 = (1796066704, 1796066884)


@pytest.mark.parametrize(
    "name", ["sacctmgr-reservation-format.psv", "scontrol-show-reservation-oneliner.txt"]
)
def test_maint_reservations_become_planned_node_events(name: str) -> None:
    stage = read_reservations(FIXTURES / name, tz="UTC", lenient=False, default_cluster="lab")
    # team-n3 has no MAINT flag: someone's reserved time is idle, not down.
    assert (stage.rows_read, stage.rows_skipped) == (2, 1)
    (event,) = stage.node_events.to_pylist()
    assert (event["cluster"], event["node"], event["state"], event["planned"]) == (
        "lab", "n4", "MAINT", True,
    )  # fmt: skip
    assert (event["start_s"], event["end_s"]) == MAINT_N4
    assert event["reason"] == "reservation maint-n4"


def test_the_default_format_is_refused_with_the_one_to_use() -> None:
    with pytest.raises(UnknownFormat, match="Flags, NodeName") as info:
        read_reservations(
            FIXTURES / "sacctmgr-reservation-default.psv",
            tz="UTC",
            lenient=False,
            default_cluster="lab",
        )
    assert FORMAT in (info.value.hint or "")


def _reservations(path: Path, rows: list[tuple[str, int, int, str, str]]) -> Path:
    lines = ["Cluster|Name|TimeStart|TimeEnd|Flags|NodeName|TRES"]
    lines += [f"lab|{n}|{ts(a)}|{ts(b)}|{flags}|{nodes}|cpu=8" for n, a, b, flags, nodes in rows]
    path.write_text("\n".join(lines) + "\n")
    return path


def test_maintenance_is_planned_down_where_no_job_holds_the_gpus(tmp_path: Path) -> None:
    # n1 in maintenance 1 h-2 h while a job (IGNORE_JOBS) keeps 4 of its 8 GPUs until 1.5 h.
    files = Cluster(jobs=[Job(1, 0, HOUR_S + 1800, gpus=4, nodes="n1")]).write(tmp_path / "in")
    reservations = _reservations(
        tmp_path / "reservations.psv",
        [
            ("fw-n1", HOUR_S, 2 * HOUR_S, "MAINT,IGNORE_JOBS,SPEC_NODES", "n1"),
            ("team", 0, HOUR_S, "SPEC_NODES", "n2"),
        ],
    )
    db = tmp_path / "db.duckdb"
    inputs = SlurmInputs(
        sacct=files["sacct"], events=files["events"], nodes=files["nodes"],
        reservations=reservations,
    )  # fmt: skip
    summary = ingest_slurm(db, inputs, until_s=T0_S + 4 * HOUR_S)
    result = next(f for f in summary.files if f.source == "slurm.reservations")
    assert (result.rows_read, result.rows_skipped) == (2, 1)
    again = ingest_slurm(db, inputs, until_s=T0_S + 4 * HOUR_S)
    assert all(f.skipped for f in again.files)
    con = connect(db, read_only=True)
    try:
        backend = backend_for(con)
        ledger = compute_ledger(backend)
        assert ledger.subcategories["down.planned"] == 8 * HOUR_S - 4 * 1800
        assert ledger.categories["down"] == ledger.subcategories["down.planned"]
        (reason,) = failures_of(ledger, backend).event_reasons
        assert (reason.state, reason.reason, reason.num_nodes) == ("MAINT", "reservation fw-n1", 1)
    finally:
        con.close()


def test_an_infinite_maintenance_lasts_until_the_capture(tmp_path: Path) -> None:
    path = tmp_path / "reservations.psv"
    path.write_text(
        f"Cluster|Name|TimeStart|TimeEnd|Flags|NodeName\nlab|forever|{ts(0)}|Unknown|MAINT|n[1-2]\n"
    )
    stage = read_reservations(path, tz="UTC", lenient=False, default_cluster="lab")
    assert [(e["node"], e["end_s"]) for e in stage.node_events.to_pylist()] == [
        ("n1", None), ("n2", None),
    ]  # fmt: skip
