"""The collect benchmark's recorded Slurm answers every query as Slurm would, and the bench runs.

Its ``scontrol`` once printed the node list for ``scontrol -d -o show job`` too, so ``gpuyield
collect`` refused the capture and the benchmark stopped. The job detail is now generated from the
day's RUNNING jobs in the format of the real recording and read back with the ingest's parser.
"""

from __future__ import annotations

import subprocess
from collections import defaultdict
from pathlib import Path

import duckdb
import pytest
from bench.gen_slurm import ClusterSpec, GenParams, cached

from bench import collect
from gpuyield.hostlist import expand_hostlist
from gpuyield.ingest.jobs_detail import read_jobs_detail

_PARAMS = GenParams(num_jobs=3000, window_days=2.0, cluster=ClusterSpec(num_nodes=400))
_RECORDING = (
    Path(__file__).resolve().parents[1]
    / "ingest"
    / "fixtures"
    / "jobs-detail"
    / "scontrol-d-o-show-job.txt"
)


@pytest.fixture(scope="module")
def day(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, collect.Generated, int]:
    root = tmp_path_factory.mktemp("collect-bench")
    data = cached(_PARAMS, root / "data")
    out = root / "captures"
    out.mkdir()
    day_end_s = _PARAMS.window_end_s
    collect.split_captures(data, out, day_end_s - collect.DAY_S)
    return out, data, day_end_s


def test_scontrol_answers_each_query_with_its_own_capture(
    day: tuple[Path, collect.Generated, int],
) -> None:
    out, data, day_end_s = day
    bin_dir = collect.recorded_slurm(out, data, day_end_s)
    scontrol = str(bin_dir / "scontrol")
    jobs = subprocess.run([scontrol, "-d", "-o", "show", "job"], capture_output=True, text=True)
    nodes = subprocess.run([scontrol, "-o", "show", "nodes"], capture_output=True, text=True)
    assert jobs.stdout.startswith("JobId=")
    assert nodes.stdout == (data.out_dir / "nodes.txt").read_text()


def test_job_detail_holds_each_running_jobs_gpus_once(
    day: tuple[Path, collect.Generated, int],
) -> None:
    out, _, day_end_s = day
    path = out / "jobs-detail.txt"
    path.write_text(collect.jobs_detail_text(out / "day.psv", day_end_s))
    stage = read_jobs_detail(path, tz="UTC", lenient=False, cluster="c")
    lines = (out / "day.psv").read_text().splitlines()
    names = lines[0].split("|")
    running = [dict(zip(names, line.split("|"), strict=True)) for line in lines[1:]]
    running = [row for row in running if row["State"] == "RUNNING"]
    assert stage.rows_read == len(running) > 0
    held: dict[str, list[tuple[str, int]]] = defaultdict(list)
    for job, node, gpu in zip(
        *stage.gpus.select(["job_id_raw", "node", "gpu"]).to_pydict().values(), strict=True
    ):
        held[job].append((node, gpu))
    for row in running:
        gpus = int(row["AllocTRES"].split("gres/gpu=")[1].split(",")[0])
        nodes = expand_hostlist(row["NodeList"])
        assert len(held[row["JobIDRaw"]]) == gpus
        assert {node for node, _ in held[row["JobIDRaw"]]} == set(nodes)
    every = [pair for pairs in held.values() for pair in pairs]
    assert len(every) == len(set(every))  # no GPU held by two jobs
    assert max(gpu for _, gpu in every) < _PARAMS.cluster.gpus_per_node
    assert set(stage.gpus.column("seen_s").to_pylist()) == {day_end_s}


def test_job_records_have_the_recordings_fields(day: tuple[Path, collect.Generated, int]) -> None:
    out, _, day_end_s = day
    ours = collect.jobs_detail_text(out / "day.psv", day_end_s).splitlines()[0]
    real = _RECORDING.read_text().splitlines()[0]

    def keys(line: str) -> list[str]:
        return [part.split("=", 1)[0] for part in line.split() if "=" in part]

    assert keys(ours) == keys(real)


def test_the_bench_runs_end_to_end(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(collect, "REPEATS", 1)
    figures = collect.bench_size(_PARAMS, tmp_path)
    assert figures["jobs_new"] + figures["jobs_updated"] > 0
    assert figures["collect"]["wall_s"] > 0 and figures["day_alone"]["wall_s"] > 0
    # The collect stored the GPUs its job detail named.
    store = tmp_path / "collect" / _PARAMS.cache_key() / "collected.duckdb"
    with duckdb.connect(str(store), read_only=True) as con:
        (held,) = con.execute("SELECT count(*) FROM job_gpus").fetchone() or (0,)
    assert held > 0
