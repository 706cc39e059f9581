"""The ladder on a small cluster whose answers are counted by hand (tests/ladder/conftest.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from gpuyield import rungs, store
from gpuyield.errors import EmptyDataError
from gpuyield.ingest.slurm import SlurmInputs, ingest_slurm
from gpuyield.report.ladder import build_ladder
from gpuyield.report.summary import build_report
from tests.conftest import SAMPLE
from tests.ladder.conftest import WINDOW_END_S, LadderStore
from tests.ledger.timeline import SACCT_FIELDS, T0_S, Job

AT_S = T0_S + WINDOW_END_S


def gpuyield(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gpuyield", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_families_runs_and_skips(ladder_store: LadderStore) -> None:
    analysis = build_ladder(ladder_store.db).analysis
    by_name = {f.name: f for f in analysis.families}
    assert sorted(by_name) == ["climb", "jump"]
    climb, jump = by_name["climb"], by_name["jump"]
    assert [(c.rung, c.run) for c in climb.climbed] == [
        ("1", "climb-1"),
        ("8", "climb-8"),
        ("16", "climb-16"),
    ]
    assert climb.skipped == ()
    # climb-16's first, failed try on 16 GPUs is its launch; climb-8 had completed by then.
    run16 = next(r for r in climb.runs if r.run == "climb-16")
    assert (run16.launch_s, run16.reached_gpus, run16.required_gpus) == (T0_S + 2000, 8, 8)
    assert run16.categories == {"experiment": 16 * 1600.0, "failed": 16 * 300.0}
    assert jump.climbed == ()
    skipped = {r.run: r for r in jump.skipped}
    assert sorted(skipped) == ["jump-a", "solo"]  # solo: family= in its own comment
    assert skipped["jump-a"].missing_rungs == (1, 8)
    assert skipped["jump-a"].outcome == "FAILED"
    assert skipped["jump-a"].categories == {"failed": float(ladder_store.jump_failed_gpu_s)}
    assert skipped["solo"].missing_rungs == (1,)
    assert skipped["solo"].categories == {"cancelled": 8 * 300.0}


def test_report_compares_waste_of_skipped_and_climbed_runs(ladder_store: LadderStore) -> None:
    waste = build_report(ladder_store.db).to_dict()["waste_in_skipped_rungs"]
    assert waste["rungs"] == [1, 8, 16]
    assert waste["skipped"]["runs"] == 2
    assert waste["skipped"]["wasted"] == {
        "failed": ladder_store.jump_failed_gpu_s,
        "cancelled": 8 * 300,
        "diverged": 0,
    }
    assert waste["skipped"]["waste_share"] == 1.0
    assert waste["climbed"]["runs"] == 3
    assert waste["climbed"]["gpu_seconds"] == ladder_store.climb_gpu_s
    assert waste["climbed"]["wasted_gpu_seconds"] == 16 * 300


def test_window_limits_the_gpu_seconds_not_the_judgement(ladder_store: LadderStore) -> None:
    # From 00:30: jump-a (00:01:40 .. 00:21:40) spent nothing in the window but still skipped.
    analysis = build_ladder(ladder_store.db, since_s=T0_S + 1800).analysis
    jump = next(f for f in analysis.families if f.name == "jump")
    jump_a = next(r for r in jump.runs if r.run == "jump-a")
    assert jump_a.skipped and jump_a.categories == {}


def test_preflight_from_summary_and_from_jobs_agree(ladder_store: LadderStore) -> None:
    asks = [("climb", 16), ("climb", 64), ("jump", 16), ("jump", 8), ("jump", 1), ("new", 8)]
    con = store.connect(ladder_store.db, read_only=True)
    try:
        fast = [rungs.preflight(con, family=f, gpus=g, at_s=AT_S) for f, g in asks]
    finally:
        con.close()
    assert all(r.from_summary for r in fast)
    assert [r.allowed for r in fast] == [True, True, False, False, True, False]
    assert fast[2].missing_rungs == (1, 8) and fast[2].required_gpus == 8
    assert fast[0].evidence is not None and fast[0].evidence.run == "climb-16"
    assert [r.known_family for r in fast] == [True, True, True, True, True, False]
    con = store.connect(ladder_store.db)
    con.execute("DELETE FROM meta WHERE key = 'ladder_completed_from'")
    con.close()
    con = store.connect(ladder_store.db, read_only=True)
    try:
        slow = [rungs.preflight(con, family=f, gpus=g, at_s=AT_S) for f, g in asks]
    finally:
        con.close()
    assert not any(r.from_summary for r in slow)
    assert [(r.allowed, r.evidence, r.missing_rungs) for r in slow] == [
        (r.allowed, r.evidence, r.missing_rungs) for r in fast
    ]


def test_preflight_respects_within_days(ladder_store: LadderStore) -> None:
    con = store.connect(ladder_store.db, read_only=True)
    try:
        late = rungs.preflight(con, family="climb", gpus=16, at_s=AT_S + 8 * 86400)
        before = rungs.preflight(con, family="climb", gpus=16, at_s=T0_S + 1000)
    finally:
        con.close()
    assert not late.allowed and late.evidence is None  # 7 days: the climb is too old
    assert not before.allowed and before.evidence is not None and before.evidence.gpus == 1


def test_a_new_ingest_updates_the_summary(ladder_store: LadderStore, tmp_path: Path) -> None:
    more = tmp_path / "more.psv"
    jobs = [
        Job(20, 5000, 5600, gpus=8, nodes="n3", run="jump-b"),
        # A family only a failed job names: known, though nothing of it completed.
        Job(21, 5000, 5100, gpus=8, nodes="n4", run="z1,family=zeta", state="FAILED"),
    ]
    more.write_text(SACCT_FIELDS + "\n" + "".join(j.line() + "\n" for j in jobs))
    ingest_slurm(ladder_store.db, SlurmInputs(sacct=more), until_s=T0_S + 6000)
    con = store.connect(ladder_store.db, read_only=True)
    try:
        result = rungs.preflight(con, family="jump", gpus=16, at_s=T0_S + 6000)
        zeta = rungs.preflight(con, family="zeta", gpus=8, at_s=T0_S + 6000)
    finally:
        con.close()
    assert result.from_summary and result.allowed
    assert result.evidence is not None and result.evidence.run == "jump-b"
    assert zeta.known_family and not zeta.allowed and zeta.evidence is None


def test_cli_exit_codes_and_messages(ladder_store: LadderStore) -> None:
    db = ladder_store.db
    at = "2026-01-01T04:00:00"
    refused = gpuyield("preflight", "--db", db, "--family", "jump", "--gpus", "16", "--at", at)
    assert refused.returncode == 3, refused.stderr
    assert "needs a completed run on 8 GPUs" in refused.stderr
    assert "missing rung(s) 1, 8" in refused.stderr
    assert "note:" not in refused.stderr
    typo = gpuyield("preflight", "--db", db, "--family", "jmup", "--gpus", "16", "--at", at)
    assert typo.returncode == 3 and "no job and no [[families]] entry names family 'jmup'" in (
        typo.stderr.replace("\n", " ")
    )
    ok = gpuyield("preflight", "--db", db, "--family", "climb", "--gpus", "16", "--at", at)
    assert ok.returncode == 0, ok.stderr
    assert "run climb-16 completed on 16 GPUs" in ok.stdout
    verdict = json.loads(
        gpuyield(
            "preflight", "--db", db, "--family", "jump", "--gpus", "8", "--at", at, "--json"
        ).stdout
    )
    assert verdict["allowed"] is False and verdict["missing_rungs"] == [1]
    ladder = gpuyield("report", "ladder", "--db", db, "--json")
    assert ladder.returncode == 0, ladder.stderr
    data = json.loads(ladder.stdout)
    jump = next(f for f in data["families"] if f["name"] == "jump")
    assert [r["skip"] for r in jump["runs"]] == ["none -> 16", "none -> 8"]
    text = gpuyield("report", "ladder", "--db", db)
    assert "skipped none -> 16" in text.stdout and "climb-16" in text.stdout


def test_without_a_ladder_the_sample_report_keeps_its_shape(tmp_path: Path) -> None:
    db = tmp_path / "sample.duckdb"
    ingest_slurm(
        db,
        SlurmInputs(
            sacct=SAMPLE / "sacct-X-D-wide.psv",
            events=SAMPLE / "sacctmgr-event-format.psv",
            nodes=SAMPLE / "scontrol-show-nodes-oneliner.txt",
            manifest=SAMPLE / "manifest.toml",
        ),
    )
    assert "waste_in_skipped_rungs" not in build_report(db).to_dict()
    with pytest.raises(EmptyDataError, match="no \\[ladder\\]"):
        build_ladder(db)
    no_ladder = gpuyield("preflight", "--db", db, "--family", "x", "--gpus", "8")
    assert no_ladder.returncode == 1 and "no [ladder]" in no_ladder.stderr
    con = store.connect(db, read_only=True)
    try:
        tables = {r[0] for r in con.execute("SHOW TABLES").fetchall()}
    finally:
        con.close()
    assert rungs.SUMMARY_TABLE not in tables


def test_preflight_by_run_name(ladder_store: LadderStore) -> None:
    db, at = ladder_store.db, "2026-01-01T04:00:00"
    common = ("preflight", "--db", db, "--gpus", "16", "--at", at)
    assert gpuyield(*common, "--run", "climb-v2").returncode == 0
    jump = gpuyield(*common, "--run", "jump-b")  # family jump, by its re: pattern
    assert jump.returncode == 3 and "family jump" in jump.stderr
    free = gpuyield(*common, "--run", "someone-else")
    assert free.returncode == 0 and "belongs to no family" in free.stdout
    neither = gpuyield(*common)
    assert neither.returncode == 2 and "give --family or --run" in neither.stderr


def test_an_ingest_without_jobs_keeps_the_summary(ladder_store: LadderStore) -> None:
    con = store.connect(ladder_store.db)
    con.execute(f"DELETE FROM {rungs.SUMMARY_TABLE}")  # a marker the rebuild would undo
    rungs.refresh_summary(con)
    assert con.execute(f"SELECT count(*) FROM {rungs.SUMMARY_TABLE}").fetchall() == [(0,)]
    con.execute("DELETE FROM meta WHERE key = 'ladder_completed_from'")
    rungs.refresh_summary(con)
    assert con.execute(f"SELECT count(*) FROM {rungs.SUMMARY_TABLE}").fetchall() == [(3,)]
    con.close()
