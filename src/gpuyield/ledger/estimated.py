"""Overhead of lineage jobs without telemetry, estimated from the manifest's ``run_settings``.

With ``restart_s`` (job start to first step), ``checkpoint_save_s`` (the stall of one checkpoint
write) and ``failure_detection_s`` (fault to the job's end) a run's jobs are taken to follow the timeline the telemetry would show: start-up
``[s, s + restart_s)``, then a checkpoint saved every ``checkpoint_interval_s`` from the job's
start until its progress stopped (its end, or ``failure_detection_s`` before a detected failure),
each written during ``[s + k * interval - save, s + k * interval)``. Those intervals become
``overhead``, as measured ones do; the lost-progress estimate (``jobs._with_loss``) uses the same
timeline, so the two never overlap. Jobs with telemetry keep their measured figures.
"""

from __future__ import annotations

import ibis
import ibis.expr.types as ir

from gpuyield.manifest import Manifest

_KEY = ["cluster", "job_id_raw", "submit_s"]

# States a job reaches some time after the fault that ended its progress: Slurm marks a node down
# after its timeout (NODE_FAIL), the job's watchdog or launcher exits after its own (FAILED).
# ``failure_detection_s`` says how long; no checkpoint is saved in between.
DETECTED_STATES = ("FAILED", "NODE_FAIL")


def progress_elapsed(jobs: ir.Table, detection_s: ir.FloatingValue) -> ir.FloatingValue:
    """Seconds from job start to when its progress stopped (the fault, for detected failures)."""
    elapsed = (jobs.full_end_s - jobs.start_s).cast("float64")
    late = jobs.state.isin(list(DETECTED_STATES)) & detection_s.notnull()
    # A detection time longer than the job itself means the fault came during start-up: nothing
    # after the start was progress, so the job's progress time is 0, not negative.
    return ibis.cases((late, ibis.greatest(elapsed - detection_s, 0.0)), else_=elapsed)


def estimated_runs(manifest: Manifest) -> list[str]:
    """Lineage runs whose overhead can be estimated (an interval and a save or restart time)."""
    return sorted(
        run
        for run in manifest.lineage_runs
        if manifest.interval_s(run) is not None
        and (run in manifest.checkpoint_save_s or run in manifest.restart_s)
    )


def estimated_overhead_intervals(
    jobs: ir.Table, manifest: Manifest, measured: ir.Table | None
) -> ir.Table | None:
    """``cluster, job_id_raw, submit_s, o_start_s, o_end_s`` for jobs without telemetry."""
    runs = estimated_runs(manifest)
    if not runs:
        return None
    mine = jobs.filter(jobs.run.isin(runs) & jobs.start_s.notnull())
    if measured is not None:
        measured_keys = measured.select(*_KEY).distinct()
        mine = mine.anti_join(measured_keys, _KEY)
    mine = mine.mutate(
        interval=_setting(mine, {r: manifest.interval_s(r) or 0.0 for r in runs}),
        save=_setting(mine, {r: manifest.checkpoint_save_s.get(r, 0.0) for r in runs}),
        startup=_setting(mine, {r: manifest.restart_s.get(r, 0.0) for r in runs}),
        begin=mine.start_s.cast("float64"),
    )
    mine = mine.mutate(
        elapsed=progress_elapsed(mine, _nullable_setting(mine, manifest.failure_detection_s))
    )
    startup = mine.filter((mine.startup > 0) & (mine.elapsed >= mine.startup))
    startup = startup.select(
        *_KEY, o_start_s=startup.begin, o_end_s=startup.begin + startup.startup
    )
    saved = mine.filter((mine.save > 0) & (mine.elapsed >= mine.interval))
    saved = saved.mutate(
        k=ibis.range(1, (saved.elapsed / saved.interval).floor().cast("int64") + 1).unnest()
    )
    ends = saved.begin + saved.k.cast("float64") * saved.interval
    stalls = saved.select(*_KEY, o_start_s=ends - saved.save, o_end_s=ends)
    return startup.union(stalls)


def _nullable_setting(jobs: ir.Table, values: dict[str, float]) -> ir.FloatingValue:
    if not values:
        return ibis.null("float64")
    return ibis.cases(
        *[(jobs.run == run, ibis.literal(v, "float64")) for run, v in sorted(values.items())],
        else_=ibis.null("float64"),
    )


def _setting(jobs: ir.Table, values: dict[str, float]) -> ir.FloatingValue:
    return ibis.cases(
        *[(jobs.run == run, ibis.literal(v, "float64")) for run, v in values.items()],
        else_=ibis.literal(0.0, "float64"),
    )
