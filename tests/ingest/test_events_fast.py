"""The event file's fast path (DuckDB's CSV reader) gives what the line-by-line reader gives.

Strict ingests read event files with ``read_events_fast`` first; it must either return exactly the
Python reader's tables or decline (None), never a different answer, and a file it declines must
still be read, or rejected, as before.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gpuyield.errors import ParseError
from gpuyield.ingest._files import scan_file
from gpuyield.ingest.events import EventsStage, _keys, read_events, read_events_fast
from tests.conftest import SAMPLE

LONG_HEADER = (
    "Cluster|Cluster Nodes|NodeName|Event|EventRaw|State|StateRaw|TimeStart|TimeEnd|Duration|"
    "Reason|User|TRES"
)


def fast(path: Path, tz: str = "UTC") -> EventsStage | None:
    info = scan_file(path)
    keys = _keys(path, path.read_text().splitlines()[0])
    return read_events_fast(info, keys, tz=tz, default_cluster="x")


def same_as_python(path: Path, tz: str = "UTC") -> bool:
    """Whether the fast path took the file; asserts it gave the Python reader's answer if so."""
    got = fast(path, tz)
    want = read_events(path, tz=tz, lenient=False, default_cluster="x")
    if got is None:
        return False
    assert got.rows_read == want.rows_read
    assert got.node_events.to_pylist() == want.node_events.to_pylist()
    assert got.cluster_events.to_pylist() == want.cluster_events.to_pylist()
    assert got.node_events.schema == want.node_events.schema
    assert got.as_of_s == want.as_of_s
    return True


REAL_FILES = [
    "sacctmgr-event-format.psv",
    "sacctmgr-event-default.psv",
    "sacctmgr-event-window.psv",
    "nodes-snapshot-a-sacctmgr-event-format.psv",
    "nodes-snapshot-b-sacctmgr-event-format.psv",
]


@pytest.mark.parametrize("name", REAL_FILES)
def test_real_event_files_take_the_fast_path_with_the_same_result(
    slurm_local: Path, name: str
) -> None:
    assert same_as_python(slurm_local / name)
    assert same_as_python(slurm_local / name, tz="Europe/Berlin")


def test_the_bundled_sample_takes_the_fast_path() -> None:
    assert same_as_python(SAMPLE / "sacctmgr-event-format.psv")


def test_the_bench_generator_takes_the_fast_path(tmp_path: Path) -> None:
    from bench.gen_slurm import ClusterSpec, GenParams, cached

    params = GenParams(num_jobs=2000, window_days=20.0, cluster=ClusterSpec(num_nodes=300))
    data = cached(params, tmp_path)
    assert same_as_python(data.events_path)
    assert len(read_events(data.events_path, tz="UTC", lenient=False, default_cluster="x")
               .node_events) > 50  # fmt: skip


def _write(tmp_path: Path, rows: list[str], *, end: str = "\n") -> Path:
    path = tmp_path / "events.psv"
    path.write_bytes((end.join([LONG_HEADER, *rows]) + end).encode("utf-8"))
    return path


GOOD = "lab||n1|Node|1|DOWN|1|2026-11-30T10:42:45|2026-11-30T10:43:45|00:01:00|PSU fault|root(0)|"


@pytest.mark.parametrize(
    ("why", "rows", "end"),
    [
        ("a pipe in a reason", [GOOD.replace("PSU fault", "PSU|fault")], "\n"),
        ("a blank line", [GOOD, "", GOOD.replace("n1", "n2")], "\n"),
        ("a time it cannot read", [GOOD.replace("10:43:45", "soon")], "\n"),
        ("an end before the start", [GOOD.replace("10:43:45", "10:40:00")], "\n"),
        ("no start", [GOOD.replace("2026-11-30T10:42:45", "Unknown")], "\n"),
        ("non-ASCII text", [GOOD.replace("PSU fault", "Netzteil défekt")], "\n"),
        ("a form feed", [GOOD.replace("PSU fault", "PSU\x0cfault")], "\n"),
        ("CR LF line ends", [GOOD], "\r\n"),
    ],
)
def test_the_fast_path_declines_what_python_reads_its_own_way(
    tmp_path: Path, why: str, rows: list[str], end: str
) -> None:
    path = _write(tmp_path, rows, end=end)
    assert fast(path) is None, why
    info = scan_file(path)
    try:
        want = read_events(path, tz="UTC", lenient=False, default_cluster="x")
    except ParseError as error:
        with pytest.raises(ParseError) as again:
            read_events(path, tz="UTC", lenient=False, default_cluster="x", info=info)
        assert (again.value.line, again.value.field) == (error.line, error.field)
        return
    got = read_events(path, tz="UTC", lenient=False, default_cluster="x", info=info)
    assert got.node_events.to_pylist() == want.node_events.to_pylist()


_TEXT = st.text(
    alphabet=st.sampled_from([*"abcMAINTplanedfirmwupgrst _-()0189", "é", "\t", "|"]),
    max_size=14,
)
_TIMES = st.sampled_from(
    [
        "2026-11-30T10:42:45",
        "2026-11-30 10:50:00",
        "2026-03-29T02:30:00",
        "2026-10-25T02:30:00",
        "1796035247",
        "Unknown",
        "None",
        "",
        "2026-11-30T10:42",
        "yesterday",
    ]
)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    rows=st.lists(
        st.tuples(
            st.sampled_from(["", "n1", " n2 ", "gpu-a01"]),
            st.sampled_from(["DOWN", "drain", "MAINT", "", "DOWN*", " FAIL "]),
            _TIMES,
            _TIMES,
            _TEXT,
            st.sampled_from(["", "billing=1,gres/gpu=8", "gres/gpu=4", " gres/gpu=2", "cpu=1"]),
        ),
        max_size=6,
    ),
    tz=st.sampled_from(["UTC", "Europe/Berlin"]),
)
def test_fast_and_python_readers_agree_on_random_files(
    tmp_path: Path, rows: list[tuple[str, str, str, str, str, str]], tz: str
) -> None:
    lines = [
        f"lab|n[1-2]|{node}|Node|1|{state}|1|{start}|{end}|0|{reason}|root(0)|{tres}"
        for node, state, start, end, reason, tres in rows
    ]
    path = _write(tmp_path, lines)
    got = fast(path, tz)
    try:
        want = read_events(path, tz=tz, lenient=False, default_cluster="x")
    except ParseError:
        assert got is None  # the Python reader stops there: the fast path must not answer
        return
    if got is not None:
        assert got.rows_read == want.rows_read
        assert got.node_events.to_pylist() == want.node_events.to_pylist()
        assert got.cluster_events.to_pylist() == want.cluster_events.to_pylist()
        assert got.as_of_s == want.as_of_s


@pytest.mark.parametrize("tz", ["Europe/Berlin", "America/New_York", "UTC"])
@pytest.mark.parametrize(
    "text",
    [
        "2026-03-29T02:30:00",  # Berlin: an hour that does not exist (clocks go forward)
        "2026-10-25T02:30:00",  # Berlin: an hour that happens twice (clocks go back)
        "2026-03-08T02:30:00",  # New York: forward
        "2026-11-01T01:30:00",  # New York: back
        "2026-07-01T12:00:00",
    ],
)
def test_python_and_duckdb_read_local_times_alike(tz: str, text: str) -> None:
    # Node events (Python) and jobs (DuckDB) must put the same local time at the same instant,
    # or a job and the node event that ended it land an hour apart.
    import duckdb

    from gpuyield.ingest._sql import epoch_sql
    from gpuyield.ingest.events import parse_time
    from gpuyield.sqltext import literal

    con = duckdb.connect()
    duck = con.execute(f"SELECT {epoch_sql(literal(text), tz)}").fetchall()[0][0]
    assert parse_time(text, tz) == duck
