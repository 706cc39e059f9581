"""The fit recovers the parameters of simulated clusters whose parameters we set.

Three clusters unlike each other (failure rates, job mixes, checkpoint intervals, telemetry,
idle patterns), two seeds each: at least 90% of the fitted 95% intervals hold the true value,
pooled (a few hundred parameters). The larger study (more seeds, 0.5x-3x Llama 3's rates on
bigger clusters) is ``python -m bench whatif`` (docs/whatif.md has its numbers).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuyield.whatif import fit_cluster
from gpuyield.whatif.recovery import Recovery, recovered, true_values
from tests.whatif.conftest import cluster, simulated

VARIANTS = {
    # The default: no telemetry (checkpoints from run_settings), backfill off, one maintenance.
    "default": cluster(),
    # Failures 3x as often, a short checkpoint interval measured from telemetry, a different job
    # mix (small jobs only, long), people restarting runs by hand and rolling back divergences.
    "busy": cluster(
        failures={
            "rate_scale": 60.0,
            "repair_mean_s": 21600,
            "manual_share": 0.3,
            "manual_delay_s": 3600,
            "rollbacks_per_day": 0.5,
        },
        lineage=[
            {
                "name": "pt",
                "release": "m1",
                "num_gpus": 192,
                "start_day": 0.0,
                "checkpoint_interval_s": 600,
                "checkpoint_write_s": 15,
                "startup_s": 120,
                "requeue_wait_s": 300,
                "spare_nodes": 4,
                "telemetry": True,
            }
        ],
        research={
            "enabled": True,
            "load": 0.95,
            "diverged_share": 0.06,
            "classes": [
                {
                    "num_gpus": 2,
                    "gpu_time_share": 0.4,
                    "median_duration_s": 7200,
                    "time_limit_s": 43200,
                },
                {
                    "num_gpus": 8,
                    "gpu_time_share": 0.6,
                    "median_duration_s": 28800,
                    "duration_sigma": 0.7,
                    "time_limit_s": 172800,
                },
            ],
        },
        maintenance=[],
    ),
    # An idle cluster: research at half load, the lineage run starts on day 4 and research may
    # use its nodes until then (backfill), two maintenance windows.
    "idle": cluster(
        failures={"rate_scale": 10.0, "repair_mean_s": 86400},
        research={"enabled": True, "load": 0.5, "backfill_lineage_gaps": True},
        lineage=[
            {
                "name": "pt",
                "release": "m1",
                "num_gpus": 128,
                "start_day": 4.0,
                "checkpoint_interval_s": 3600,
                "checkpoint_write_s": 60,
                "startup_s": 300,
                "requeue_wait_s": 120,
                "planned_stops_per_day": 1.0,
            }
        ],
        maintenance=[
            {"start_day": 2.0, "duration_h": 12.0, "first_node": 20, "num_nodes": 10},
            {"start_day": 7.0, "duration_h": 4.0, "first_node": 50, "num_nodes": 4},
        ],
    ),
}
SEEDS = (1, 2)


@pytest.fixture(scope="module")
def recoveries(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[Recovery]]:
    found: dict[str, list[Recovery]] = {}
    for name, data in VARIANTS.items():
        for seed in SEEDS:
            sim = simulated(data, seed, tmp_path_factory.mktemp(f"rec-{name}"))
            fit = fit_cluster(sim.db)
            found[f"{name}/{seed}"] = recovered(fit, true_values(sim.scenario, sim.result))
    return found


def test_fitted_intervals_hold_the_true_values_90_percent_of_the_time(
    recoveries: dict[str, list[Recovery]],
) -> None:
    every = [r for found in recoveries.values() for r in found]
    assert len(every) > 200
    missed = [
        f"{r.key}: true {r.true:.4g}, fitted {r.value:.4g} [{r.low:.4g}, {r.high:.4g}]"
        for r in every
        if not r.covered
    ]
    assert len(missed) <= 0.1 * len(every), "\n".join(missed)


def test_what_drives_the_remedies_is_recovered_in_every_cluster(
    recoveries: dict[str, list[Recovery]],
) -> None:
    """The total failure rate, repairs, restart delays and checkpoint interval (what dropping
    replicas and checkpointing trade) are each within their interval, or within 2 standard
    errors of it: no systematic miss hides in the pooled coverage."""
    keys = ("failures.hardware_total", "failures.repair_mean_s", "lineage.pt.requeue_wait_s")
    for name, found in recoveries.items():
        by_key = {r.key: r for r in found}
        for key in keys:
            r = by_key[key]
            width = r.high - r.low
            assert r.low - width / 2 <= r.true <= r.high + width / 2, (name, r)


def test_each_variant_fits_every_class_and_run(tmp_path: Path) -> None:
    sim = simulated(VARIANTS["busy"], 3, tmp_path)
    fit = fit_cluster(sim.db)
    assert fit.research_classes == (2, 8)
    assert [s.name for s in fit.lineage] == ["pt"]
    assert fit.lineage[0].num_gpus == 192 and fit.lineage[0].telemetry
    # Telemetry measures the interval exactly: every gap between saves of a job is 600 s.
    interval = fit.parameter("lineage.pt.checkpoint_interval_s")
    assert interval.status.value == "fitted" and interval.value == 600
    assert fit.parameter("failures.manual_share").value > 0
