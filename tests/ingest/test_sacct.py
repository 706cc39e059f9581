"""sacct parsing on the real capture in shared/data/slurm-local, and on the edge cases Slurm prints."""

from __future__ import annotations

import re
from pathlib import Path

import duckdb
import pytest

from gpuyield.errors import ParseError, UnknownFormat
from gpuyield.ingest.slurm import SlurmInputs, ingest_slurm
from gpuyield.store import connect

WIDE_FIELDS = (
    "JobID,JobIDRaw,JobName,User,UID,Group,Account,Partition,QOS,State,ExitCode,DerivedExitCode,"
    "Submit,Eligible,Start,End,ElapsedRaw,Elapsed,TimelimitRaw,Timelimit,AllocTRES,ReqTRES,AllocCPUS,"
    "ReqCPUS,ReqMem,NodeList,NNodes,NTasks,Comment,Reason,Flags,Priority,Cluster,WorkDir,SubmitLine,"
    "MaxRSS,CPUTimeRAW"
)


def ingest(con: duckdb.DuckDBPyConnection, sacct: Path, **options: object):
    return ingest_slurm(None, SlurmInputs(sacct=sacct), con=con, **options)  # type: ignore[arg-type]


def gpu_seconds(con: duckdb.DuckDBPyConnection, start: str, end: str) -> int:
    """Allocated GPU-seconds in a window, straight from the jobs table."""
    row = con.execute(
        """SELECT sum(num_gpus * (least(coalesce(end_s, epoch(?::TIMESTAMP)), epoch(?::TIMESTAMP))
                  - greatest(start_s, epoch(?::TIMESTAMP))))
           FROM jobs WHERE start_s IS NOT NULL""",
        [end, end, start],
    ).fetchall()
    return int(row[0][0])


def test_wide_capture_matches_sreport_allocated(fresh_db, slurm_local: Path) -> None:
    # sreport's Allocated for 10:00-11:00 is 11750 GPU-seconds and equals sacct -X -D (README).
    ingest(fresh_db, slurm_local / "sacct-X-D-wide.psv", until_s=1796036400)
    sreport = (slurm_local / "sreport-cluster-utilization-gpu-seconds.txt").read_text()
    allocated = int(re.search(r"lab\|gres/gpu\|(\d+)\|", sreport).group(1))
    assert gpu_seconds(fresh_db, "2026-11-30 10:00:00", "2026-11-30 11:00:00") == allocated == 11750


def test_without_duplicates_the_requeued_runs_are_missing(fresh_db, slurm_local: Path) -> None:
    # The README: without -D the sum is 11598, the first runs of jobs 2, 24, 28, 30 are not shown.
    ingest(fresh_db, slurm_local / "sacct-X-wide.psv")
    assert gpu_seconds(fresh_db, "2026-11-30 10:00:00", "2026-11-30 11:00:00") == 11598


def test_multiline_submitline_records_are_reassembled(fresh_db, slurm_local: Path) -> None:
    path = slurm_local / "sacct-X-wide.psv"
    # Records start with a job id; the continuation lines of jobs 1 and 12 do not.
    starts = sum(
        1 for line in path.read_text().splitlines()[1:] if re.match(r"^\d+(_\d+)?\|", line)
    )
    summary = ingest(fresh_db, path)
    sacct = summary.files[0]
    assert sacct.rows_read == starts == 35  # 39 runs in -D, less the 4 hidden requeued runs
    count = fresh_db.execute("SELECT count(*) FROM jobs").fetchall()[0][0]
    assert count == sacct.rows_read
    names = {
        r[0]
        for r in fresh_db.execute("SELECT name FROM jobs WHERE job_id IN ('1', '12')").fetchall()
    }
    assert names == {"oom-probe", "mem-hog"}


def test_step_rows_are_skipped_not_counted_as_allocations(fresh_db, slurm_local: Path) -> None:
    path = slurm_local / "sacct-D-ALL.psv"
    summary = ingest(fresh_db, path)
    lines = path.read_text().splitlines()
    at = lines[0].split("|").index("JobID")
    steps = sum(
        1
        for line in lines[1:]
        if line.count("|") == lines[0].count("|") and "." in line.split("|")[at]
    )
    assert summary.files[0].rows_skipped == steps > 0
    assert gpu_seconds(fresh_db, "2026-11-30 10:00:00", "2026-11-30 11:00:00") == 11750


def test_states_times_and_limits(fresh_db, slurm_local: Path) -> None:
    ingest(fresh_db, slurm_local / "sacct-X-D-wide.psv")
    rows = dict(fresh_db.execute("SELECT job_id || ':' || state, state_raw FROM jobs").fetchall())
    assert rows["11:CANCELLED"] == "CANCELLED by 0"
    running = fresh_db.execute("SELECT end_s FROM jobs WHERE job_id = '36'").fetchall()
    assert running == [(None,)]  # Unknown end: still running at capture
    never = fresh_db.execute("SELECT start_s, node_list FROM jobs WHERE job_id = '23'").fetchall()
    assert never == [(None, None)]  # DEADLINE, never started, NodeList "None assigned"
    array = fresh_db.execute("SELECT job_id_raw FROM jobs WHERE job_id = '6_0'").fetchall()
    assert array == [("17",)]
    requeued = fresh_db.execute(
        "SELECT state FROM jobs WHERE job_id = '2' ORDER BY submit_s"
    ).fetchall()
    assert requeued == [("PREEMPTED",), ("COMPLETED",)]


def test_pending_job_with_partition_limit(fresh_db, slurm_local: Path) -> None:
    ingest(fresh_db, slurm_local / "sacct-X-wide-pending-job16.psv")
    assert fresh_db.execute("SELECT state, start_s FROM jobs").fetchall() == [("PENDING", None)]


def test_noheader_with_fields(fresh_db, slurm_local: Path, tmp_path: Path) -> None:
    lines = (slurm_local / "sacct-X-D-wide.psv").read_text().splitlines()
    body = tmp_path / "noheader.psv"
    body.write_text("\n".join(lines[1:]) + "\n")
    ingest(fresh_db, body, fields=lines[0].split("|"), until_s=1796036400)
    assert gpu_seconds(fresh_db, "2026-11-30 10:00:00", "2026-11-30 11:00:00") == 11750


def test_fields_as_given_to_sacct_format(fresh_db, slurm_local: Path, tmp_path: Path) -> None:
    # The --format list with output widths (State%20) names the same fields.
    lines = (slurm_local / "sacct-X-D-wide.psv").read_text().splitlines()
    body = tmp_path / "noheader.psv"
    body.write_text("\n".join(lines[1:]) + "\n")
    widths = [
        f"{name}%{12 + i}" if i % 2 else f" {name}%-9 "
        for i, name in enumerate(lines[0].split("|"))
    ]
    ingest(fresh_db, body, fields=widths, until_s=1796036400)
    assert gpu_seconds(fresh_db, "2026-11-30 10:00:00", "2026-11-30 11:00:00") == 11750
    for bad in ("", "Job Name", "State%x"):
        with pytest.raises(UnknownFormat, match="not an sacct field") as caught:
            ingest(connect(None), body, fields=[*lines[0].split("|")[:-1], bad])
        assert "JobName%30" in (caught.value.hint or "")


def test_another_delimiter_is_read_and_its_records_named(tmp_path: Path) -> None:
    """sacct --delimiter=';' -p: read through a copy with '|' (issue 26; it used to be refused
    with a hint), and a short record is named by its line in the file given."""
    path = tmp_path / "semicolon.psv"
    path.write_text(
        "JobID;JobIDRaw;State;Start;End;AllocTRES;NodeList;\n"
        "1;1;COMPLETED;2026-11-30T10:00:00;2026-11-30T10:10:00;gres/gpu=8;n1;\n"
    )
    con = connect(None)
    ingest(con, path)
    assert con.execute("SELECT job_id, num_gpus, node_list FROM jobs").fetchall() == [
        ("1", 8, "n1")
    ]
    path.write_text("JobID;JobIDRaw;State;Start;End;AllocTRES;NodeList;\n1;1;COMPLETED;;;;\n")
    with pytest.raises(ParseError, match=f"{re.escape(str(path))}:2: record has 7 fields"):
        ingest(connect(None), path)
    path.write_text("this is not sacct output\n")
    with pytest.raises(UnknownFormat) as caught:
        ingest(connect(None), path)
    assert "-P (--parsable2)" in (caught.value.hint or "")


def test_every_capture_parses(fresh_db, slurm_local: Path) -> None:
    for name in (
        "sacct-X-ALL.psv",
        "sacct-ALL.psv",
        "sacct-wide.psv",
        "sacct-X-wide-parsable2.psv",
    ):
        con = duckdb.connect()
        from gpuyield.store import connect

        con = connect(None)
        summary = ingest(con, slurm_local / name)
        assert summary.files[0].rows_rejected == 0, name
        con.close()


def write_sacct(
    tmp_path: Path,
    rows: list[str],
    header: str = "JobID|JobIDRaw|State|Start|End|AllocTRES|NodeList",
) -> Path:
    path = tmp_path / "sacct.psv"
    path.write_text("\n".join([header, *rows]) + "\n")
    return path


def test_typed_and_untyped_gpus_are_not_double_counted(fresh_db, tmp_path: Path) -> None:
    path = write_sacct(
        tmp_path,
        [
            "1|1|COMPLETED|2026-01-01T00:00:00|2026-01-01T00:01:00|cpu=1,gres/gpu=4,gres/gpu:a100=4|n1",
            "2|2|COMPLETED|2026-01-01T00:00:00|2026-01-01T00:01:00|cpu=1,gres/gpu:a100=2,gres/gpu:h100=1|n2",
            "3|3|COMPLETED|2026-01-01T00:00:00|2026-01-01T00:01:00|cpu=1,mem=1G|n3",
            # The first key, and next to other GPU-ish keys that must not be read as it.
            "4|4|COMPLETED|2026-01-01T00:00:00|2026-01-01T00:01:00|gres/gpu=2,cpu=1|n4",
            "5|5|COMPLETED|2026-01-01T00:00:00|2026-01-01T00:01:00|"
            "gres/gpumem=80G,gres/gpu=6,gres/gpuutil=100|n5",
            # A key that ends in "gres/gpu=" comes first: the count is the real key's.
            "6|6|COMPLETED|2026-01-01T00:00:00|2026-01-01T00:01:00|"
            "license/gres/gpu=9,gres/gpu=5|n6",
        ],
    )
    ingest(fresh_db, path)
    gpus = dict(fresh_db.execute("SELECT job_id, num_gpus FROM jobs").fetchall())
    assert gpus == {"1": 4, "2": 3, "3": 0, "4": 2, "5": 6, "6": 5}
    # Every type a job holds, with its count (issue 26: not only the first).
    types = dict(fresh_db.execute("SELECT job_id, gpu_types FROM jobs").fetchall())
    assert types == {
        "1": "a100=4",
        "2": "a100=2,h100=1",
        "3": None,
        "4": None,
        "5": None,
        "6": None,
    }


def test_a_typed_gpu_count_that_is_not_whole_is_refused(fresh_db, tmp_path: Path) -> None:
    # The job's total reads (gres/gpu=4), but its split by type would be wrong; only rows whose
    # TRES names a typed entry are checked for one, and such a row is refused wherever it sits.
    path = write_sacct(
        tmp_path,
        [
            "1|1|COMPLETED|2026-01-01T00:00:00|2026-01-01T00:01:00|gres/gpu=4|n1",
            "2|2|COMPLETED|2026-01-01T00:00:00|2026-01-01T00:01:00|gres/gpu=4,gres/gpu:a100=1.5|n2",
            "3|3|COMPLETED|2026-01-01T00:00:00|2026-01-01T00:01:00|gres/gpu:h100=x,cpu=2|n3",
            "4|4|COMPLETED|2026-01-01T00:00:00|2026-01-01T00:01:00|gres/gpu=2,gres/gpu:a100=2|n4",
        ],
    )
    summary = ingest(fresh_db, path, lenient=True)
    rejects = fresh_db.execute("SELECT line, field FROM rejects ORDER BY line").fetchall()
    assert rejects == [(3, "AllocTRES"), (4, "AllocTRES")]
    assert summary.files[0].rows_rejected == 2
    kept = fresh_db.execute("SELECT job_id, num_gpus, gpu_types FROM jobs ORDER BY 1").fetchall()
    assert kept == [("1", 4, None), ("4", 2, "a100=2")]


def test_timezone_shifts_times(fresh_db, tmp_path: Path) -> None:
    path = write_sacct(
        tmp_path, ["1|1|COMPLETED|2026-07-01T10:00:00|2026-07-01T11:00:00|gres/gpu=1|n1"]
    )
    ingest(fresh_db, path, tz="America/New_York")
    start = fresh_db.execute("SELECT start_s FROM jobs").fetchall()[0][0]
    assert start == 1782914400  # 14:00 UTC: New York is UTC-4 in July


def test_bad_time_names_file_line_and_field(fresh_db, tmp_path: Path) -> None:
    path = write_sacct(
        tmp_path,
        [
            "1|1|COMPLETED|2026-01-01T00:00:00|2026-01-01T00:01:00|gres/gpu=1|n1",
            "2|2|COMPLETED|2026-01-01T00:00:00|yesterday|gres/gpu=1|n1",
        ],
    )
    with pytest.raises(ParseError) as info:
        ingest(fresh_db, path)
    assert info.value.line == 3 and info.value.field == "End"
    assert str(path) in str(info.value) and info.value.hint


def _jobs(con: duckdb.DuckDBPyConnection) -> list[tuple]:
    return con.execute(
        "SELECT * EXCLUDE (ingest_id, line, job_key) FROM jobs ORDER BY ALL"
    ).fetchall()


def _as_parsable(text: str) -> str:
    """``sacct -p`` of a ``-P`` capture: a separator after each record's last field (a record's
    continuation lines, a multi-line SubmitLine, end where the next record starts)."""
    lines = text.rstrip("\n").split("\n")
    out = []
    for number, line in enumerate(lines):
        following = lines[number + 1] if number + 1 < len(lines) else None
        ends_record = following is None or following.count("|") >= 20
        out.append(line + ("|" if ends_record else ""))
    return "\n".join(out) + "\n"


def test_parsable_with_trailing_separator_reads_as_parsable2(
    fresh_db, slurm_local: Path, tmp_path: Path
) -> None:
    # sacct -p (--parsable) ends every line with '|'; the wide capture has multi-line records.
    source = slurm_local / "sacct-X-D-wide.psv"
    parsable = tmp_path / "sacct-p.psv"
    parsable.write_text(_as_parsable(source.read_text()))
    assert parsable.read_text().splitlines()[0].endswith("|CPUTimeRAW|")
    ingest(fresh_db, parsable, until_s=1796036400)
    expected = connect(None)
    ingest(expected, source, until_s=1796036400)
    assert _jobs(fresh_db) == _jobs(expected) and len(_jobs(fresh_db)) == 39
    assert gpu_seconds(fresh_db, "2026-11-30 10:00:00", "2026-11-30 11:00:00") == 11750


def test_parsable_without_header(fresh_db, slurm_local: Path, tmp_path: Path) -> None:
    lines = _as_parsable((slurm_local / "sacct-X-D-wide.psv").read_text()).splitlines()
    body = tmp_path / "noheader.psv"
    body.write_text("\n".join(lines[1:]) + "\n")
    ingest(fresh_db, body, fields=WIDE_FIELDS.split(","), until_s=1796036400)
    assert gpu_seconds(fresh_db, "2026-11-30 10:00:00", "2026-11-30 11:00:00") == 11750


def test_epoch_times_from_slurm_time_format(fresh_db, tmp_path: Path) -> None:
    # SLURM_TIME_FORMAT=%s: seconds since the epoch, the same instant whatever --tz says.
    path = write_sacct(
        tmp_path,
        [
            "1|1|COMPLETED|1767225600|1767225660|gres/gpu=1|n1",
            "2|2|RUNNING|1767225600|Unknown|gres/gpu=2|n2",
        ],
    )
    ingest(fresh_db, path, tz="America/New_York")
    rows = fresh_db.execute("SELECT job_id, start_s, end_s FROM jobs ORDER BY 1").fetchall()
    assert rows == [("1", 1767225600, 1767225660), ("2", 1767225600, None)]


def test_an_unreadable_time_format_is_explained(fresh_db, tmp_path: Path) -> None:
    # SLURM_TIME_FORMAT=relative prints e.g. "Tue 14:05": not a time gpuyield can place.
    path = write_sacct(tmp_path, ["1|1|COMPLETED|Tue 14:05|Tue 14:06|gres/gpu=1|n1"])
    with pytest.raises(ParseError) as info:
        ingest(fresh_db, path)
    assert info.value.field == "Start" and "Tue 14:05" in str(info.value)
    assert "SLURM_TIME_FORMAT" in (info.value.hint or "")


def test_a_repeated_local_hour_reads_the_same_in_jobs_and_events(fresh_db, tmp_path: Path) -> None:
    # 01:30 happens twice in New York on 2026-11-01; sacct and sacctmgr print it the same way, so
    # the job and the node event must land on the same instant (the later one, EST).
    from gpuyield.ingest.events import parse_time

    path = write_sacct(
        tmp_path, ["1|1|COMPLETED|2026-11-01T01:30:00|2026-11-01T02:30:00|gres/gpu=1|n1"]
    )
    ingest(fresh_db, path, tz="America/New_York")
    start = fresh_db.execute("SELECT start_s FROM jobs").fetchall()[0][0]
    assert start == parse_time("2026-11-01T01:30:00", "America/New_York") == 1793514600


def test_a_job_across_the_repeated_hour_is_explained(fresh_db, tmp_path: Path) -> None:
    # Started 01:50 EDT, ended 01:10 EST: printed without offsets, the end reads before the start.
    path = write_sacct(
        tmp_path, ["1|1|COMPLETED|2026-11-01T01:50:00|2026-11-01T01:10:00|gres/gpu=1|n1"]
    )
    with pytest.raises(ParseError, match="ends before it starts") as info:
        ingest(fresh_db, path, tz="America/New_York")
    assert "SLURM_TIME_FORMAT" in (info.value.hint or "")
    with pytest.raises(ParseError, match="ends before it starts") as in_utc:
        ingest(connect(None), path)
    assert "clocks go back" not in (in_utc.value.hint or "")


def test_lenient_keeps_going_and_counts(fresh_db, tmp_path: Path) -> None:
    path = write_sacct(
        tmp_path,
        [
            "1|1|COMPLETED|2026-01-01T00:00:00|2026-01-01T00:01:00|gres/gpu=1|n1",
            "2|2|EXPLODED|2026-01-01T00:00:00|2026-01-01T00:01:00|gres/gpu=1|n1",
            "3|3|COMPLETED|2026-01-01T00:00:00",
            "4|4|COMPLETED|2026-01-01T00:02:00|2026-01-01T00:03:00|gres/gpu=x|n1",
            "5|5|COMPLETED|2026-01-01T00:04:00|2026-01-01T00:05:00|gres/gpu=2|n1",
        ],
    )
    summary = ingest(fresh_db, path, lenient=True)
    assert summary.files[0].rows_rejected == 3
    assert sorted(r[0] for r in fresh_db.execute("SELECT job_id FROM jobs").fetchall()) == [
        "1",
        "5",
    ]
    rejects = fresh_db.execute("SELECT line, field FROM rejects ORDER BY line").fetchall()
    assert [r[0] for r in rejects] == [3, 4, 5]


def test_not_sacct_output_is_unknown_format(fresh_db, slurm_local: Path) -> None:
    with pytest.raises(UnknownFormat):
        ingest(fresh_db, slurm_local / "sacct-X-default.txt")


def test_missing_required_field_is_named(fresh_db, slurm_local: Path) -> None:
    with pytest.raises(UnknownFormat, match="nodelist"):
        ingest(fresh_db, slurm_local / "sacct-X-D-gpucheck.psv")


def test_het_job_components_are_separate_allocations(fresh_db, tmp_path: Path) -> None:
    path = write_sacct(tmp_path, [
        "7+0|7|COMPLETED|2026-01-01T00:00:00|2026-01-01T00:01:00|gres/gpu=8|n1",
        "7+1|8|COMPLETED|2026-01-01T00:00:00|2026-01-01T00:01:00|gres/gpu=4|n2",
        "7+0.batch|7.batch|COMPLETED|2026-01-01T00:00:00|2026-01-01T00:01:00||n1",
    ])  # fmt: skip
    summary = ingest(fresh_db, path)
    rows = fresh_db.execute("SELECT job_id, num_gpus FROM jobs ORDER BY job_id").fetchall()
    assert rows == [("7+0", 8), ("7+1", 4)]
    assert summary.files[0].rows_skipped == 1


def _many_rows(count: int) -> list[str]:
    return [
        f"{i}|{i}|COMPLETED|2026-01-01T00:00:00|2026-01-01T00:01:00|gres/gpu=1|n{i % 7}"
        for i in range(1, count + 1)
    ]


def test_line_numbers_hold_in_a_file_read_in_parallel(fresh_db, tmp_path: Path) -> None:
    # 600k rows (45 MB, more than one 32 MB buffer of DuckDB's CSV reader): they are split over
    # threads, and line numbers come from row order.
    rows = _many_rows(600_000)
    rows[554_320] = rows[554_320].replace("2026-01-01T00:01:00", "soon")
    path = write_sacct(tmp_path, rows)
    with pytest.raises(ParseError) as info:
        ingest(fresh_db, path)
    assert (info.value.line, info.value.field) == (554_322, "End")
    assert "not a time: soon" in str(info.value)
    rows[554_320] = rows[554_320].replace("soon", "2026-01-01T00:01:00")
    path = write_sacct(tmp_path, rows)
    ingest(fresh_db, path)
    lines = fresh_db.execute(
        "SELECT job_id, line FROM jobs WHERE job_id IN ('1', '123456', '600000')"
    ).fetchall()
    assert sorted(lines) == [("1", 2), ("123456", 123_457), ("600000", 600_001)]


@pytest.mark.parametrize(
    "text",
    [
        pytest.param("{header}\n{a}\n\n{b}\n{bad}\n", id="blank line"),
        pytest.param("{header}\r\n{a}\n{b}\r\n{bad}\r\n", id="mixed line ends"),
        pytest.param("{header}\n{a}\n{b}|extra\n{bad}\n", id="extra field"),
    ],
)
def test_files_the_csv_reader_cannot_split_keep_true_line_numbers(
    fresh_db, tmp_path: Path, text: str
) -> None:
    rows = _many_rows(3)
    bad = rows[2].replace("COMPLETED", "EXPLODED")
    path = tmp_path / "sacct.psv"
    path.write_text(
        text.format(
            header="JobID|JobIDRaw|State|Start|End|AllocTRES|NodeList",
            a=rows[0],
            b=rows[1],
            bad=bad,
        ),
        newline="",
    )
    summary = ingest(fresh_db, path, lenient=True)
    rejects = fresh_db.execute("SELECT line, field, message FROM rejects ORDER BY line").fetchall()
    bad_line = text.split("\n").index("{bad}" if "{bad}\r" not in text else "{bad}\r") + 1
    assert (bad_line, "State", "unknown job state: EXPLODED") in rejects
    assert summary.files[0].rows_rejected == len(rejects)


def test_every_problem_of_a_row_is_kept(fresh_db, tmp_path: Path) -> None:
    path = write_sacct(tmp_path, ["1|1|EXPLODED|then|2026-01-01T00:01:00|gres/gpu=x|n1"])
    summary = ingest(fresh_db, path, lenient=True)
    rejects = fresh_db.execute("SELECT line, field, message FROM rejects ORDER BY field").fetchall()
    assert rejects == [
        (2, "AllocTRES", "GPU count is not a whole number: gres/gpu=x"),
        (2, "Start", "not a time: then"),
        (2, "State", "unknown job state: EXPLODED"),
    ]
    assert summary.files[0].rows_rejected == 1


def test_carriage_return_ending_the_file_is_a_lone_one(fresh_db, tmp_path: Path) -> None:
    path = tmp_path / "sacct.psv"
    path.write_bytes(
        b"JobID|JobIDRaw|State|Start|End|AllocTRES|NodeList\n" + _many_rows(2)[0].encode() + b"\r"
    )
    with pytest.raises(ParseError, match="carriage return") as info:
        ingest(fresh_db, path)
    assert info.value.line == 2
