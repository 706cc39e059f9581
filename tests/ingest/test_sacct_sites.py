"""sacct as other sites print it (issue 26): real captures from other projects' test data
(fixtures/sacct-sites/README.md) ingest, or are refused with the error that fits them; and the
variants they show (another delimiter, Elapsed without ElapsedRaw, no JobIDRaw, pending arrays,
odd node lists) each have a test of their own.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path

import duckdb
import pytest

from tests.hostile.inputs import CliOutcome, run_cli

SITES = Path(__file__).parent / "fixtures" / "sacct-sites"
# The --format list of the Peregrine capture (its source's test/data/README.md at that commit).
PEREGRINE_FIELDS = (
    "JobID,JobName,User,Partition,NodeList,NNodes,ncpus,NTasks,State,Submit,start,end,timelimit,"
    "elapsed,TotalCPU,UserCPU,SystemCPU,ReqMem,MaxRSS,TRESUsageInTot,TRESUsageOutTot,"
    "MaxDiskWrite,MaxDiskRead,MaxRSSNode,MaxDiskWriteNode,MaxDiskReadNode,Comment"
)


def _ingest(db: Path, sacct: Path, *extra: str) -> CliOutcome:
    return run_cli(["ingest", "slurm", "--db", str(db), "--sacct", str(sacct), "--json", *extra])


def _one_line(outcome: CliOutcome) -> str:
    return " ".join(outcome.output.split())


def _refused(outcome: CliOutcome, path: Path, words: str) -> None:
    assert outcome.traceback is None and outcome.exit_code == 1, outcome.output
    said = _one_line(outcome)
    assert said.startswith(f"error: {path}") and words in said and "hint:" in said, said


def _rows(db: Path, query: str) -> list[tuple[object, ...]]:
    con = duckdb.connect(str(db), read_only=True)
    try:
        return con.execute(query).fetchall()
    finally:
        con.close()


def _epoch(text: str) -> int:
    return int(datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp())


def _seconds(elapsed: str) -> int:
    """[D-][HH:]MM:SS, computed here independently of the SQL that reads it."""
    days, _, clock = elapsed.rpartition("-")
    parts = [int(p) for p in clock.split(":")]
    while len(parts) < 3:
        parts.insert(0, 0)
    return int(days or 0) * 86400 + parts[0] * 3600 + parts[1] * 60 + parts[2]


# --- real captures ---------------------------------------------------------------------------


def test_peregrine_two_concatenated_captures_are_refused_at_the_line(tmp_path: Path) -> None:
    """Its second half repeats the first with job names anonymised differently: which capture is
    right cannot be known."""
    path = SITES / "peregrine-2021-snowman.txt"
    outcome = _ingest(tmp_path / "s.duckdb", path, "--noheader", "--fields", PEREGRINE_FIELDS)
    _refused(outcome, path, ":42: same JobIDRaw and Submit as line 1")
    assert not (tmp_path / "s.duckdb").exists()


def test_peregrine_one_capture_ingests_with_elapsed_and_its_delimiter(tmp_path: Path) -> None:
    lines = (SITES / "peregrine-2021-snowman.txt").read_text(encoding="utf-8").splitlines()
    first = lines[:41]  # up to the line before the second capture begins
    assert lines[41].startswith("20872560☃")
    path = tmp_path / "peregrine-first.txt"
    path.write_text("\n".join(first) + "\n", encoding="utf-8")
    db = tmp_path / "s.duckdb"
    outcome = _ingest(db, path, "--noheader", "--fields", PEREGRINE_FIELDS)
    assert outcome.exit_code == 0, outcome.output
    records = [line.split("☃") for line in first]
    allocations = [r for r in records if "." not in r[0]]
    stored = _rows(db, "SELECT job_id, state, start_s, node_list FROM jobs ORDER BY job_id")
    assert [r[0] for r in stored] == sorted(r[0] for r in allocations)
    # The capture's time: the latest Start + Elapsed of a running job, read from the text here.
    running = [r for r in allocations if r[8] == "RUNNING"]
    assert running
    latest = max(_epoch(r[10]) + _seconds(r[13]) for r in running)
    assert _rows(db, "SELECT max(as_of_s) FROM ingests") == [(latest,)]
    assert "no AllocTRES column" in outcome.stdout  # GPU counts unknown: said, not guessed


def test_cedar_elapsed_and_alloctres_without_raw_fields(tmp_path: Path) -> None:
    db = tmp_path / "s.duckdb"
    outcome = _ingest(db, SITES / "cedar-2019-manyfields.psv")
    assert outcome.exit_code == 0, outcome.output
    assert _rows(db, "SELECT job_id, state, start_s, end_s, elapsed_s, num_gpus FROM jobs") == [
        ("32641375", "TIMEOUT", _epoch("2019-12-11T18:39:02"), _epoch("2019-12-11T19:39:31"),
         _seconds("01:00:29"), 0)
    ]  # fmt: skip
    assert _rows(db, "SELECT rows_read, rows_skipped FROM ingests") == [(3, 2)]  # two steps


@pytest.mark.parametrize(
    ("name", "words"),
    [
        ("oxford-arc-2017.psv", "sacct output lacks the field 'nodelist'"),
        ("author-cluster-pending-array.psv", "sacct output lacks the field 'start'"),
        # Tab-separated: read as such, then refused for what it lacks (not "1 field").
        ("author-cluster-tab-delimited.tsv", "sacct output lacks the field 'start'"),
    ],
)
def test_captures_without_the_fields_the_ledger_needs(
    name: str, words: str, tmp_path: Path
) -> None:
    outcome = _ingest(tmp_path / "s.duckdb", SITES / name)
    _refused(outcome, SITES / name, words)
    assert "include JobIDRaw,State,Start,End,NodeList" in _one_line(outcome)


# --- the variants, one at a time -------------------------------------------------------------

HEADER = "JobID|JobIDRaw|State|Submit|Start|End|ElapsedRaw|AllocTRES|NodeList|NNodes"
ROW = "7|7|COMPLETED|2026-11-30T10:00:00|{start}|2026-11-30T10:10:00|{elapsed}|gres/gpu=8|{nodes}|{nnodes}"


def _row(start: str = "2026-11-30T10:00:00", elapsed: str = "600", nodes: str = "n1",
         nnodes: str = "1") -> str:  # fmt: skip
    return ROW.format(start=start, elapsed=elapsed, nodes=nodes, nnodes=nnodes)


def _file(tmp_path: Path, *rows: str, header: str = HEADER, name: str = "s.psv") -> Path:
    path = tmp_path / name
    path.write_text("\n".join((header, *rows)) + "\n", encoding="utf-8")
    return path


def test_elapsed_stands_in_for_elapsedraw(tmp_path: Path) -> None:
    """Start=Unknown with End and Elapsed: it ran [End - Elapsed, End), as with ElapsedRaw."""
    header = HEADER.replace("ElapsedRaw", "Elapsed")
    path = _file(tmp_path, _row(start="Unknown", elapsed="00:10:00"), header=header)
    db = tmp_path / "s.duckdb"
    assert _ingest(db, path).exit_code == 0
    assert _rows(db, "SELECT start_s, elapsed_s FROM jobs") == [
        (_epoch("2026-11-30T10:00:00"), 600)
    ]
    bad = _file(tmp_path, _row(elapsed="ten minutes"), header=header, name="bad.psv")
    outcome = _ingest(tmp_path / "b.duckdb", bad)
    _refused(outcome, bad, ":2: not a duration ([D-][HH:]MM:SS): ten minutes (field Elapsed)")


def test_pending_array_ids_without_jobidraw(tmp_path: Path) -> None:
    header = "JobID|State|Submit|Start|End|AllocTRES|NodeList"
    path = _file(
        tmp_path,
        "123_[4-10%2]|PENDING|2026-11-30T10:00:00|Unknown|Unknown||None assigned",
        "124_3|COMPLETED|2026-11-30T10:00:00|2026-11-30T10:00:00|2026-11-30T10:10:00|gres/gpu=8|n1",
        header=header,
    )
    db = tmp_path / "s.duckdb"
    outcome = _ingest(db, path)
    assert outcome.exit_code == 0, outcome.output
    assert _rows(db, "SELECT job_id_raw, state FROM jobs ORDER BY 1") == [
        ("123_[4-10%2]", "PENDING"), ("124_3", "COMPLETED")
    ]  # fmt: skip


@pytest.mark.parametrize("delimiter", ["☃", ";", "\t", "#"])
def test_another_delimiter_reads_as_the_pipe_does(delimiter: str, tmp_path: Path) -> None:
    piped = _file(tmp_path, _row(), _row().replace("7|7|", "8|8|").replace("n1", "n2"))
    other = tmp_path / "other.psv"
    other.write_text(piped.read_text().replace("|", delimiter), encoding="utf-8")
    query = "SELECT job_id, start_s, end_s, num_gpus, node_list FROM jobs ORDER BY 1"
    results = []
    for name, path, extra in (("p", piped, ()), ("o", other, ()),
                              ("n", other, ("--noheader", "--fields", HEADER.replace("|", ",")))):  # fmt: skip
        if extra:  # the same file without its header line
            path = tmp_path / "noheader.psv"
            path.write_text("".join(other.read_text().splitlines(True)[1:]), encoding="utf-8")
        db = tmp_path / f"{name}.duckdb"
        outcome = _ingest(db, path, *extra)
        assert outcome.exit_code == 0, outcome.output
        results.append(_rows(db, query))
    assert results[0] == results[1] == results[2] and len(results[0]) == 2


def test_a_pipe_inside_another_delimiter_is_refused_naming_both(tmp_path: Path) -> None:
    path = tmp_path / "s.psv"
    path.write_text(
        HEADER.replace("|", ";") + "\n" + _row().replace("|", ";").replace("n1", "n1|x") + "\n"
    )
    outcome = _ingest(tmp_path / "s.duckdb", path)
    _refused(outcome, path, ":2: the fields are separated by ';' (sacct --delimiter)")


def test_noheader_without_a_visible_delimiter_says_so(tmp_path: Path) -> None:
    path = tmp_path / "s.psv"
    path.write_text("7 COMPLETED 2026-11-30T10:00:00\n")
    outcome = _ingest(
        tmp_path / "s.duckdb", path, "--noheader", "--fields", HEADER.replace("|", ",")
    )
    _refused(outcome, path, "line 1 has no '|' between its fields")
    assert "record has 1 fields" not in _one_line(outcome)


def test_nnodes_0_on_a_0_second_job_does_not_block_the_file(tmp_path: Path) -> None:
    zero = "9|9|CANCELLED|2026-11-30T10:00:00|2026-11-30T10:05:00|2026-11-30T10:05:00|0|gres/gpu=8|n1|0"
    db = tmp_path / "s.duckdb"
    outcome = _ingest(db, _file(tmp_path, _row(), zero))
    assert outcome.exit_code == 0, outcome.output
    assert len(_rows(db, "SELECT * FROM jobs")) == 2


def test_a_bad_value_gets_a_hint_about_the_record_not_the_header(tmp_path: Path) -> None:
    path = _file(tmp_path, _row(nnodes="3"))
    outcome = _ingest(tmp_path / "s.duckdb", path)
    _refused(outcome, path, ":2: NNodes 3 does not match")
    said = _one_line(outcome)
    assert "header" not in said.split("hint:")[1] and "--lenient" in said


@pytest.mark.parametrize(
    ("nodes", "words"),
    [
        ("n[3-1]", "descending range"),
        ("n[1-2,6-4]", "descending range"),
        ("rack[1-2]-n[1-4]", "cannot read node list"),
        ("n[1-2]x[3]", "cannot read node list"),
    ],
)
def test_odd_node_lists_are_refused_with_their_line(nodes: str, words: str, tmp_path: Path) -> None:
    path = _file(tmp_path, _row(), _row(nodes=nodes).replace("7|7|", "8|8|"))
    outcome = _ingest(tmp_path / "s.duckdb", path)
    _refused(outcome, path, ":3: ")
    assert words in _one_line(outcome) and "(field NodeList)" in _one_line(outcome)


def test_whitespace_in_node_lists_is_dropped_as_slurm_drops_it(tmp_path: Path) -> None:
    db = tmp_path / "s.duckdb"
    path = _file(tmp_path, _row(nodes="n1, n[2-3]", nnodes="3"))
    outcome = _ingest(db, path)
    assert outcome.exit_code == 0, outcome.output
    assert _rows(db, "SELECT node_list FROM jobs") == [("n1,n[2-3]",)]
    assert _rows(db, "SELECT node FROM job_nodes ORDER BY 1") == [("n1",), ("n2",), ("n3",)]


EVENTS_HEADER = (
    "Cluster|Cluster Nodes|NodeName|Event|EventRaw|State|StateRaw|TimeStart|TimeEnd|Duration|"
    "Reason|User|TRES"
)


@pytest.mark.parametrize(
    ("cluster_nodes", "expected"),
    [("n[1-2], n[3-4]", 4), ("n1 n2", 2), ("n[3-1]", None), ("a[1-2]b[3-4]", None)],
)
def test_event_node_lists(cluster_nodes: str, expected: int | None, tmp_path: Path) -> None:
    path = tmp_path / "events.psv"
    path.write_text(
        EVENTS_HEADER + "\n" + f"lab|{cluster_nodes}||Cluster|1||0|2026-11-30T10:00:00|Unknown|"
        "01:00:00|Cluster Registered TRES||gres/gpu=32\n"
    )
    db = tmp_path / "s.duckdb"
    outcome = run_cli(["ingest", "slurm", "--db", str(db), "--events", str(path)])
    if expected is None:
        _refused(outcome, path, ":2: ")
        assert re.search("descending range|cannot read hostlist", _one_line(outcome))
        return
    assert outcome.exit_code == 0, outcome.output
    assert _rows(db, "SELECT node_list FROM cluster_events")[0][0] is not None
    from gpuyield.hostlist import expand_hostlist

    assert (
        len(expand_hostlist(str(_rows(db, "SELECT node_list FROM cluster_events")[0][0])))
        == expected
    )
