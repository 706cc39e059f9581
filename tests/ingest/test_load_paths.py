"""The direct load (strict mode) and the staged load (lenient mode) store the same rows."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from bench.gen_slurm import ClusterSpec, GenParams, generate
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuyield.errors import ParseError
from gpuyield.ingest import sacct as sacct_mod
from gpuyield.ingest.slurm import SlurmInputs, ingest_slurm
from gpuyield.store import connect


@pytest.fixture(scope="module")
def sacct_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A generated capture plus what -X would have left out: step rows, and a repeated record."""
    params = GenParams(num_jobs=4000, window_days=3.0, seed=11, cluster=ClusterSpec(num_nodes=1200))
    data = generate(params, tmp_path_factory.mktemp("gen"))
    lines = data.sacct_path.read_text().splitlines()
    first = lines[1].split("|")
    step = [f"{first[0]}.batch", f"{first[1]}.batch", *first[2:]]
    lines.insert(2, "|".join(step))
    lines.append(lines[5])  # a concatenated capture repeats a record: the later line wins
    path = data.sacct_path.with_name("sacct-extra.psv")
    path.write_text("\n".join(lines) + "\n")
    return path


def _ingest(tmp_path: Path, sacct: Path, *, lenient: bool) -> tuple[object, list, list]:
    db = tmp_path / ("lenient.duckdb" if lenient else "strict.duckdb")
    summary = ingest_slurm(db, SlurmInputs(sacct=sacct), lenient=lenient)
    con = connect(db, read_only=True)
    try:
        jobs = con.execute(
            "SELECT * EXCLUDE (ingest_id, job_key) FROM jobs ORDER BY line"
        ).fetchall()
        nodes = con.execute(
            "SELECT j.line, n.node FROM job_nodes n JOIN jobs j USING (job_key) ORDER BY 1, 2"
        ).fetchall()
    finally:
        con.close()
    return summary.files[0], jobs, nodes


def test_direct_and_staged_loads_store_the_same_rows(
    tmp_path: Path, sacct_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    staged_file, staged_jobs, staged_nodes = _ingest(tmp_path, sacct_file, lenient=True)

    def no_staging(*args: object, **kwargs: object) -> None:
        raise AssertionError("the strict ingest of a well-formed file should load directly")

    monkeypatch.setattr(sacct_mod, "stage_sacct", no_staging)
    direct_file, direct_jobs, direct_nodes = _ingest(tmp_path, sacct_file, lenient=False)
    assert direct_jobs == staged_jobs and direct_nodes == staged_nodes
    assert len(direct_jobs) == 4000 and len(direct_nodes) > len(direct_jobs)
    assert (direct_file.rows_read, direct_file.rows_skipped) == (4002, 2)
    assert (staged_file.rows_read, staged_file.rows_skipped) == (4002, 2)
    assert direct_jobs[-1][-2] == 4003  # the repeated record kept its later line


def test_a_bad_record_sends_the_direct_load_back_to_staging(
    tmp_path: Path, sacct_file: Path
) -> None:
    lines = sacct_file.read_text().splitlines()
    fields = lines[3000].split("|")
    fields[7] = "EXPLODED"  # State
    lines[3000] = "|".join(fields)
    bad = tmp_path / "bad.psv"
    bad.write_text("\n".join(lines) + "\n")
    db = tmp_path / "db.duckdb"
    with pytest.raises(ParseError, match="unknown job state: EXPLODED") as info:
        ingest_slurm(db, SlurmInputs(sacct=bad))
    assert (info.value.line, info.value.field) == (3001, "State")
    # A failed first ingest leaves no database file behind (issue 13).
    assert not db.exists()


def test_a_reader_that_lost_file_order_is_caught(
    tmp_path: Path, sacct_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Line numbers come from row ids only while DuckDB keeps file order; a sample of lines is
    # checked. Pretend the sample disagrees (lines 2 and 3 swapped): both fast paths must step
    # aside for the line-by-line reader, and the lines stored must still be the file's.
    from gpuyield.ingest.sacct import records, staging

    text = sacct_file.read_text().split("\n")
    monkeypatch.setattr(records, "sample_lines", lambda info: {2: text[2], 3: text[1]})
    line_by_line = []
    split = staging._stage_lines
    monkeypatch.setattr(
        staging, "_stage_lines", lambda *a, **k: line_by_line.append(1) or split(*a, **k)
    )
    db = tmp_path / "db.duckdb"
    ingest_slurm(db, SlurmInputs(sacct=sacct_file))
    assert line_by_line == [1]
    con = connect(db, read_only=True)
    try:
        stored = dict(con.execute("SELECT line, job_id_raw FROM jobs").fetchall())
    finally:
        con.close()
    for number in (2, 4, 3000):
        assert stored[number] == text[number - 1].split("|")[1]


class _Recorder:
    """A Progress that keeps what it was told."""

    def __init__(self) -> None:
        self.phases: list[tuple[str, int | None, int]] = []

    def phase(self, name: str, total: int | None = None) -> None:
        self.phases.append((name, total, 0))

    def advance(self, amount: int) -> None:
        name, total, done = self.phases[-1]
        self.phases[-1] = (name, total, done + amount)


def test_loading_reports_progress_in_bytes_of_the_file(tmp_path: Path, sacct_file: Path) -> None:
    recorder = _Recorder()
    ingest_slurm(tmp_path / "db.duckdb", SlurmInputs(sacct=sacct_file), progress=recorder)
    size = sacct_file.stat().st_size
    # The scan, then DuckDB's own estimate while the one INSERT runs, ending at the whole file.
    assert (f"reading {sacct_file.name}", size, size) in recorder.phases
    assert (f"loading {sacct_file.name}", size, size) in recorder.phases


@pytest.mark.parametrize("lenient", [False, True])
def test_a_file_of_pending_jobs_knows_no_capture_time(tmp_path: Path, lenient: bool) -> None:
    # No submit column and no start: nothing in the file says when it was captured.
    path = tmp_path / "pending.psv"
    path.write_text(
        "JobID|JobIDRaw|State|Start|End|AllocTRES|NodeList\n"
        "1|1|PENDING|Unknown|Unknown|gres/gpu=1|None assigned\n"
    )
    summary = ingest_slurm(tmp_path / "db.duckdb", SlurmInputs(sacct=path), lenient=lenient)
    assert summary.as_of_s is None and summary.files[0].rows_read == 1


@pytest.mark.parametrize(
    "name",
    [
        "sacct-ALL.psv",
        "sacct-D-ALL.psv",
        "sacct-X-ALL.psv",
        "sacct-X-D-wide.psv",
        "sacct-X-wide-parsable2.psv",
        "sacct-X-wide-pending-job16.psv",
        "sacct-X-wide.psv",
        "sacct-wide.psv",
    ],
)
def test_real_captures_load_the_same_strict_and_lenient(
    tmp_path: Path, slurm_local: Path, name: str
) -> None:
    # Real Slurm 22.05 output (step rows, multi-line SubmitLine, requeues, pending jobs): whichever
    # path each takes, strict and lenient ingests store the same rows.
    path = slurm_local / name
    _, strict_jobs, strict_nodes = _ingest(tmp_path, path, lenient=False)
    lenient_file, lenient_jobs, lenient_nodes = _ingest(tmp_path, path, lenient=True)
    assert lenient_file.rows_rejected == 0
    assert strict_jobs == lenient_jobs and strict_nodes == lenient_nodes
    assert strict_jobs


def test_only_the_irregular_lines_go_through_python(
    tmp_path: Path, sacct_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A 4,000-job capture with one record split over two lines by a newline in its JobName:
    # DuckDB splits the whole lines; Python sees only the two lines of the split record.
    from gpuyield.ingest.sacct import staging

    lines = sacct_file.read_text().splitlines()
    fields = lines[100].split("|")
    fields[2] = "two\nlines"  # JobName, mid-record: the record's lines have 2 and n-3 separators
    lines[100] = "|".join(fields)
    path = tmp_path / "multi.psv"
    path.write_text("\n".join(lines) + "\n")
    seen: list[int] = []
    reassemble = staging.reassemble

    def counting(cursor, n_sep, free):  # type: ignore[no-untyped-def]
        rows = cursor.fetchall()
        seen.extend(r[0] for r in rows)

        class Replay:
            def __init__(self) -> None:
                self.rows = rows

            def fetchmany(self, size: int) -> list:
                batch, self.rows = self.rows[:size], self.rows[size:]
                return batch

        return reassemble(Replay(), n_sep, free)

    monkeypatch.setattr(staging, "reassemble", counting)
    summary = ingest_slurm(tmp_path / "db.duckdb", SlurmInputs(sacct=path), lenient=True)
    assert seen == [101, 102]
    assert summary.files[0].rows_rejected == 0
    con = connect(tmp_path / "db.duckdb", read_only=True)
    try:
        names = con.execute("SELECT line, name FROM jobs WHERE line IN (100, 101, 103)").fetchall()
    finally:
        con.close()
    assert sorted(names)[1] == (101, "two\nlines") and [n[0] for n in sorted(names)] == [
        100,
        101,
        103,
    ]


@pytest.mark.parametrize("lenient", [False, True])
@pytest.mark.parametrize("trailing", ["|", ""])
def test_a_pipe_in_a_value_is_found_when_the_last_field_is_empty(
    tmp_path: Path, lenient: bool, trailing: str
) -> None:
    # DuckDB's reader drops empty fields past the last column, so "...|run=a|b|" with one field
    # too many read as a whole record with the comment cut at the pipe. In `sacct -p` output
    # (a "|" ends every line) every record's last field is empty; with -P, one whose last
    # column (here Reason) is empty. The pipe must stay inside the comment.
    header = "JobID|JobIDRaw|State|Start|End|AllocTRES|NodeList|Comment|Reason" + trailing
    times = "2026-01-01T00:00:00|2026-01-01T01:00:00"
    rows = [
        f"1|1|COMPLETED|{times}|gres/gpu=8|n1|run=a|b|" + trailing,
        f"2|2|COMPLETED|{times}|gres/gpu=8|n2|run=c|" + trailing,
    ]
    path = tmp_path / "pipe.psv"
    path.write_text("\n".join([header, *rows]) + "\n")
    _, jobs, _ = _ingest(tmp_path, path, lenient=lenient)
    comments = {row[1]: row[18] for row in jobs}  # job_id -> comment
    assert comments == {"1": "run=a|b", "2": "run=c"}


def test_a_byte_order_mark_changes_nothing(tmp_path: Path) -> None:
    # Files passed through some editors start with a UTF-8 byte-order mark: before, the sacct
    # header was refused and the events' Cluster column silently not found.
    from tests.conftest import SAMPLE

    names = {
        "sacct": "sacct-X-D-wide.psv",
        "events": "sacctmgr-event-format.psv",
        "nodes": "scontrol-show-nodes-oneliner.txt",
        "manifest": "manifest.toml",
    }
    marked = tmp_path / "bom"
    marked.mkdir()
    for name in names.values():
        (marked / name).write_bytes(b"\xef\xbb\xbf" + (SAMPLE / name).read_bytes())

    def stored(directory: Path, db: Path) -> dict[str, list[tuple]]:
        inputs = SlurmInputs(**{k: directory / v for k, v in names.items()})
        ingest_slurm(db, inputs)
        con = connect(db, read_only=True)
        try:
            return {
                table: sorted(
                    con.execute(f"SELECT * EXCLUDE (ingest_id) FROM {table}").fetchall(), key=repr
                )
                for table in ("jobs", "node_events", "cluster_events", "nodes")
            }
        finally:
            con.close()

    plain, with_mark = stored(SAMPLE, tmp_path / "a.duckdb"), stored(marked, tmp_path / "b.duckdb")
    assert with_mark == plain
    assert {row[0] for row in with_mark["node_events"]} == {"lab"}  # the Cluster column, read


# Free text as users write it. Pipes only in the comment: with two free-text fields holding pipes
# no reader could tell which owns them (the reader gives them to the first of SubmitLine, Comment).
_NAME = st.lists(st.sampled_from(["a", " ", "=", ",", "run=x", "é", ""]), max_size=5).map("".join)
_COMMENT = st.lists(st.sampled_from(["a", " ", "=", ",", "run=x", "|", "é"]), max_size=5).map(
    "".join
)


@st.composite
def plausible_sacct(draw: st.DrawFn) -> tuple[str, dict[str, tuple[str | None, str | None]]]:
    """A small sacct file as -P or -p prints it, and each job's JobName and Comment in it."""
    trailing = draw(st.sampled_from(["", "|"]))
    header = "JobID|JobIDRaw|JobName|State|Start|End|AllocTRES|NodeList|Comment|Reason"
    lines = [header + trailing]
    expected: dict[str, tuple[str | None, str | None]] = {}
    for job in range(1, draw(st.integers(1, 6)) + 1):
        end = draw(st.sampled_from([f"2026-01-01T0{job}:30:00", "Unknown"]))
        name, comment = draw(_NAME), draw(_COMMENT)
        tres = draw(st.sampled_from(["gres/gpu=8", "cpu=1,gres/gpu=2", "cpu=1", ""]))
        # A job that ran on GPUs names its nodes (one that names none is refused at ingest).
        nodes = ["n1", "n[1-2]"] + ([] if "gpu" in tres else ["None assigned"])
        fields = [
            str(job),
            str(job),
            name,
            "COMPLETED" if end != "Unknown" else "RUNNING",
            f"2026-01-01T0{job}:00:00",
            end,
            tres,
            draw(st.sampled_from(nodes)),
            comment,
            draw(st.sampled_from(["", "None", "Priority"])),  # often empty: the pipe bug's case
        ]
        lines.append("|".join(fields) + trailing)
        expected[str(job)] = (name or None, comment or None)
    return "\n".join(lines) + "\n", expected


@pytest.mark.parametrize("lenient", [False, True])
@settings(max_examples=40, deadline=None)
@given(case=plausible_sacct())
def test_random_files_keep_every_value_in_its_field(
    case: tuple[str, dict[str, tuple[str | None, str | None]]], lenient: bool
) -> None:
    # Whichever path the file takes (DuckDB's reader, or line by line), each job's free text is
    # stored as written: no pipe cuts a comment, no value moves to the next field.
    text, expected = case
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "sacct.psv"
        path.write_text(text)
        file, jobs, _ = _ingest(Path(tmp), path, lenient=lenient)
    assert file.rows_rejected == 0
    assert {row[1]: (row[4], row[18]) for row in jobs} == expected  # job_id: (name, comment)
