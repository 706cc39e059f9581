"""Reading utilization: Prometheus responses in, clear errors for anything else, idempotent."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gpuyield.errors import InputError, ParseError
from gpuyield.ingest.utilization import ingest_utilization
from gpuyield.ingest.utilization.promjson import node_name

FIXTURE = Path(__file__).parent / "fixtures" / "utilization" / "dcgm_query_range.json"


def _write(tmp_path: Path, document: object) -> Path:
    path = tmp_path / "r.json"
    path.write_text(json.dumps(document))
    return path


def test_same_file_twice_is_a_no_op(tmp_path: Path) -> None:
    db = tmp_path / "db.duckdb"
    first = ingest_utilization(db, prom_json=[FIXTURE])
    again = ingest_utilization(db, prom_json=[FIXTURE])
    assert first[0].samples == 16 * 120 - 10 and not first[0].skipped
    assert again[0].skipped and again[0].ingest_id == first[0].ingest_id


@pytest.mark.parametrize(
    ("document", "field"),
    [
        ({"status": "error", "error": "bad query"}, "status"),
        ({"status": "success", "data": {"resultType": "vector", "result": []}}, "data.resultType"),
        (
            {
                "status": "success",
                "data": {
                    "resultType": "matrix",
                    "result": [{"metric": {"__name__": "DCGM_FI_DEV_GPU_UTIL", "gpu": "0"}}],
                },
            },
            "data.result[0].metric",
        ),
        (
            {
                "status": "success",
                "data": {
                    "resultType": "matrix",
                    "result": [
                        {
                            "metric": {
                                "__name__": "DCGM_FI_DEV_GPU_UTIL",
                                "Hostname": "n1",
                                "gpu": "0",
                            },
                            "values": [[1767225660, "-3"]],
                        }
                    ],
                },
            },
            "data.result[0].values[0]",
        ),
    ],
)
def test_bad_responses_name_the_field(tmp_path: Path, document: object, field: str) -> None:
    with pytest.raises(ParseError) as caught:
        ingest_utilization(tmp_path / "db.duckdb", prom_json=[_write(tmp_path, document)])
    assert caught.value.field == field
    assert caught.value.path is not None and caught.value.path.endswith("r.json")


def test_a_ratio_given_as_percent_is_refused(tmp_path: Path) -> None:
    series = {
        "metric": {"__name__": "DCGM_FI_PROF_GR_ENGINE_ACTIVE", "Hostname": "n1", "gpu": "0"},
        "values": [[1767225660, "87"]],
    }
    document = {"status": "success", "data": {"resultType": "matrix", "result": [series]}}
    with pytest.raises(InputError, match="above 1"):
        ingest_utilization(tmp_path / "db.duckdb", prom_json=[_write(tmp_path, document)])


def test_host_labels_become_slurm_node_names() -> None:
    assert node_name("gpu-017.cluster.example.org") == "gpu-017"
    assert node_name("gpu-017:9400") == "gpu-017"
    assert node_name("10.140.1.10:9400") == "10.140.1.10"


def use_python_reader(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make DuckDB's reader refuse every file, as it does a file with a fault: the ingest then
    reads the files again in Python (the reader that names faults)."""
    from gpuyield.ingest.utilization import duckjson, stage

    columns = ", ".join(
        f"error('test: read in Python')::{column.split()[1]} AS {column.split()[0]}"
        if i == 0
        else f"NULL::{column.split()[1]} AS {column.split()[0]}"
        for i, column in enumerate(c.strip() for c in stage.STAGE_COLUMNS.split(","))
    )
    monkeypatch.setattr(duckjson, "stage_sql", lambda paths, names: f"SELECT {columns}")


def test_duckdb_reader_stores_what_the_python_reader_stores(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two metrics in one file, labelled and unlabelled series of one GPU taking turns: the
    pivoted path; both readers stage the same series, so the stores are equal row for row."""
    fast = tmp_path / "fast.duckdb"
    ingest_utilization(fast, prom_json=[FIXTURE])
    use_python_reader(monkeypatch)
    slow = tmp_path / "slow.duckdb"
    ingest_utilization(slow, prom_json=[FIXTURE])
    assert len(_stored(fast)) == 16 * 120 - 10
    assert _stored(fast) == _stored(slow)
    assert _groups(fast) == _groups(slow)


def _stored(db: Path) -> list[tuple[object, ...]]:
    from gpuyield.store import connect

    con = connect(db, read_only=True)
    try:
        return con.execute(
            "SELECT * EXCLUDE (ingest_id) FROM gpu_samples ORDER BY node, gpu, t_s"
        ).fetchall()
    finally:
        con.close()


def _groups(db: Path) -> list[tuple[object, ...]]:
    from gpuyield.store import connect

    con = connect(db, read_only=True)
    try:
        return con.execute("SELECT * FROM sample_groups ORDER BY ALL").fetchall()
    finally:
        con.close()


def _one_metric_of_n1(tmp_path: Path, *, repeat_a_point: bool = False) -> Path:
    """The fixture's graphics-engine series of node n1 only: one series per GPU, no pivot."""
    document = json.loads(FIXTURE.read_text())
    result = [
        s
        for s in document["data"]["result"]
        if s["metric"]["__name__"] == "DCGM_FI_DEV_GPU_UTIL"
        and s["metric"]["Hostname"].startswith("n1.")
    ]
    if repeat_a_point:
        result[0]["values"].insert(1, result[0]["values"][0])
    path = tmp_path / f"n1-util{'-repeat' if repeat_a_point else ''}.json"
    path.write_text(json.dumps({**document, "data": {**document["data"], "result": result}}))
    return path


def test_one_metric_loads_without_the_pivot_and_stores_what_python_stores(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _one_metric_of_n1(tmp_path)
    fast = tmp_path / "fast.duckdb"
    ingest_utilization(fast, prom_json=[path])
    use_python_reader(monkeypatch)
    slow = tmp_path / "slow.duckdb"
    ingest_utilization(slow, prom_json=[path])
    assert len(_stored(fast)) == 8 * 120 - 10  # GPU 3 misses ten samples
    assert _stored(fast) == _stored(slow)


def test_a_repeated_time_in_one_series_is_one_sample(tmp_path: Path) -> None:
    """Without the pivot a repeat would count a GPU twice: the check sends it to the reader
    that merges it."""
    once = tmp_path / "once.duckdb"
    ingest_utilization(once, prom_json=[_one_metric_of_n1(tmp_path)])
    twice = tmp_path / "twice.duckdb"
    ingest_utilization(twice, prom_json=[_one_metric_of_n1(tmp_path, repeat_a_point=True)])
    assert _stored(twice) == _stored(once)


def _split_by_metric(tmp_path: Path) -> list[Path]:
    document = json.loads(FIXTURE.read_text())
    paths = []
    for metric in ("DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE"):
        result = [s for s in document["data"]["result"] if s["metric"]["__name__"] == metric]
        path = tmp_path / f"{metric}.json"
        path.write_text(json.dumps({**document, "data": {**document["data"], "result": result}}))
        paths.append(path)
    return paths


def test_one_file_per_metric_gives_one_row_per_gpu_and_time(tmp_path: Path) -> None:
    from gpuyield.store import connect

    db = tmp_path / "db.duckdb"
    results = ingest_utilization(db, prom_json=_split_by_metric(tmp_path))
    con = connect(db, read_only=True)
    rows = con.execute(
        "SELECT count(*), count(active), count(tensor_active) FROM gpu_samples"
    ).fetchall()
    con.close()
    assert rows == [(16 * 120 - 10,) * 3]
    assert sum(r.samples for r in results) == 16 * 120 - 10


def test_a_later_capture_of_the_same_gpus_and_times_replaces_the_earlier(tmp_path: Path) -> None:
    from gpuyield.store import connect

    db = tmp_path / "db.duckdb"
    ingest_utilization(db, prom_json=[FIXTURE])
    document = json.loads(FIXTURE.read_text())
    for series in document["data"]["result"]:
        value = "50" if series["metric"]["__name__"] == "DCGM_FI_DEV_GPU_UTIL" else "0.2"
        series["values"] = [[t, value] for t, _ in series["values"]]
    later = _write(tmp_path, document)
    ingest_utilization(db, prom_json=[later])
    con = connect(db, read_only=True)
    rows = con.execute(
        "SELECT count(*), min(active), max(active), max(tensor_active) FROM gpu_samples"
    ).fetchall()
    con.close()
    assert rows == [(16 * 120 - 10, 0.5, 0.5, 0.2)]


@pytest.mark.parametrize(
    ("args", "message", "status"),
    [
        ([], "no utilization source given", 1),
        # Options that do not go together and values that do not parse: usage (docs/cli.md).
        (["--prometheus", "http://127.0.0.1:9"], "--prometheus needs --since and --until", 2),
        (["--prom-json", str(FIXTURE), "--step", "soon"], "'--step': not a duration", 2),
    ],
)
def test_cli_says_what_is_wrong(tmp_path: Path, args: list[str], message: str, status: int) -> None:
    from typer.testing import CliRunner

    from gpuyield.cli import app

    result = CliRunner().invoke(
        app, ["ingest", "utilization", "--db", str(tmp_path / "db.duckdb"), *args]
    )
    assert result.exit_code == status
    assert message in result.output
    assert "Traceback" not in result.output


def test_samples_add_up_so_any_earlier_ingest_of_a_file_makes_it_a_no_op(tmp_path: Path) -> None:
    """Unlike Slurm's captures (only the latest ingest of a kind counts), utilization files add
    up: A, then B, then A again leaves A skipped; A read at another step is read again."""
    from gpuyield.ingest.source import InputContent, already_ingested
    from gpuyield.store import connect

    db = tmp_path / "db.duckdb"
    (first,) = ingest_utilization(db, prom_json=[FIXTURE])
    (other,) = ingest_utilization(db, prom_json=_split_by_metric(tmp_path)[:1])
    (again,) = ingest_utilization(db, prom_json=[FIXTURE])
    assert not other.skipped and other.ingest_id > first.ingest_id
    assert again.skipped and again.ingest_id == first.ingest_id
    assert again.outcome.skipped and again.outcome.source == "utilization"
    con = connect(db, read_only=True)
    try:
        row = con.execute(
            "SELECT source, path, sha256, size_bytes, rows_read, rows_rejected, rows_skipped,"
            " as_of_s, options FROM ingests WHERE ingest_id = ?",
            [first.ingest_id],
        ).fetchall()[0]
        # The latest-only check Slurm's captures use would have read A again (B came after it).
        content = InputContent(path=first.path, sha256=first.sha256)
        latest = already_ingested(con, "utilization", content, row[-1])
    finally:
        con.close()
    assert row[:-1] == ("utilization", str(FIXTURE), first.sha256, None, first.samples, 0, 0, None)
    assert latest is None
    (restepped,) = ingest_utilization(db, prom_json=[FIXTURE], step_s=30)
    assert not restepped.skipped and restepped.ingest_id > other.ingest_id


def test_several_answers_in_one_file_are_the_answers_together(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A large capture saved as one answer per group of nodes, one a line (NDJSON, what
    ``simulate --utilization`` writes): the same samples as the single answer, on both readers."""
    document = json.loads(FIXTURE.read_text())
    by_node: dict[str, list[object]] = {}
    for series in document["data"]["result"]:
        by_node.setdefault(series["metric"]["Hostname"], []).append(series)
    lines = [
        json.dumps({**document, "data": {**document["data"], "result": result}})
        for result in by_node.values()
    ]
    assert len(lines) == 2
    several = tmp_path / "several.json"
    several.write_text("\n".join(lines) + "\n")
    one = tmp_path / "one.duckdb"
    ingest_utilization(one, prom_json=[FIXTURE])
    fast = tmp_path / "fast.duckdb"
    ingest_utilization(fast, prom_json=[several])
    use_python_reader(monkeypatch)
    slow = tmp_path / "slow.duckdb"
    ingest_utilization(slow, prom_json=[several])
    assert _stored(one) == _stored(fast) == _stored(slow)
    assert len(_stored(one)) == 16 * 120 - 10


def test_files_read_in_batches_store_what_one_batch_stores(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A large capture is read, stored and attributed a batch of files at a time (memory holds
    one batch): a file per metric of the same GPUs and times merges as it does in one batch."""
    import gpuyield.ingest.utilization as utilization

    paths = _split_by_metric(tmp_path)
    whole = tmp_path / "whole.duckdb"
    ingest_utilization(whole, prom_json=paths)
    monkeypatch.setattr(utilization, "BATCH_BYTES", 1)  # each file a batch of its own
    batched = tmp_path / "batched.duckdb"
    results = ingest_utilization(batched, prom_json=paths)
    assert [r.samples for r in results] == [16 * 120 - 10] * 2
    assert _stored(batched) == _stored(whole)
    assert _groups(batched) == _groups(whole)
    assert all(row[7] is not None and row[8] is not None for row in _stored(batched))


def _gpu_names(db: Path) -> list[tuple[object, ...]]:
    from gpuyield.store import connect

    con = connect(db, read_only=True)
    try:
        return con.execute("SELECT * EXCLUDE (ingest_id) FROM gpu_names ORDER BY ALL").fetchall()
    finally:
        con.close()


def test_both_readers_keep_the_same_gpu_models(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """DCGM's ``modelName`` label, kept by DuckDB's reader as it reads the samples, is what the
    labels give when read on their own (the Python reader's way): host names made Slurm's, empty
    labels ignored, and the label of a series of a metric the ingest does not read counted too."""

    def series(host: str, metric: str, model: str) -> dict[str, object]:
        labels = {"__name__": metric, "Hostname": host, "gpu": "0", "modelName": model}
        return {"metric": labels, "values": [[1_767_225_600, "0.5"]]}

    samples = _write(
        tmp_path,
        {
            "status": "success",
            "data": {
                "resultType": "matrix",
                "result": [
                    series("n1.cluster.local", "DCGM_FI_PROF_GR_ENGINE_ACTIVE", "NVIDIA H100 PCIe"),
                    series("n2:9400", "DCGM_FI_PROF_GR_ENGINE_ACTIVE", ""),
                    series("n3", "DCGM_FI_DEV_FB_USED", "NVIDIA A100-SXM4-80GB"),
                    series("10.0.0.4:9400", "DCGM_FI_PROF_SM_ACTIVE", "NVIDIA L40S"),
                ],
            },
        },
    )
    fast = tmp_path / "fast.duckdb"
    ingest_utilization(fast, prom_json=[samples])
    use_python_reader(monkeypatch)
    slow = tmp_path / "slow.duckdb"
    ingest_utilization(slow, prom_json=[samples])
    assert [row[1:3] for row in _gpu_names(fast)] == [
        ("10.0.0.4", "NVIDIA L40S"),
        ("n1", "NVIDIA H100 PCIe"),
        ("n3", "NVIDIA A100-SXM4-80GB"),
    ]
    assert _gpu_names(fast) == _gpu_names(slow)
