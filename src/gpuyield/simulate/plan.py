"""`gpuyield plan`: from a model's size and tokens to days on a cluster with failures, in one call.

The plan is the estimator's answer (expected GPU-hours with a calibrated interval, from published
runs) followed by a simulation of the run itself: a scenario holding one lineage run of the given
parameters, tokens and GPUs, with the failure table of its accelerator generation (its rate at this
job's size) and the restart costs of a base scenario (``llama3-405b`` by default), simulated for
``seeds`` independent seeds by the same code as ``gpuyield simulate run`` (``cluster.simulate``).
The scenario is kept as TOML (``PlanResult.scenario_toml``): ``gpuyield simulate run`` of that file
with one of the plan's seeds completes the run on the same second.

Three variants share each seed's failures (common random numbers: the fleet, its outages and the
software failures do not depend on the policy or the checkpoint interval): the plan as given, the
other recovery policy (drop failed replicas, or restart), and restart with Daly's checkpoint
interval for the job's mean time between failures.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from gpuyield.errors import FieldError
from gpuyield.estimate.catalog import get_accelerator, parse_precision
from gpuyield.estimate.numbers import as_range
from gpuyield.estimate.train import estimate_train
from gpuyield.progress import NoProgress, Progress
from gpuyield.simulate.cluster import simulate
from gpuyield.simulate.ettr import SECONDS_PER_DAY, daly_interval_s
from gpuyield.simulate.failure_tables import FailureTable, failure_tables, get_failure_table
from gpuyield.simulate.plan_result import PlanResult, PlanSpec, Summary, Variant
from gpuyield.simulate.scenario import (
    LineageConfig,
    Policy,
    Scenario,
    SparesFor,
    load_scenario,
    scenario_from_dict,
)

#: The run's name in the scenario (``Comment=run=...`` in the Slurm files).
RUN_NAME = "plan"
#: A generation without a failure table of its own takes this one (said in the assumptions).
FALLBACK_TABLE = "meta-h100"
#: The simulated window is this many times the failure-free days (plus a week); a run that still
#: has not finished is simulated again in a window twice as long, up to ``WINDOW_TRIES`` times.
WINDOW_FACTOR = 3.0
WINDOW_TRIES = 3


def plan(spec: PlanSpec, *, progress: Progress | None = None) -> PlanResult:
    """The estimate, then the run simulated with failures under three variants.

    ``progress`` hears one phase per simulated window (every seed of every variant).
    """
    estimate = estimate_train(
        params=spec.params,
        tokens=spec.tokens,
        gpus=spec.gpus,
        accelerator=spec.accelerator,
        mfu=spec.mfu,
        precision=spec.precision,
    )
    base = load_scenario(spec.base)
    table = _table_for(spec.accelerator)
    planned = _PlanScenario.of(spec, base, table)
    # The days are replaced by the window each simulation needs.
    data = planned.to_dict(_planned(spec), seed=spec.seed, days=1.0)
    scenario = scenario_from_dict(data, origin="plan")
    variants = [_planned(spec), _other_policy(spec), _daly(spec, scenario, table)]
    simulated = _simulate_variants(spec, planned, variants, progress or NoProgress())
    return PlanResult(
        spec=spec,
        estimate=estimate,
        table=table,
        gpus=_gpus(spec, base),
        rate_scale=base.failures.rate_scale,
        variants=tuple(simulated),
        assumptions=_assumptions(spec, base, table),
    )


@dataclass(frozen=True, kw_only=True, slots=True)
class _Choice:
    name: str
    policy: Policy
    interval_s: int
    why: str


def _planned(spec: PlanSpec) -> _Choice:
    return _Choice(
        name="as planned",
        policy=spec.policy,
        interval_s=spec.checkpoint_interval_s,
        why="the policy and checkpoint interval given",
    )


def _other_policy(spec: PlanSpec) -> _Choice:
    other = Policy.DROP if spec.policy is Policy.RESTART else Policy.RESTART
    why = (
        "drop the failed node's data-parallel replica and train on without it"
        if other is Policy.DROP
        else "stop the whole job on a failure and restart from the last checkpoint"
    )
    return _Choice(
        name=f"policy {other.value}", policy=other, interval_s=spec.checkpoint_interval_s, why=why
    )


def _daly(spec: PlanSpec, scenario: Scenario, table: FailureTable) -> _Choice:
    run = scenario.lineage[0]
    nodes = scenario.run_nodes(run)
    mtbf_s = 1.0 / (sum(scenario.failure_rates().values()) * nodes)
    best = daly_interval_s(float(run.checkpoint_write_s), mtbf_s)
    # A checkpoint must come after start-up and its own write (the lineage timeline's rule).
    floor = run.startup_s + run.checkpoint_write_s + 1
    interval = max(round(best), floor)
    return _Choice(
        name="restart, Daly interval",
        policy=Policy.RESTART,
        interval_s=interval,
        why=f"Daly's optimum for a {run.checkpoint_write_s} s write and a job MTBF of "
        f"{mtbf_s / 60:.0f} min ({table.id})"
        + (f", raised to start-up + write + 1 s ({floor} s)" if interval > round(best) else ""),
    )


def _table_for(accelerator: str) -> FailureTable:
    generation = get_accelerator(accelerator).generation
    for table in failure_tables().values():
        if table.generation == generation and table.generation_default:
            return table
    return get_failure_table(FALLBACK_TABLE)


def _gpus(spec: PlanSpec, base: Scenario) -> int:
    gpus = as_range(spec.gpus, field="plan.gpus").central
    gpn = base.fleet.gpus_per_node
    if gpus != int(gpus) or int(gpus) % gpn or gpus <= 0:
        raise FieldError(
            "plan.gpus",
            f"must be a positive multiple of {gpn} GPUs per node, got {gpus:g}",
            example=str(max(round(gpus / gpn), 1) * gpn),
        )
    return int(gpus)


@dataclass(frozen=True, kw_only=True, slots=True)
class _PlanScenario:
    """The planned run as a scenario, less what each variant, seed and window chooses."""

    spec: PlanSpec
    #: The scenario whose failure process and restart costs the plan takes.
    base: Scenario
    table: FailureTable
    gpus: int
    accelerator: str
    peak_tflops: float
    params: float
    tokens: float

    @classmethod
    def of(cls, spec: PlanSpec, base: Scenario, table: FailureTable) -> _PlanScenario:
        gpus = _gpus(spec, base)
        chip = get_accelerator(spec.accelerator)
        return cls(
            spec=spec,
            base=base,
            table=table,
            gpus=gpus,
            accelerator=chip.id,
            peak_tflops=chip.peak_tflops(parse_precision(spec.precision, field="plan.precision")),
            params=as_range(spec.params, field="plan.params").central,
            tokens=as_range(spec.tokens, field="plan.tokens").central,
        )

    def to_dict(self, choice: _Choice, *, seed: int, days: float) -> dict[str, Any]:
        """The scenario of one variant, seed and window as TOML tables (``scenario_from_dict``
        reads them; the plan writes them as the variant's scenario file)."""
        gpn = self.base.fleet.gpus_per_node
        template = self.base.lineage[0]
        nodes = self.gpus // gpn
        share = template.spare_nodes / max(self.base.run_nodes(template), 1)
        spares = math.ceil(nodes * share)
        failure = self.base.failures
        return {
            "scenario": {
                "name": "plan",
                "description": f"gpuyield plan: {self.params / 1e9:g}B params, "
                f"{self.tokens:.4g} tokens on {self.gpus} {self.accelerator}",
                "start": "2026-01-01T00:00:00",
                "days": days,
                "seed": seed,
                "cluster": "plan",
            },
            "fleet": {
                "num_nodes": nodes + spares,
                "gpus_per_node": gpn,
                "accelerator": self.accelerator,
            },
            "failures": {
                "table": self.table.id,
                "detection_s": failure.detection_s,
                "software_detection_s": failure.software_detection_s,
                "down_s": failure.down_s,
                "repair_mean_s": failure.repair_mean_s,
                "rate_scale": failure.rate_scale,
            },
            "lineage": [self._run(template, choice, spares)],
        }

    def to_toml(self, choice: _Choice, *, seed: int, days: float) -> str:
        """``to_dict`` as the scenario file the plan keeps (``PlanResult.scenario_toml``)."""
        import tomli_w

        header = (
            "# Scenario written by `gpuyield plan` (format: docs/simulate.md). "
            "`gpuyield simulate run THIS --seed S` simulates seed S of the plan.\n"
        )
        return header + tomli_w.dumps(self.to_dict(choice, seed=seed, days=days))

    def _run(self, template: LineageConfig, choice: _Choice, spares: int) -> dict[str, Any]:
        return {
            "name": RUN_NAME,
            "release": RUN_NAME,
            "num_gpus": self.gpus,
            "tokens": self.tokens,
            "active_params_b": self.params / 1e9,
            "mfu": self.spec.mfu,
            "peak_tflops": self.peak_tflops,
            "checkpoint_interval_s": choice.interval_s,
            "checkpoint_write_s": template.checkpoint_write_s,
            "startup_s": template.startup_s,
            "requeue_wait_s": template.requeue_wait_s,
            "spare_swap_s": template.spare_swap_s,
            "spare_nodes": spares,
            "policy": choice.policy.value,
            "replica_nodes": template.replica_nodes,
            "planned_stops_per_day": template.planned_stops_per_day,
            "planned_pause_s": template.planned_pause_s,
            "telemetry": False,
        }


@dataclass(frozen=True, kw_only=True, slots=True)
class _Outcome:
    days: list[float]
    gpu_hours: list[float]
    yields: list[float]
    ettr: list[float]
    interruptions: list[int]


def _simulate_variants(
    spec: PlanSpec, planned: _PlanScenario, choices: list[_Choice], progress: Progress
) -> list[Variant]:
    """Every variant in one window, so that a seed's failures are the same for all of them (the
    window's length changes the draws); a window too short for any of them is doubled."""
    scenario = scenario_from_dict(
        planned.to_dict(_planned(spec), seed=spec.seed, days=1.0), origin="plan"
    )
    ideal_days = (scenario.work_s(scenario.lineage[0]) or 0) / SECONDS_PER_DAY
    window = ideal_days * WINDOW_FACTOR + 7.0
    for _ in range(WINDOW_TRIES):
        progress.phase(f"simulating {window:.0f} days", total=spec.seeds * len(choices))
        outcomes = [_try_window(spec, planned, choice, window, progress) for choice in choices]
        if all(o is not None for o in outcomes):
            return [
                _variant(choice, outcome, planned.to_toml(choice, seed=spec.seed, days=window))
                for choice, outcome in zip(choices, outcomes, strict=True)
                if outcome is not None
            ]
        window *= 2.0
    raise FieldError(
        "plan.tokens",
        f"the run does not finish within {window / 2:.0f} simulated days",
        example="fewer tokens, or more GPUs",
    )


def _try_window(
    spec: PlanSpec, planned: _PlanScenario, choice: _Choice, window: float, progress: Progress
) -> _Outcome | None:
    days, held, yields, ettr, inter = [], [], [], [], []
    for seed in range(spec.seed, spec.seed + spec.seeds):
        scenario = scenario_from_dict(
            planned.to_dict(choice, seed=seed, days=window), origin="plan"
        )
        run = simulate(scenario).lineage[0]
        progress.advance(1)
        if run.completed_s is None:
            return None
        wall_s = run.completed_s - scenario.start_s
        held_gpus = scenario.fleet.num_gpus
        days.append(wall_s / SECONDS_PER_DAY)
        held.append(wall_s / 3600.0 * held_gpus)
        job_gpus = scenario.lineage[0].num_gpus
        yields.append(run.productive_s * job_gpus / (wall_s * held_gpus))
        ettr.append(run.effective_training_time)
        inter.append(sum(run.interruptions.values()))
    return _Outcome(days=days, gpu_hours=held, yields=yields, ettr=ettr, interruptions=inter)


def _variant(choice: _Choice, outcome: _Outcome, scenario_toml: str) -> Variant:
    return Variant(
        name=choice.name,
        policy=choice.policy,
        checkpoint_interval_s=choice.interval_s,
        why=choice.why,
        wall_days=Summary.of(outcome.days),
        gpu_hours=Summary.of(outcome.gpu_hours),
        yield_=Summary.of(outcome.yields),
        effective_training_time=Summary.of(outcome.ettr),
        interruptions_mean=float(np.mean(outcome.interruptions)),
        days_by_seed=tuple(outcome.days),
        scenario_toml=scenario_toml,
    )


def _dropped(run: LineageConfig) -> str:
    """Where a dropped replica rejoins: the spare-node policy both remedies share by default."""
    if run.spare_nodes and run.spares_for is SparesFor.ALL:
        return "a dropped replica rejoins on a free spare, as a restarted job does"
    return "a dropped replica waits for it"


def _assumptions(spec: PlanSpec, base: Scenario, table: FailureTable) -> tuple[str, ...]:
    run = base.lineage[0]
    generation = get_accelerator(spec.accelerator).generation
    out = [
        f"Failures: table {table.id} ({table.name}), its rate at this job's size"
        + ("" if table.generation == generation else f"; {generation} has no table of its own")
        + ("" if base.failures.rate_scale == 1 else f", times {base.failures.rate_scale:g}"),
        f"Costs from scenario {base.name}: detection {base.failures.detection_s} s, requeue "
        f"{run.requeue_wait_s} s, start-up {run.startup_s} s, checkpoint write "
        f"{run.checkpoint_write_s} s, node repair {base.failures.repair_mean_s / 3600:.0f} h on "
        f"average ({_dropped(run)}), planned stops {run.planned_stops_per_day}/day",
        f"Compute at training-step MFU {spec.mfu:g} of the {spec.precision} peak; failures, "
        "restarts and stops are simulated on top",
        f"{spec.seeds} independent seeds; intervals are the 10th to 90th percentile over seeds; "
        "every variant of a seed sees the same failures",
        "GPU-hours count every GPU held (the job's and its spares) from submission to completion",
    ]
    return tuple(out)
