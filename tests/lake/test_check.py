"""``gpuyield lake check``: a sound lake passes; a changed, missing or miscounted file fails it
with exit 3, naming the file; a file no manifest lists is a warning."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from typer.testing import CliRunner

from gpuyield.cli import app
from gpuyield.lake import layout
from gpuyield.lake.check import check_lake
from gpuyield.lake.layout import read_manifests
from tests.lake.data import Ingested


def _copy(sample: Ingested, tmp_path: Path) -> Path:
    lake = tmp_path / "lake"
    shutil.copytree(sample.lake, lake)
    return lake


def _check(lake: Path) -> tuple[int, dict[str, object]]:
    result = CliRunner().invoke(app, ["lake", "check", "--lake", str(lake), "--json"])
    return result.exit_code, json.loads(result.output)


def test_a_sound_lake_passes(sample: Ingested) -> None:
    code, found = _check(sample.lake)
    assert code == 0, found
    assert found["ok"] is True and found["problems"] == []
    assert found["clusters"] == ["lab"] and found["writers"] == 1
    (manifest,) = read_manifests(sample.lake)
    assert found["files"] == len(manifest.files)
    assert found["rows"] == sum(f.rows for f in manifest.files)


def test_a_changed_byte_fails_the_check_naming_the_file(sample: Ingested, tmp_path: Path) -> None:
    lake = _copy(sample, tmp_path)
    (manifest,) = read_manifests(lake)
    target = next(f for f in manifest.files if f.table == "jobs")
    path = lake / target.path
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))
    code, found = _check(lake)
    assert code == 3
    assert found["problems"] == [
        {
            "severity": "error",
            "where": target.path,
            "message": "its bytes changed since it was written (SHA-256 differs)",
        }
    ]


def test_a_missing_file_and_a_wrong_row_count_fail(sample: Ingested, tmp_path: Path) -> None:
    lake = _copy(sample, tmp_path)
    manifest_path = next(layout.writers_dir(lake).glob("*.json"))
    document = json.loads(manifest_path.read_text())
    gone, miscounted = document["files"][0], document["files"][1]
    (lake / gone["path"]).unlink()
    miscounted["rows"] += 1
    manifest_path.write_text(json.dumps(document))
    result = check_lake(lake)
    assert not result.ok
    found = {(p.where, p.message) for p in result.problems}
    assert (gone["path"], "is listed but missing") in found
    assert (
        miscounted["path"],
        f"holds {miscounted['rows'] - 1} rows, the manifest says {miscounted['rows']}",
    ) in found


def test_a_file_no_manifest_lists_is_only_a_warning(sample: Ingested, tmp_path: Path) -> None:
    lake = _copy(sample, tmp_path)
    (manifest,) = read_manifests(lake)
    stray = lake / "jobs" / "cluster=lab" / "day=2026-11-30" / "part-left-over.parquet"
    shutil.copyfile(lake / next(f.path for f in manifest.files if f.table == "jobs"), stray)
    code, found = _check(lake)
    assert code == 0
    assert [p["severity"] for p in found["problems"]] == ["warning"]  # type: ignore[index,union-attr]
    assert "part-left-over.parquet" in str(found["problems"])


def test_a_file_in_the_wrong_partition_fails(sample: Ingested, tmp_path: Path) -> None:
    lake = _copy(sample, tmp_path)
    manifest_path = next(layout.writers_dir(lake).glob("*.json"))
    document = json.loads(manifest_path.read_text())
    jobs = next(f for f in document["files"] if f["table"] == "jobs")
    jobs["day"] += 1
    manifest_path.write_text(json.dumps(document))
    result = check_lake(lake)
    assert [p.message for p in result.problems] == [
        "is not in its partition jobs/cluster=lab/day=2026-12-01"
    ]


def test_no_lake_is_an_error_not_a_failed_check(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["lake", "check", "--lake", str(tmp_path / "none")])
    assert result.exit_code == 1
    assert "no lake at" in result.output
