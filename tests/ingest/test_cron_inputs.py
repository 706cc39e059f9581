"""File ingest that survives a daily cron (issue 13): new --until, stdin, .gz/.zst, manifests
naming runs not in the data yet, and the small things a daily user hits."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path

import pytest
import zstandard

from gpuyield.errors import UnknownIdError
from gpuyield.ingest.slurm import SlurmInputs, ingest_slurm
from gpuyield.report.summary import build_report

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "slurm-lab"
UNTIL_S = 1_796_036_400  # 2026-11-30T11:00:00Z


def _inputs(**extra: Path) -> SlurmInputs:
    return SlurmInputs(
        sacct=extra.get("sacct", EXAMPLES / "sacct-X-D-wide.psv"),
        events=EXAMPLES / "sacctmgr-event-format.psv",
        nodes=EXAMPLES / "scontrol-show-nodes-oneliner.txt",
        manifest=extra.get("manifest"),
    )


def _cli(*args: str | Path, stdin: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "gpuyield", *map(str, args)],
        input=stdin,
        capture_output=True,
        check=False,
    )


def test_unchanged_inputs_under_a_new_until_are_fine(tmp_path: Path) -> None:
    db = tmp_path / "db.duckdb"
    ingest_slurm(db, _inputs(), since_s=UNTIL_S - 3600, until_s=UNTIL_S - 600)
    again = ingest_slurm(db, _inputs(), since_s=UNTIL_S - 3600, until_s=UNTIL_S)
    # Nothing is read again; the unchanged sacct capture is carried forward to the new --until
    # (its running job holds its GPUs to it, as the coverage does: issue 25), not refused.
    assert all(f.skipped for f in again.files if f.source != "slurm.sacct")
    (sacct,) = [f for f in again.files if f.source == "slurm.sacct"]
    assert not sacct.skipped and sacct.rows_read == 39
    report = build_report(db)
    assert report.window_end_s == UNTIL_S
    once = tmp_path / "once.duckdb"
    ingest_slurm(once, _inputs(), since_s=UNTIL_S - 3600, until_s=UNTIL_S)
    assert report.categories == build_report(once).categories


@pytest.mark.parametrize("kind", ["gz", "zst", "stdin"])
def test_compressed_and_stdin_inputs_give_the_same_ledger(tmp_path: Path, kind: str) -> None:
    plain = tmp_path / "plain.duckdb"
    ingest_slurm(plain, _inputs(), until_s=UNTIL_S)
    data = (EXAMPLES / "sacct-X-D-wide.psv").read_bytes()
    db = tmp_path / f"{kind}.duckdb"
    common = ("ingest", "slurm", "--db", db, "--events", EXAMPLES / "sacctmgr-event-format.psv",
              "--nodes", EXAMPLES / "scontrol-show-nodes-oneliner.txt",
              "--until", "2026-11-30T11:00:00", "--quiet")  # fmt: skip
    if kind == "stdin":
        proc = _cli(*common, "--sacct", "-", stdin=data)
        source = "-"
    else:
        packed = tmp_path / f"sacct.psv.{kind}"
        packed.write_bytes(
            gzip.compress(data) if kind == "gz" else zstandard.ZstdCompressor().compress(data)
        )
        proc = _cli(*common, "--sacct", packed)
        source = str(packed)
    assert proc.returncode == 0, proc.stderr.decode()
    assert proc.stdout == b""  # --quiet
    got, expected = build_report(db).to_dict(), build_report(plain).to_dict()
    assert {k: got[k] for k in ("categories", "subcategories", "window", "coverage")} == {
        k: expected[k] for k in ("categories", "subcategories", "window", "coverage")
    }
    assert source in [s["path"] for s in got["sources"]]  # provenance names what was given


def test_a_bad_line_in_a_compressed_file_names_that_file(tmp_path: Path) -> None:
    text = (EXAMPLES / "sacct-X-D-wide.psv").read_text().replace("|COMPLETED|", "|EXPLODED|", 1)
    packed = tmp_path / "sacct.psv.gz"
    packed.write_bytes(gzip.compress(text.encode()))
    proc = _cli("ingest", "slurm", "--db", tmp_path / "db.duckdb", "--sacct", packed)
    assert proc.returncode == 1
    assert f"{packed}:" in proc.stderr.decode().replace("\n", "")
    assert not (tmp_path / "db.duckdb").exists()  # a failed first ingest leaves no store


def test_a_manifest_naming_runs_not_in_the_data_warns(tmp_path: Path) -> None:
    manifest = tmp_path / "manifest.toml"
    manifest.write_text(
        (EXAMPLES / "manifest.toml")
        .read_text()
        .replace('runs = ["long-a", "dn2"]', 'runs = ["long-a", "dn2", "long-q", "next-run"]')
    )
    db = tmp_path / "db.duckdb"
    summary = ingest_slurm(db, _inputs(manifest=manifest), until_s=UNTIL_S)
    (warning,) = [w for w in summary.warnings if "not in the data" in w]
    assert "'long-q' (closest: 'long-" in warning and "'next-run'" in warning
    with pytest.raises(UnknownIdError, match="long-q"):
        ingest_slurm(tmp_path / "strict.duckdb", _inputs(manifest=manifest), until_s=UNTIL_S,
                     strict_manifest=True)  # fmt: skip


def test_version_and_flags_that_do_nothing_together(tmp_path: Path) -> None:
    version = _cli("--version")
    assert version.returncode == 0 and version.stdout.startswith(b"gpuyield ")
    for args, message in (
        (("--png", tmp_path), "--png works only with --html"),
        (("--by", "user", "--html", tmp_path / "r.html"), "--by does not apply to --html"),
        (("--top", "3"), "--top works only with --by"),
    ):
        proc = _cli("report", "--db", tmp_path / "none.duckdb", *args)
        # Options that do not go together: a usage error (docs/cli.md), exit 2.
        assert proc.returncode == 2 and message in proc.stderr.decode(), proc.stderr


def test_the_report_json_has_coverage(tmp_path: Path) -> None:
    db = tmp_path / "db.duckdb"
    ingest_slurm(db, _inputs(), since_s=UNTIL_S - 3600, until_s=UNTIL_S)
    proc = _cli("report", "--db", db, "--json")
    data = json.loads(proc.stdout)
    assert data["coverage"] == [
        {"cluster": "lab", "start": "2026-11-30T10:00:00Z", "end": "2026-11-30T11:00:00Z"}
    ]
    assert data["not_captured"] == []


def test_several_clusters_in_one_store_report_per_cluster_and_together(tmp_path: Path) -> None:
    """The bundled capture twice, once renamed lab2: each cluster's row is the one-cluster report."""
    from gpuyield.report.summary import build_report_with_breakdown

    second = tmp_path / "lab2"
    second.mkdir()
    for name in ("sacct-X-D-wide.psv", "sacctmgr-event-format.psv"):
        text = (EXAMPLES / name).read_text()
        (second / name).write_text(text.replace("|lab|", "|lab2|").replace("\nlab|", "\nlab2|"))
    db, alone = tmp_path / "both.duckdb", tmp_path / "alone.duckdb"
    ingest_slurm(alone, _inputs(), since_s=UNTIL_S - 3600, until_s=UNTIL_S)
    ingest_slurm(db, _inputs(), since_s=UNTIL_S - 3600, until_s=UNTIL_S)
    ingest_slurm(
        db,
        SlurmInputs(
            sacct=second / "sacct-X-D-wide.psv",
            events=second / "sacctmgr-event-format.psv",
            nodes=EXAMPLES / "scontrol-show-nodes-oneliner.txt",
        ),
        since_s=UNTIL_S - 3600,
        until_s=UNTIL_S,
        cluster="lab2",
    )
    one = build_report(alone)
    result = build_report_with_breakdown(db, by="cluster")
    both, cut = result.report, result.breakdown
    assert cut is not None and [r.key for r in cut.rows] == ["lab", "lab2"]
    for row in cut.rows:
        assert row.categories == pytest.approx(one.categories)
    assert both.installed_gpu_seconds == 2 * one.installed_gpu_seconds
    assert [c.cluster for c in both.coverage] == ["lab", "lab2"]
