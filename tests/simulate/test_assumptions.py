"""Every simulation output states what shaped it; drop and restart get the same spare nodes."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpuyield.cli import app
from gpuyield.errors import UnknownIdError
from gpuyield.simulate import Policy, load_scenario, simulate, write_outputs
from gpuyield.simulate.scenario import SparesFor, scenario_from_dict
from gpuyield.simulate.sweep import SweepParam, SweepSpec, base_model, run_sweep

SCENARIO = load_scenario("llama3-405b")
RUN = SCENARIO.lineage[0]
FAILURES = SCENARIO.failures


def _sweep(tmp_path: Path, *args: str) -> dict:
    out = CliRunner().invoke(
        app,
        ["simulate", "sweep", "--out", str(tmp_path), "--seeds", "1", "--duration", "5d",
         "--no-plots", "--json", *args],
    )  # fmt: skip
    assert out.exit_code == 0, out.output
    return dict(json.loads(out.output))


def test_sweep_json_states_every_cost_and_policy(tmp_path: Path) -> None:
    data = _sweep(tmp_path, "--values", "16384,65536", "--policy", "restart,drop")
    a = data["assumptions"]
    assert a["scenario"] == "llama3-405b" and a["days"] == 5
    assert a["failures"]["table"] == "meta-h100" and "Table 5" in a["failures"]["source"]
    assert a["failures"]["per_1000_node_days"] == pytest.approx(3.7887, abs=1e-4)
    assert a["checkpoint"] == {
        "interval_s": RUN.checkpoint_interval_s,
        "interval_swept": False,
        "write_s": RUN.checkpoint_write_s,
    }
    assert (a["detection_s"], a["requeue_wait_s"], a["startup_s"], a["spare_swap_s"]) == (
        FAILURES.detection_s, RUN.requeue_wait_s, RUN.startup_s, RUN.spare_swap_s,
    )  # fmt: skip
    assert a["repair"] == {"down_s": FAILURES.down_s, "mean_s": FAILURES.repair_mean_s}
    assert a["spares"]["nodes"] == RUN.spare_nodes and a["spares"]["for"] == "all"
    assert a["ft_calibration"] is None
    # What each point used: its size's spares, and the same replacement rule for both remedies.
    costs = data["costs"]["65536"]
    assert costs["job_nodes"] == 8192 and costs["spare_nodes"] == 128
    assert costs["restart_s"] == FAILURES.detection_s + RUN.requeue_wait_s + RUN.startup_s
    assert costs["replacement_s"] == 0  # a restart starts on a spare...
    assert costs["rejoin_s"] == RUN.spare_swap_s + RUN.startup_s  # ...and so does a dropped replica
    assert "optimum" not in data  # a size sweep has none: absent, never {}


def test_an_interval_sweep_fills_its_optimum_and_says_the_interval_was_swept(
    tmp_path: Path,
) -> None:
    data = _sweep(tmp_path, "--param", "interval-s", "--values", "300,900", "--policy", "restart")
    assert data["assumptions"]["checkpoint"]["interval_swept"] is True
    assert set(data["optimum"]) == {"restart"}
    assert data["optimum"]["restart"]["best_s"] in (300.0, 900.0)
    assert {c["interval_s"] for c in data["costs"].values()} == {300.0, 900.0}


def test_restart_only_spares_is_the_assumption_that_makes_restart_win_at_16k(
    tmp_path: Path,
) -> None:
    shared = _sweep(tmp_path, "--values", "16384", "--policy", "restart,drop")
    asym = _sweep(tmp_path, "--values", "16384", "--policy", "restart,drop",
                  "--spares-for", "restart")  # fmt: skip
    assert asym["assumptions"]["spares"]["for"] == "restart"
    assert asym["costs"]["16384"]["rejoin_s"] == FAILURES.down_s + FAILURES.repair_mean_s

    def yields(d: dict) -> dict[str, float]:
        return {p["policy"]: p["yield_mean"] for p in d["points"]}

    assert yields(shared)["drop"] > yields(shared)["restart"]
    assert yields(asym)["drop"] < yields(asym)["restart"]
    # Same failures, same restart: only the dropped replica's wait changed.
    assert yields(asym)["restart"] == yields(shared)["restart"]


def test_every_policy_pays_for_the_spare_pool() -> None:
    base = base_model(days=5, gpus=16384)
    spec = SweepSpec(param=SweepParam.CLUSTER_GPUS, values=(16384.0,), seeds=1,
                     base=base.model, assumptions=base.assumptions)  # fmt: skip
    nodes, spares = 2048, 32
    for point in run_sweep(spec).points:
        assert point.yield_mean == pytest.approx(point.ettr_mean * nodes / (nodes + spares))


def test_without_spares_every_remedy_waits_for_the_repair() -> None:
    from gpuyield.simulate.from_scenario import job_model

    bare = SCENARIO.with_overrides(lineage=(dataclasses.replace(RUN, spare_nodes=0),))
    model = job_model(bare, num_nodes=2048, duration_s=86400.0)
    repair = FAILURES.down_s + FAILURES.repair_mean_s
    assert model.spare_nodes == 0
    assert model.replacement_s == repair and model.rejoin_s == repair


def test_terminal_and_html_state_the_same_assumptions(tmp_path: Path) -> None:
    out = CliRunner().invoke(
        app, ["simulate", "sweep", "--out", str(tmp_path), "--values", "16384", "--seeds", "1",
              "--duration", "5d", "--policy", "restart,drop"],
    )  # fmt: skip
    assert out.exit_code == 0, out.output
    page = (tmp_path / "sweep.html").read_text(encoding="utf-8")
    for needle in ("checkpoint every 600 s, write 5 s", "requeue 60 s", "start-up 240 s",
                   "repair, mean 2 d", "32 spare nodes per 2,048 job nodes", "Table 5"):  # fmt: skip
        assert needle in " ".join(out.output.split()), needle
        assert needle in page.replace("&#x27;", "'"), needle


def test_simulate_run_states_its_costs_in_the_header_and_truth(tmp_path: Path) -> None:
    out = CliRunner().invoke(app, ["simulate", "llama3-405b", "--out", str(tmp_path),
                                   "--duration", "2d"])  # fmt: skip
    assert out.exit_code == 0, out.output
    text = " ".join(out.output.split())
    assert "llama3-405b-pt: restart on 16,384 GPUs; checkpoint every 600 s, write 5 s" in text
    assert "down 600 s, repair mean 2 d" in text and "for restart and drop" in text
    truth = json.loads((tmp_path / "truth.json").read_text(encoding="utf-8"))
    a = truth["assumptions"]
    assert a["days"] == 2 and a["seed"] == SCENARIO.seed
    (run,) = a["runs"]
    assert run["checkpoint"] == {"interval_s": 600, "write_s": 5}
    assert run["spares"] == {"nodes": 32, "per_job_nodes": 2048, "for": "all"}
    assert a["failures"]["repair"]["mean_s"] == FAILURES.repair_mean_s


def _drop_run(spares_for: SparesFor, tmp_path: Path) -> float:
    base = load_scenario("ledger-check-telemetry")
    run = dataclasses.replace(
        base.lineage[0], policy=Policy.DROP, replica_nodes=2, spares_for=spares_for
    )
    truth = write_outputs(simulate(base.with_overrides(lineage=(run,))), tmp_path)
    assert truth.assumptions is not None
    assert truth.assumptions.runs[0].spares_for is spares_for
    return truth.effective_training_time[run.name]


def test_a_dropped_replica_in_the_cluster_simulation_rejoins_on_a_spare(tmp_path: Path) -> None:
    shared = _drop_run(SparesFor.ALL, tmp_path / "all")
    waits = _drop_run(SparesFor.RESTART, tmp_path / "restart")
    assert shared > waits


def test_an_unknown_spares_for_names_the_choices() -> None:
    data = {
        "scenario": {"name": "t", "days": 1},
        "fleet": {"num_nodes": 4},
        "lineage": [{"name": "r", "release": "m", "num_gpus": 16, "spares_for": "some"}],
    }
    with pytest.raises(UnknownIdError, match="spares_for"):
        scenario_from_dict(data)
