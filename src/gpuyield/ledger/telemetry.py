"""What run telemetry measures for lineage jobs: lost progress, start-up and checkpoint stalls.

Telemetry rows belong to a job when their run matches and their time falls inside the job. For each
lineage job with telemetry:
- lost progress (if it ended by failure or cancellation) = job end - the last checkpoint saved in it
  (the first step if it saved none: the start-up before it is overhead, not lost progress);
- start-up overhead = job start to its first step;
- checkpoint stalls = ``[t - duration_s, t)`` of every checkpoint it saved.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import ibis
import ibis.expr.types as ir

from gpuyield.manifest import DivergedRun, Manifest

# Watch findings that mean the run's later GPU time is lost, not a spike it recovered from.
DIVERGED_KINDS = ("divergence", "nonfinite")
_KEY = ["cluster", "job_id_raw", "submit_s"]


def has_telemetry(backend: ibis.BaseBackend) -> bool:
    """True when any run telemetry has been ingested."""
    return bool(backend.table("telemetry").count().to_pyarrow().as_py())


def _job_records(backend: ibis.BaseBackend, jobs: ir.Table, manifest: Manifest) -> ir.Table:
    telemetry = backend.table("telemetry")
    lineage = jobs.filter(jobs.run.isin(sorted(manifest.lineage_runs) or [""]))
    return lineage.join(
        telemetry,
        [
            lineage.run == telemetry.run,
            telemetry.t_s >= lineage.start_s.cast("float64"),
            telemetry.t_s <= lineage.full_end_s.cast("float64"),
        ],
    ).select(*_KEY, "start_s", "full_end_s", "event", "t_s", "duration_s")


def measured_lost_progress(
    backend: ibis.BaseBackend, jobs: ir.Table, manifest: Manifest
) -> ir.Table:
    """Per lineage job with telemetry: ``lost_s`` measured from its last checkpoint."""
    records = _job_records(backend, jobs, manifest)
    is_step = records.event == "step"
    is_save = records.event == "checkpoint_saved"
    per_job = records.group_by([*_KEY, "start_s", "full_end_s"]).aggregate(
        first_step_t=records.t_s.min(where=is_step),
        last_save_t=records.t_s.max(where=is_save),
    )
    resumed_from = per_job.last_save_t.fill_null(
        per_job.first_step_t.fill_null(per_job.start_s.cast("float64"))
    )
    return per_job.select(*_KEY, lost_s=per_job.full_end_s.cast("float64") - resumed_from)


def overhead_intervals(backend: ibis.BaseBackend, jobs: ir.Table, manifest: Manifest) -> ir.Table:
    """Per lineage job: ``[o_start_s, o_end_s)`` of start-up and of each checkpoint write."""
    records = _job_records(backend, jobs, manifest)
    steps = records.filter(records.event == "step")
    first_step = steps.group_by([*_KEY, "start_s"]).aggregate(o_end_s=steps.t_s.min())
    startup = first_step.select(
        *_KEY, o_start_s=first_step.start_s.cast("float64"), o_end_s=first_step.o_end_s
    )
    saves = records.filter((records.event == "checkpoint_saved") & records.duration_s.notnull())
    stalls = saves.select(*_KEY, o_start_s=saves.t_s - saves.duration_s, o_end_s=saves.t_s)
    return startup.union(stalls)


@dataclass(frozen=True, kw_only=True, slots=True)
class DetectedDivergence:
    """The manifest with the runs the watch found diverged, and every finding as evidence."""

    manifest: Manifest
    #: The stored divergence events, one row each (run, step, t_s, kind, metric, value, ...).
    evidence: list[dict[str, object]]


def with_detected_divergence(backend: ibis.BaseBackend, manifest: Manifest) -> DetectedDivergence:
    """Add runs the divergence watch found diverged (outside release lineages) to the manifest.

    A released model's run recovered from whatever the watch saw (it shipped), so its findings are
    shown as evidence but do not move time out of ``released``.
    """
    events = backend.table("divergence_events")
    rows = events.order_by(["run", "t_s", "step"]).to_pyarrow().to_pylist()
    lineage = manifest.lineage_runs
    first: dict[str, float] = {}
    for row in rows:
        if row["kind"] in DIVERGED_KINDS and row["t_s"] is not None and row["run"] not in lineage:
            first.setdefault(row["run"], row["t_s"])
    if not first:
        return DetectedDivergence(manifest=manifest, evidence=rows)
    declared = {d.run: d for d in manifest.diverged}
    merged = []
    for run in sorted(set(declared) | set(first)):
        declared_after = declared[run].after_s if run in declared else None
        if run in declared and declared_after is None:
            merged.append(DivergedRun(run=run))  # the manifest says the whole run is lost
            continue
        candidates = [int(first[run])] if run in first else []
        if declared_after is not None:
            candidates.append(declared_after)
        merged.append(DivergedRun(run=run, after_s=min(candidates)))
    merged_manifest = dataclasses.replace(manifest, diverged=tuple(merged))
    return DetectedDivergence(manifest=merged_manifest, evidence=rows)
