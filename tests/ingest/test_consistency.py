"""The store's cross-file check that no job holds more GPUs than the inventory gives its nodes:
jobs on one node (checked row by row) and on several (their nodes summed) alike."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest

from gpuyield.errors import ParseError
from gpuyield.ingest.slurm import SlurmInputs, ingest_slurm

HEADER = "JobID|JobIDRaw|State|Submit|Start|End|AllocTRES|NodeList"
T = "2026-11-30T10:00:00|2026-11-30T10:00:00|2026-11-30T10:10:00"
UNTIL_S = 1_796_036_400  # 2026-11-30T11:00:00


def job(job_id: int, gpus: int, node_list: str) -> str:
    return f"{job_id}|{job_id}|COMPLETED|{T}|gres/gpu={gpus}|{node_list}"


def inventory(gpus: dict[str, int]) -> str:
    return "".join(
        f"NodeName={node} Gres=gpu:{n} State=IDLE CfgTRES=cpu=8,gres/gpu={n}\n"
        for node, n in gpus.items()
    )


EIGHT_EACH = inventory({f"n{i}": 8 for i in range(1, 5)})


def ingest(
    con: duckdb.DuckDBPyConnection, tmp_path: Path, *, sacct: list[str] | None, nodes: str
) -> None:
    files: dict[str, Path | None] = {"nodes": tmp_path / "nodes.txt"}
    (tmp_path / "nodes.txt").write_text(nodes)
    if sacct is not None:
        files["sacct"] = tmp_path / "sacct.psv"
        files["sacct"].write_text("\n".join((HEADER, *sacct)) + "\n")
    ingest_slurm(None, SlurmInputs.of(files), con=con, until_s=UNTIL_S)


def refusal(con: duckdb.DuckDBPyConnection, tmp_path: Path, **files: object) -> ParseError:
    with pytest.raises(ParseError) as caught:
        ingest(con, tmp_path, **files)  # type: ignore[arg-type]
    return caught.value


def test_a_job_on_several_nodes_may_hold_what_they_have_together(fresh_db, tmp_path) -> None:
    ingest(
        fresh_db, tmp_path, sacct=[job(1, 16, "n[1-2]"), job(2, 24, "n1,n3,n4")], nodes=EIGHT_EACH
    )
    assert fresh_db.execute("SELECT count(*) FROM job_nodes").fetchall()[0][0] == 5


def test_a_job_on_several_nodes_holding_more_is_refused(fresh_db, tmp_path) -> None:
    error = refusal(
        fresh_db, tmp_path, sacct=[job(1, 8, "n1"), job(2, 17, "n[1-2]")], nodes=EIGHT_EACH
    )
    assert (error.line, error.field) == (3, "AllocTRES")
    assert "the job holds 17 GPUs, but its 2 node(s) have 16 in the inventory" in error.message
    assert fresh_db.execute("SELECT count(*) FROM jobs").fetchall()[0][0] == 0


def test_a_job_on_one_node_holding_more_is_refused(fresh_db, tmp_path) -> None:
    error = refusal(fresh_db, tmp_path, sacct=[job(1, 8, "n1"), job(2, 9, "n2")], nodes=EIGHT_EACH)
    assert (error.line, error.field) == (3, "AllocTRES")
    assert "the job holds 9 GPUs, but its 1 node(s) have 8 in the inventory" in error.message


def test_a_job_with_a_node_outside_the_inventory_is_not_checked(fresh_db, tmp_path) -> None:
    # Its capacity is not known here: n9 is in no inventory.
    ingest(fresh_db, tmp_path, sacct=[job(1, 64, "n[1-2],n9"), job(2, 64, "n9")], nodes=EIGHT_EACH)
    assert fresh_db.execute("SELECT count(*) FROM jobs").fetchall()[0][0] == 2


@pytest.mark.parametrize(
    ("rows", "named"),
    [
        ([job(1, 20, "n[1-2]"), job(2, 9, "n3")], "the job holds 20 GPUs, but its 2 node(s)"),
        ([job(1, 9, "n3"), job(2, 20, "n[1-2]")], "the job holds 9 GPUs, but its 1 node(s)"),
    ],
)
def test_the_first_line_over_capacity_is_named(fresh_db, tmp_path, rows, named) -> None:
    error = refusal(fresh_db, tmp_path, sacct=rows, nodes=EIGHT_EACH)
    assert error.line == 2
    assert named in error.message


def test_a_smaller_inventory_later_is_checked_against_the_stored_jobs(fresh_db, tmp_path) -> None:
    ingest(fresh_db, tmp_path, sacct=[job(1, 8, "n1"), job(2, 16, "n[3-4]")], nodes=EIGHT_EACH)
    smaller = inventory({"n1": 8, "n2": 8, "n3": 8, "n4": 4})
    error = refusal(fresh_db, tmp_path, sacct=None, nodes=smaller)
    assert (error.line, str(error.path).endswith("sacct.psv")) == (3, True)
    assert "the job holds 16 GPUs, but its 2 node(s) have 12 in the inventory" in error.message
    assert fresh_db.execute("SELECT sum(num_gpus) FROM nodes").fetchall()[0][0] == 32
