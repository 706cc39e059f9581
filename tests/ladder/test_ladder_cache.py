"""The ladder cache beside the store (``gpuyield.ladder_cache``): the same verdicts as the store,
never from a store that changed since, and a check that never fails because of it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import duckdb
from hypothesis import given, settings
from hypothesis import strategies as st

from gpuyield import ladder_cache, rungs, store
from gpuyield.families import LadderPolicy
from gpuyield.ingest.slurm import SlurmInputs, ingest_slurm
from gpuyield.launch import check_launch
from tests.ladder.conftest import WINDOW_END_S, LadderStore
from tests.ledger.timeline import SACCT_FIELDS, T0_S, Job

AT_S = T0_S + WINDOW_END_S
ASKS = [
    ("climb", 16),
    ("climb", 64),
    ("jump", 16),
    ("jump", 8),
    ("jump", 1),
    ("new", 8),
    ("zeta", 8),
]


def is_cached(db: Path) -> bool:
    """True when the cache beside ``db`` answers for the store as it is now."""
    cached = ladder_cache.open_cached(db)
    if cached is None:
        return False
    cached.body.close()
    return True


def verdicts(db: Path, at_s: int = AT_S) -> list[tuple[bool, str, str]]:
    """Every ask's exit decision and printed text (plain and JSON), by family and by run."""
    answers = [check_launch(db, family=f, gpus=g, at_s=at_s) for f, g in ASKS]
    answers += [
        check_launch(db, run=r, gpus=16, at_s=at_s) for r in ("climb-v2", "jump-b", "someone")
    ]
    said = []
    for answer in answers:
        plain, as_json = answer.printed(as_json=False), answer.printed(as_json=True)
        said.append((answer.allowed, plain.stdout + plain.stderr, as_json.stdout))
    return said


def test_the_cache_answers_as_the_store(ladder_store: LadderStore) -> None:
    db = ladder_store.db
    assert not is_cached(db)
    from_store = verdicts(db)  # the first check reads the store and writes the cache
    assert is_cached(db)
    assert verdicts(db) == from_store
    # Both against rungs.preflight on the store itself, the reference.
    con = store.connect(db, read_only=True)
    try:
        reference = [rungs.preflight(con, family=f, gpus=g, at_s=AT_S) for f, g in ASKS]
    finally:
        con.close()
    assert [v[0] for v in from_store[: len(ASKS)]] == [r.allowed for r in reference]
    assert [json.loads(v[2]) for v in from_store[: len(ASKS)]] == [r.to_dict() for r in reference]


def test_a_changed_store_is_never_answered_from_the_old_cache(
    ladder_store: LadderStore, tmp_path: Path
) -> None:
    db = ladder_store.db
    before = check_launch(db, family="jump", gpus=16, at_s=T0_S + 6000)
    assert not before.allowed and is_cached(db)  # written by that check
    repeated = check_launch(db, family="jump", gpus=16, at_s=T0_S + 6000)
    assert repeated.printed(as_json=True) == before.printed(as_json=True)
    more = tmp_path / "more.psv"
    more.write_text(
        SACCT_FIELDS + "\n" + Job(20, 5000, 5600, gpus=8, nodes="n3", run="jump-b").line() + "\n"
    )
    ingest_slurm(db, SlurmInputs(sacct=more), until_s=T0_S + 6000)
    assert not is_cached(db)  # the store's identity changed
    after = check_launch(db, family="jump", gpus=16, at_s=T0_S + 6000)
    assert after.allowed and after.result is not None and after.result.evidence is not None
    assert after.result.evidence.run == "jump-b"
    again = check_launch(db, family="jump", gpus=16, at_s=T0_S + 6000)  # the rewritten cache
    assert again.printed(as_json=True) == after.printed(as_json=True)
    assert is_cached(db)


def test_a_write_ahead_log_or_a_foreign_file_is_not_read(ladder_store: LadderStore) -> None:
    db = ladder_store.db
    check_launch(db, family="climb", gpus=16, at_s=AT_S)
    assert ladder_cache.store_identity(db) is not None
    wal = db.with_name(db.name + ".wal")
    wal.write_bytes(b"")
    try:
        assert ladder_cache.store_identity(db) is None
        assert not is_cached(db)
    finally:
        wal.unlink()
    cache = ladder_cache.path_for(db)
    good = cache.read_bytes()
    for damaged in (b"", b"not a cache\n", good[: len(ladder_cache.FORMAT) + 5], b"\x00" * 64):
        cache.write_bytes(damaged)
        assert not is_cached(db)
        assert verdicts(db)[0][0] is True  # answered from the store, which rewrites the cache
        assert cache.read_bytes() == good


def test_a_damaged_line_is_answered_from_the_store(ladder_store: LadderStore) -> None:
    db = ladder_store.db
    expected = verdicts(db)
    cache = ladder_cache.path_for(db)
    head, _, body = cache.read_bytes().partition(b"\n")
    header, _, lines = body.partition(b"\n")
    damaged = b"\n".join(
        line.split(b"\t")[0] + b"\tx\ty" if line else line for line in lines.split(b"\n")
    )
    cache.write_bytes(head + b"\n" + header + b"\n" + damaged)
    assert verdicts(db) == expected


def test_a_cache_that_cannot_be_written_leaves_the_check_working(
    ladder_store: LadderStore,
) -> None:
    db = ladder_store.db
    ladder_cache.path_for(db).mkdir()  # os.replace cannot put a file there
    assert verdicts(db) == verdicts(db)
    assert not is_cached(db)
    assert sorted(p.name for p in db.parent.iterdir() if ".ladder." in p.name) == []


def test_a_store_answered_from_its_jobs_is_not_cached(ladder_store: LadderStore) -> None:
    con = store.connect(ladder_store.db)
    con.execute("DELETE FROM meta WHERE key = 'ladder_completed_from'")
    con.close()
    answer = check_launch(ladder_store.db, family="climb", gpus=16, at_s=AT_S)
    assert answer.result is not None and not answer.result.from_summary
    assert not ladder_cache.path_for(ladder_store.db).exists()


def test_the_cached_check_imports_neither_duckdb_nor_the_manifest(
    ladder_store: LadderStore,
) -> None:
    db = ladder_store.db
    check_launch(db, family="climb", gpus=16, at_s=AT_S)
    probe = (
        "import sys; from gpuyield.__main__ import preflight; "
        f"status = preflight(['--db', {str(db)!r}, '--family', 'jump', '--gpus', '16', "
        "'--at', '2026-01-01T04:00:00']); "
        "print(status, sorted(m for m in sys.modules if 'duckdb' in m or m == 'gpuyield.manifest'))"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=True
    )
    assert done.stdout.strip().splitlines()[-1] == "3 []", done.stdout + done.stderr


# Family names as jobs' comments may carry them (``family=[^,\s]+``), prefixes of each other
# included; runs as any text.
_families = st.sampled_from(["a", "ab", "abc", "b", "é", "éa", "z.9", "Z", "fam/1"])
_rows = st.lists(
    st.tuples(
        _families,
        st.integers(0, 200),
        st.sampled_from([1, 8, 16, 64]),
        st.text(
            st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"),
            min_size=1,
            max_size=6,
        ),
    ),
    max_size=40,
)


@settings(max_examples=60)  # each example writes and reads a store file
@given(rows=_rows, known=st.lists(_families, max_size=4), at_s=st.integers(0, 220))
def test_bisection_finds_what_a_scan_finds(
    tmp_path_factory: object, rows: list[tuple[str, int, int, str]], known: list[str], at_s: int
) -> None:
    """The cache's lookup against a scan of the same rows in Python: the most GPUs, then the
    latest end, then the first run name, within the window; known when any row names it."""
    folder = tmp_path_factory.mktemp("cache")  # type: ignore[attr-defined]
    db = folder / "s.duckdb"
    con = duckdb.connect(str(db))
    con.execute("CREATE TABLE s (family VARCHAR, end_s BIGINT, gpus INTEGER, run VARCHAR)")
    if rows:
        con.executemany("INSERT INTO s VALUES (?, ?, ?, ?)", [list(r) for r in rows])
    con.execute("CREATE TABLE f AS SELECT DISTINCT family FROM s")
    if known:
        con.executemany("INSERT INTO f VALUES (?)", [[k] for k in known])
    con.close()
    identity = ladder_cache.store_identity(db)
    assert identity is not None
    policy = LadderPolicy(rungs=(1, 8, 64), within_days=100 / 86400)
    con = duckdb.connect(str(db), read_only=True)
    staged = ladder_cache.stage(
        con,
        db,
        identity=identity,
        policy=policy,
        families=[],
        summary_table="s",
        families_table="f",
    )
    con.close()
    assert staged is not None
    ladder_cache.publish(staged, db)
    cached = ladder_cache.open_cached(db)
    assert cached is not None
    with cached.body:
        for family in ["a", "ab", "abc", "b", "é", "éa", "z.9", "Z", "fam/1", "none"]:
            window = [r for r in rows if r[0] == family and at_s - 100 <= r[1] <= at_s]
            best = min(window, key=lambda r: (-r[2], -r[1], r[3]), default=None)
            found = cached.evidence(family, at_s=at_s)
            assert (None if found is None else (found.run, found.gpus, found.end_s)) == (
                None if best is None else (best[3], best[2], best[1])
            )
            assert cached.known(family) == (family in known or any(r[0] == family for r in rows))
