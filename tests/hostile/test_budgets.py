"""Reader budgets (issue 26): compressed inputs that inflate past a ratio are refused while they
inflate, and the small text files gpuyield reads whole (manifests, scenarios) are regular files
of bounded size, refused cleanly otherwise (a FIFO, /dev/zero, a huge file, bytes not UTF-8).
bench/hostile.py measures the cost of the worst of them at full size.
"""

from __future__ import annotations

import gzip
import os
import zlib
from pathlib import Path

import pytest

from gpuyield.errors import InputError
from gpuyield.ingest import _files
from tests.hostile.inputs import run_cli, snapshot


def gzip_bomb(path: Path, inflated_bytes: int) -> Path:
    """A gzip file of ``inflated_bytes`` newlines, written a megabyte at a time."""
    chunk = b"\n" * (1 << 20)
    with gzip.open(path, "wb", compresslevel=9) as out:
        for _ in range(inflated_bytes >> 20):
            out.write(chunk)
    return path


def test_a_gzip_bomb_is_refused_while_it_inflates(base_db: Path, tmp_path: Path) -> None:
    # About 1.4 MB that would inflate to 1.4 GB: refused at 280 MB (200x), in seconds.
    bomb = gzip_bomb(tmp_path / "sacct.psv.gz", 1400 << 20)
    assert 1_000_000 < bomb.stat().st_size < 2_000_000
    before = snapshot(base_db)
    outcome = run_cli(["ingest", "slurm", "--db", str(base_db), "--sacct", str(bomb)])
    assert outcome.traceback is None and outcome.exit_code == 1, outcome.output
    said = " ".join(outcome.output.split())
    assert said.startswith(f"error: {bomb}: inflates to more than") and "bomb" in said
    assert "hint:" in said
    assert snapshot(base_db) == before


def test_a_genuine_compressed_capture_still_reads(tmp_path: Path) -> None:
    source = Path(__file__).resolve().parents[2] / "examples/slurm-lab/sacct-X-D-wide.psv"
    given = tmp_path / "sacct.psv.gz"
    given.write_bytes(gzip.compress(source.read_bytes()))
    outcome = run_cli(["ingest", "slurm", "--db", str(tmp_path / "s.duckdb"), "--sacct",
                       str(given), "--until", "2026-11-30T11:00:00"])  # fmt: skip
    assert outcome.exit_code == 0, outcome.output


def test_in_memory_gzip_is_bounded_before_it_inflates() -> None:
    bomb = zlib.compressobj(9, zlib.DEFLATED, 31)
    data = b"".join([bomb.compress(b"\0" * (1 << 20)) for _ in range(300)]) + bomb.flush()
    with pytest.raises(InputError, match="inflates to more than"):
        _files.decompress_bounded(data, what="JS1 document")
    assert _files.decompress_bounded(gzip.compress(b'{"ok": 1}'), what="x") == b'{"ok": 1}'
    with pytest.raises(InputError, match="not gzip data"):
        _files.decompress_bounded(b"not gzip", what="x")


def _manifest_input(kind: str, tmp_path: Path) -> Path:
    path = tmp_path / f"{kind}.toml"
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "dev-zero":
        return Path("/dev/zero")
    elif kind == "directory":
        path.mkdir()
    elif kind == "huge":
        path.write_text("# padding\n" * 200_000)
    elif kind == "latin1":
        path.write_bytes('[runs]\nmatch = "comment:run=(?P<run>\xe9)"\n'.encode("latin-1"))
    return path


@pytest.mark.parametrize(
    ("kind", "words"),
    [
        ("fifo", "not a regular file"),
        ("dev-zero", "not a regular file"),
        ("directory", "is a directory"),
        ("huge", "larger than 1,000,000 bytes"),
        ("latin1", "not UTF-8"),
    ],
)
def test_manifests_are_bounded_regular_utf8_files(
    kind: str, words: str, base_db: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from gpuyield import tomlfile

    monkeypatch.setattr(tomlfile, "MAX_TOML_BYTES", 1_000_000)  # the budget, made small to test
    before = snapshot(base_db)
    path = _manifest_input(kind, tmp_path)
    outcome = run_cli(["ingest", "slurm", "--db", str(base_db), "--manifest", str(path)])
    assert outcome.traceback is None and outcome.exit_code == 1, outcome.output
    said = " ".join(outcome.output.split())
    assert words in said and str(path) in said and "hint:" in said, said
    assert snapshot(base_db) == before


def test_scenario_files_are_bounded_the_same_way(tmp_path: Path) -> None:
    fifo = tmp_path / "scenario.toml"
    os.mkfifo(fifo)
    outcome = run_cli(["simulate", "run", str(fifo), "--out", str(tmp_path / "out")])
    assert outcome.traceback is None and outcome.exit_code == 1, outcome.output
    assert "not a regular file" in " ".join(outcome.output.split())
