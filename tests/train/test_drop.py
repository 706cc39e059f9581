"""The essay's remedy run for real: kill one of 3 torchft replica groups mid-run, keep training.

One run of the harness with a failure and one without (same model, data and seed), each a few
seconds of training plus process start-ups. The lost GPU-seconds are recomputed here from the raw
JSON lines, independently of gpuyield.ledger.ft, and must equal what the ledger reports.
"""

from __future__ import annotations

import json
import math
import statistics
from itertools import pairwise
from pathlib import Path

import pytest
from typer.testing import CliRunner

pytestmark = pytest.mark.train
pytest.importorskip("torchft")

from gpuyield import store  # noqa: E402
from gpuyield.cli import app  # noqa: E402
from gpuyield.ingest.runlog import ingest_telemetry_files  # noqa: E402
from gpuyield.ledger.ft import Recovery, ft_loss  # noqa: E402

STEPS = 60
FAIL = (20, 1)  # step, group
# A tiny model: the test is about recovery, not about learning Shakespeare.
SMALL = ["--replicas", "3", "--steps", str(STEPS), "--n-layer", "2", "--n-embd", "64"]
SMALL += ["--eval-every", "20", "--timeout", "10m"]


def _train(out: Path, *extra: str) -> dict[str, object]:
    result = CliRunner().invoke(
        app, ["train-ft", "--mode", "drop", "--out", str(out), *SMALL, *extra, "--json"]
    )
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def _lines(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def _expected_lost_gpu_s(lines: list[dict[str, object]]) -> float:
    """The ledger's rule (docs/ledger.md), written again from the raw events."""
    lost = [e for e in lines if e["event"] == "replica_lost"]
    (failure,) = lost
    t_f, victim, gpus = failure["t"], failure["replica"], failure["gpus"]
    mine = [e["t"] for e in lines if e.get("replica") == victim and e["event"] == "step"]
    work = t_f - max(t for t in mine if t < t_f)
    heal = min(e["t"] for e in lines if e["event"] == "heal_done" and e["t"] > t_f) - t_f
    stall = 0.0
    for group in {e["replica"] for e in lines if e["event"] == "step"} - {victim}:
        times = sorted(e["t"] for e in lines if e["event"] == "step" and e["replica"] == group)
        marks = [t_f] + [e["t"] for e in lines if e["event"] == "quorum" and e["replica"] == group]
        gaps = [b - a for a, b in pairwise(times)]
        usual = statistics.median(gaps)
        for a, b in pairwise(times):
            if any(a < m <= b for m in marks):
                stall += max(0.0, b - a - usual)
    return gpus * (work + heal + stall)


def test_a_dropped_group_heals_and_rejoins_while_the_others_train_on(tmp_path: Path) -> None:
    summary = _train(tmp_path / "fail", "--fail-at", f"{FAIL[0]}:{FAIL[1]}")
    baseline = _train(tmp_path / "clean")
    lines = _lines(tmp_path / "fail" / "telemetry.jsonl")
    events = [e for e in lines if e["event"] != "step"]

    # The survivors never restarted: one process each; only the killed group started twice.
    starts = [e["replica"] for e in events if e["event"] == "job_start"]
    assert sorted(starts) == [0, 1, 1, 2]
    assert [e["replica"] for e in events if e["event"] == "restart"] == [1]
    (lost,) = [e for e in events if e["event"] == "replica_lost"]
    assert (lost["step"], lost["replica"]) == FAIL
    # The next quorum dropped it; the survivors stepped on without it.
    after = [e for e in events if e["event"] == "quorum" and e["t"] > lost["t"]]
    assert any(e["participants"] == 2 and e["replica"] in (0, 2) for e in after)
    # It healed from a live peer (to a later step than it died at) and rejoined a full quorum.
    (healed,) = [e for e in events if e["event"] == "heal_done"]
    assert healed["replica"] == 1 and healed["step"] > FAIL[0] and healed["t"] > lost["t"]
    assert any(e["participants"] == 3 and e["replica"] == 1 for e in after)
    # The survivors committed every step, and a few more than a clean run: the budget is in batches,
    # and steps without group 1 consumed 2 batches instead of 3.
    for group in (0, 2):
        done = {e["step"] for e in lines if e["event"] == "step" and e["replica"] == group}
        assert done == set(range(summary["steps_done"]))
    assert summary["steps_done"] > STEPS and baseline["steps_done"] == STEPS
    assert summary["restarts"] == 1

    # The model learned (chance is ln 62 = 4.13) and losing a group did not hurt it beyond noise.
    assert math.isfinite(summary["final_loss"]) and summary["final_loss"] < 3.6
    assert abs(summary["final_loss"] - baseline["final_loss"]) < 0.1
    assert baseline["lost_gpu_seconds"] == 0.0 and baseline["failures"] == 0

    # The ledger's lost GPU-seconds are the ones the raw events give.
    db = tmp_path / "ft.duckdb"
    (result,) = ingest_telemetry_files(db, "ft-drop-s0", [tmp_path / "fail" / "telemetry.jsonl"])
    assert result.ft_events > STEPS
    con = store.connect(db, read_only=True)
    try:
        loss = ft_loss(con, "ft-drop-s0")
    finally:
        con.close()
    assert [f.recovery for f in loss.failures] == [Recovery.DROP]
    assert loss.heal_gpu_s > 0 and loss.restart_gpu_s == 0
    assert loss.lost_gpu_s == pytest.approx(_expected_lost_gpu_s(lines), rel=1e-9, abs=1e-6)
    assert summary["lost_gpu_seconds"] == pytest.approx(loss.lost_gpu_s, rel=1e-9)
