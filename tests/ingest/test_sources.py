"""Node events, inventories, hostlists and manifests: real files and the edge cases around them."""

from __future__ import annotations

import re
from pathlib import Path

import duckdb
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuyield.errors import ManifestError, ParseError, UnknownFormat, UnknownIdError
from gpuyield.hostlist import HOSTLIST_MACRO_SQL, expand_hostlist
from gpuyield.ingest.events import read_events
from gpuyield.ingest.nodes import GresGpus, gpus_from_gres, read_nodes
from gpuyield.ingest.slurm import SlurmInputs, ingest_slurm
from gpuyield.manifest import load_manifest
from tests.conftest import SAMPLE

EPOCH_10_40_47 = 1796035247


def test_long_event_format(slurm_local: Path) -> None:
    stage = read_events(
        slurm_local / "sacctmgr-event-format.psv", tz="UTC", lenient=False, default_cluster="x"
    )
    cluster = stage.cluster_events.to_pylist()
    assert cluster == [
        {
            "cluster": "lab",
            "start_s": EPOCH_10_40_47,
            "end_s": None,
            "num_gpus": 32,
            "node_list": "n[1-4]",
            "line": 2,
        }
    ]
    nodes = stage.node_events.to_pylist()
    assert [(e["node"], e["state"], e["end_s"] - e["start_s"]) for e in nodes] == [
        ("n1", "DOWN", 0),
        ("n2", "DRAIN", 86),
        ("n2", "DOWN", 60),
        ("n3", "DRAIN", 51),
        ("n4", "DOWN*", 47),
    ]
    # 244 node-seconds, the README's sum of the node events.
    assert sum(e["end_s"] - e["start_s"] for e in nodes) == 244
    assert [e["planned"] for e in nodes] == [False, False, False, True, False]  # "firmware update"


def test_default_event_format_has_the_same_events(slurm_local: Path) -> None:
    short = read_events(
        slurm_local / "sacctmgr-event-default.psv", tz="UTC", lenient=False, default_cluster="x"
    )
    long = read_events(
        slurm_local / "sacctmgr-event-format.psv", tz="UTC", lenient=False, default_cluster="x"
    )
    keys = ("node", "state", "start_s", "end_s", "reason")
    project = lambda t: sorted(tuple(r[k] for k in keys) for r in t.to_pylist())  # noqa: E731
    assert project(short.node_events) == project(long.node_events)
    assert short.cluster_events.to_pylist()[0]["num_gpus"] is None  # no TRES in the short format


def test_parsable_events_with_epoch_times(tmp_path: Path, slurm_local: Path) -> None:
    """``sacctmgr -p`` (a separator ends each line) with SLURM_TIME_FORMAT=%s: the same events."""
    from datetime import datetime

    def epoch(match: re.Match[str]) -> str:
        return str(int(datetime.fromisoformat(match.group(0) + "+00:00").timestamp()))

    source = slurm_local / "sacctmgr-event-format.psv"
    lines = [
        re.sub(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d", epoch, line) + "|"
        for line in source.read_text().splitlines()
    ]
    path = tmp_path / "events-p.psv"
    path.write_text("\n".join(lines) + "\n")
    assert "2026-" not in path.read_text()
    got = read_events(path, tz="Europe/Berlin", lenient=False, default_cluster="x")
    want = read_events(source, tz="UTC", lenient=False, default_cluster="x")
    assert got.node_events.to_pylist() == want.node_events.to_pylist()
    assert got.cluster_events.to_pylist() == want.cluster_events.to_pylist()
    assert len(want.node_events) == 5


def test_open_events(slurm_local: Path) -> None:
    stage = read_events(
        slurm_local / "nodes-snapshot-b-sacctmgr-event-format.psv",
        tz="UTC",
        lenient=False,
        default_cluster="x",
    )
    assert [e["end_s"] for e in stage.node_events.to_pylist()] == [None, None]


def test_bad_event_row(tmp_path: Path, slurm_local: Path) -> None:
    text = (slurm_local / "sacctmgr-event-format.psv").read_text().splitlines()
    text[3] = text[3].replace("2026-11-30T10:42:39", "not-a-time")
    path = tmp_path / "events.psv"
    path.write_text("\n".join(text) + "\n")
    with pytest.raises(ParseError) as info:
        read_events(path, tz="UTC", lenient=False, default_cluster="x")
    assert (info.value.line, info.value.field) == (4, "TimeStart")
    assert "SLURM_TIME_FORMAT" in (info.value.hint or "")
    lenient = read_events(path, tz="UTC", lenient=True, default_cluster="x")
    assert lenient.rows_rejected == 1 and len(lenient.node_events) == 4


@pytest.mark.parametrize(
    "name",
    [
        "scontrol-show-nodes-oneliner.txt",
        "scontrol-show-nodes.txt",
        "sinfo-N-o.psv",
        "sinfo-N-O.txt",
    ],
)
def test_inventories_agree(slurm_local: Path, name: str) -> None:
    stage = read_nodes(slurm_local / name, lenient=False, cluster="lab")
    rows = sorted((r["node"], r["num_gpus"]) for r in stage.nodes.to_pylist())
    assert rows == [("n1", 8), ("n2", 8), ("n3", 8), ("n4", 8)]
    partitions = {r["partitions"] for r in stage.nodes.to_pylist()}
    assert partitions == {"gpu,scavenger,urgent"}


@pytest.mark.parametrize("columns", [(0, 1, 8), (0, 8)])
def test_sinfo_without_header(slurm_local: Path, tmp_path: Path, columns: tuple[int, ...]) -> None:
    # sinfo -h -N -o '%N|%P|%G' (or '%N|%G'): the same inventory, known by the columns' shape.
    lines = (slurm_local / "sinfo-N-o.psv").read_text().splitlines()[1:]
    path = tmp_path / "sinfo.txt"
    path.write_text("".join("|".join(line.split("|")[i] for i in columns) + "\n" for line in lines))
    assert path.read_text().startswith("n1|gpu*|gpu:8\n" if len(columns) == 3 else "n1|gpu:8\n")
    stage = read_nodes(path, lenient=False, cluster="lab")
    rows = sorted((r["node"], r["num_gpus"]) for r in stage.nodes.to_pylist())
    assert rows == [("n1", 8), ("n2", 8), ("n3", 8), ("n4", 8)]
    assert stage.rows_read == len(lines)
    if len(columns) == 3:
        assert {r["partitions"] for r in stage.nodes.to_pylist()} == {"gpu,scavenger,urgent"}


def test_sinfo_long_without_gres_is_refused(slurm_local: Path) -> None:
    with pytest.raises(UnknownFormat):
        read_nodes(slurm_local / "sinfo-N-l.txt", lenient=False, cluster="lab")


@pytest.mark.parametrize(
    ("gres", "expected"),
    [
        ("gpu:8", GresGpus(num_gpus=8, gpu_type=None)),
        ("gpu:a100:4(S:0-1),gpu:h100:4", GresGpus(num_gpus=8, gpu_type="a100,h100")),
        ("(null)", GresGpus(num_gpus=0, gpu_type=None)),
        ("gpu:a100:2,shard:8", GresGpus(num_gpus=2, gpu_type="a100")),
    ],
)
def test_gres_counts(gres: str, expected: GresGpus) -> None:
    assert gpus_from_gres(gres) == expected


_RANGES = st.lists(st.tuples(st.integers(0, 120), st.integers(0, 5)), min_size=1, max_size=3)


@settings(deadline=None)  # each example opens DuckDB: timing depends on the machine's load
@given(
    st.lists(
        st.one_of(
            # A bracketed item: prefix, ranges (a single number when the span is 0), padding, suffix.
            st.tuples(
                st.sampled_from(["n", "gpu-", "rack1-n", ""]),
                _RANGES,
                st.integers(1, 3),
                st.sampled_from(["", "-ib", ".ib0"]),
            ),
            st.sampled_from(["login1", "gpu-a01-ib", "n7"]),  # a plain name
        ),
        min_size=1,
        max_size=4,
    )
)
def test_hostlist_sql_agrees_with_python(
    items: list[tuple[str, list[tuple[int, int]], int, str] | str],
) -> None:
    parts, expected = [], []
    for item in items:
        if isinstance(item, str):
            parts.append(item)
            expected.append(item)
            continue
        prefix, ranges, width, suffix = item
        texts = []
        for low, span in ranges:
            high = low + span
            first, last = str(low).zfill(width), str(high).zfill(width)
            texts.append(first if not span else f"{first}-{last}")
            expected += [f"{prefix}{str(i).zfill(width)}{suffix}" for i in range(low, high + 1)]
        parts.append(f"{prefix}[{','.join(texts)}]{suffix}")
    text = ",".join(parts)
    assert expand_hostlist(text) == expected
    con = duckdb.connect()
    con.execute(HOSTLIST_MACRO_SQL)
    assert con.execute("SELECT hostlist_expand(?)", [text]).fetchall()[0][0] == expected
    con.close()


def test_hostlist_forms() -> None:
    assert expand_hostlist("n[1-3,7],login1") == ["n1", "n2", "n3", "n7", "login1"]
    assert expand_hostlist("None assigned") == []
    with pytest.raises(ValueError):
        expand_hostlist("n[3-1]")


def test_sample_manifest(tmp_path: Path) -> None:
    manifest = load_manifest(SAMPLE / "manifest.toml")
    assert manifest.lineage_runs == {"long-a", "dn2", "bio-long"}
    assert manifest.interval_s("dn2") == 4
    assert manifest.diverged[0].after_s == 1796035740  # 2026-11-30T10:49:00Z


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('[runs]\nmatch = "tag:(?P<run>x)"', "must start with"),
        ('[runs]\nmatch = "comment:run=(x)"', "no group named 'run'"),
        ('[[releases]]\nmodel = "m"\nruns = []', "non-empty list"),
        ("[run_settings.a]\ncheckpoint_interval_s = -5", "positive"),
        ("[bogus]\n", "unknown section"),
        ("[[releases]\n", "not valid TOML"),
    ],
)
def test_bad_manifests(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "m.toml"
    path.write_text(text)
    with pytest.raises(ManifestError, match=message):
        load_manifest(path)


def test_unknown_run_gets_closest_name(fresh_db, tmp_path: Path) -> None:
    manifest = tmp_path / "m.toml"
    manifest.write_text('[[releases]]\nmodel = "m"\nruns = ["long-aa"]\n')
    with pytest.raises(UnknownIdError) as info:
        ingest_slurm(
            None, SlurmInputs(sacct=SAMPLE / "sacct-X-D-wide.psv", manifest=manifest),
            con=fresh_db, strict_manifest=True,
        )  # fmt: skip
    assert "long-a" in info.value.choices
    assert fresh_db.execute("SELECT count(*) FROM jobs").fetchall() == [(0,)]  # atomic
