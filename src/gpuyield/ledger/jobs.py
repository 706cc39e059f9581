"""Allocated GPU-time by job: each job run becomes one or two segments with a category.

A segment is ``[start_s, end_s) x gpus`` with a category and subcategory. A job is one segment, except
a release-lineage job that lost progress (its tail since the last checkpoint becomes ``failed`` or
``cancelled``) and a diverged run with ``after`` (time after it becomes ``diverged``).
"""

from __future__ import annotations

import re

import ibis
import ibis.expr.types as ir
import pyarrow as pa

from gpuyield.categories import CancelCause, Category, FailedCause
from gpuyield.ledger.estimated import progress_elapsed
from gpuyield.ledger.plan import is_spark, small_on_spark
from gpuyield.ledger.window import Window
from gpuyield.manifest import Manifest

# Node health events from 10 min before to 5 min after a failure blame the hardware (Meta's rule,
# facts.md section 5: "a node health check that fires between 10 min before and 5 min after").
HW_BEFORE_S = 600
HW_AFTER_S = 300

# State -> (category, subcategory) for jobs outside any release lineage.
_FAIL_STATES = {
    "NODE_FAIL": FailedCause.HARDWARE,  # the node died under the job
    "BOOT_FAIL": FailedCause.HARDWARE,  # the node could not boot for the job
    "RECONFIG_FAIL": FailedCause.HARDWARE,  # the node could not be reconfigured for the job
    "LAUNCH_FAILED": FailedCause.HARDWARE,  # the nodes could not start the job's batch script
    "OUT_OF_MEMORY": FailedCause.OOM,  # asked for less memory than it used
    "TIMEOUT": FailedCause.TIMEOUT,  # did not finish in its limit: the work is lost
    "DEADLINE": FailedCause.TIMEOUT,  # same, for a job with a deadline
    "FAILED": FailedCause.SOFTWARE,  # non-zero exit; hardware only if a node event says so
    "SPECIAL_EXIT": FailedCause.SOFTWARE,  # the job's own code chose to fail
}
# Stopped by a person or the scheduler: the work was abandoned, not broken.
_CANCEL_STATES = {
    "PREEMPTED": CancelCause.PREEMPTED,
    "CANCELLED": CancelCause.USER,
    "REQUEUED": CancelCause.USER,
    "REQUEUE_HOLD": CancelCause.USER,
    "REQUEUE_FED": CancelCause.USER,
    "REVOKED": CancelCause.USER,
}
# A lineage job ending this way loses its progress since the last checkpoint; any other end keeps it
# (COMPLETED, RUNNING, and TIMEOUT/DEADLINE: a planned chunk of a long run, which checkpoints on exit).
LINEAGE_LOSS_STATES = (
    "FAILED",
    "NODE_FAIL",
    "BOOT_FAIL",
    "RECONFIG_FAIL",
    "LAUNCH_FAILED",
    "OUT_OF_MEMORY",
    "SPECIAL_EXIT",
    *_CANCEL_STATES,
)


def sql_pattern(pattern: str) -> str:
    """The manifest's Python regex for SQL engines: named groups become plain groups.

    Group numbers stay the same; Java's regex (Spark) does not read Python's ``(?P<name>...)``, and
    plain groups mean the same in every engine.
    """
    return re.sub(r"\(\?P<\w+>", "(", pattern)


def clipped_jobs(backend: ibis.BaseBackend, window: Window, manifest: Manifest) -> ir.Table:
    """Jobs that held GPUs inside the window, clipped to it, with run and lineage flags."""
    jobs = backend.table("jobs")
    ingests = backend.table("ingests").select("ingest_id", job_as_of_s="as_of_s")
    jobs = jobs.left_join(ingests, "ingest_id")
    # No end: the job was still running at its capture; it holds its GPUs until then.
    end = jobs.end_s.fill_null(jobs.job_as_of_s.fill_null(window.as_of_s))
    match_column = jobs.comment if manifest.match.field == "comment" else jobs.name
    run = match_column.re_extract(sql_pattern(manifest.match.pattern), manifest.match.group)
    run = run.nullif("")
    return (
        jobs.filter(jobs.start_s.notnull())
        .select(
            "job_key",
            "cluster",
            "job_id",
            "job_id_raw",
            "submit_s",
            "user_name",
            "account",
            "partition",
            "state",
            "num_gpus",
            "gpu_types",
            "num_nodes",
            "start_s",
            full_end_s=end,
            run=run,
            clip_start_s=ibis.greatest(jobs.start_s, ibis.literal(window.start_s)),
            clip_end_s=ibis.least(end, ibis.literal(window.end_s)),
        )
        .filter(lambda t: t.clip_end_s > t.clip_start_s)
    )


def job_segments(
    backend: ibis.BaseBackend,
    jobs: ir.Table,
    allocations: ir.Table,
    manifest: Manifest,
    window: Window,
    lost_progress: ir.Table | None = None,
    overhead: ir.Table | None = None,
    *,
    node_ids: ir.Table,
) -> ir.Table:
    """Categorised segments of every job with a known GPU count.

    ``node_ids`` maps ``cluster, node`` to the ``node_id`` of the allocations (``down.node_ids``).

    ``lost_progress`` (from telemetry) has ``cluster, job_id_raw, submit_s, lost_s`` measured per job;
    jobs without it get the estimate ``elapsed mod checkpoint_interval_s``. ``overhead`` has
    ``[o_start_s, o_end_s)`` intervals per job (start-up, checkpoint stalls) that move lineage time
    from ``released`` to ``overhead``.
    """
    jobs = jobs.filter(jobs.num_gpus.notnull() & (jobs.num_gpus > 0))
    jobs = _with_lineage(jobs, manifest)
    hardware = _hardware_blamed(backend, allocations, node_ids)
    jobs = jobs.left_join(hardware, "job_key").select(
        jobs, hw_event=hardware.hw_event.fill_null(False)
    )
    jobs = _with_loss(jobs, lost_progress)
    category, subcategory = _state_category(jobs)
    jobs = jobs.mutate(
        state_category=category,
        state_subcategory=subcategory,
        head_end_s=jobs.full_end_s - jobs.lost_s,
    )
    segments = (_heads_and_tails_one_pass if is_spark(backend) else _heads_and_tails)(jobs)
    if overhead is not None:
        segments = segments.union(_overhead_segments(jobs, overhead))
    segments = segments.filter(segments.end_s > segments.start_s)
    return _split_diverged(segments, manifest, window, spark=is_spark(backend))


def _heads_and_tails(jobs: ir.Table) -> ir.Table:
    """Each job's segment, and a lineage job's lost tail as a second one.

    A lineage job keeps its time as released, up to the progress it lost at its end; the lost
    tail takes the job's end state's category.
    """
    head = _segment(
        jobs,
        ibis.cases((jobs.lineage, Category.RELEASED.value), else_=jobs.state_category),
        ibis.cases((jobs.lineage, ibis.null(str)), else_=jobs.state_subcategory),
        jobs.clip_start_s,
        ibis.least(jobs.clip_end_s, jobs.head_end_s),
    )
    lost = jobs.filter(jobs.lineage & (jobs.lost_s > 0))
    tail = _segment(
        lost,
        lost.state_category,
        lost.state_subcategory,
        ibis.greatest(lost.clip_start_s, lost.head_end_s),
        lost.clip_end_s,
    )
    return head.union(tail)


def _heads_and_tails_one_pass(jobs: ir.Table) -> ir.Table:
    """``_heads_and_tails`` as Spark runs it best: the jobs read once, each paired with a part
    number (0: the job's segment, 1: a lineage job's lost tail), where a union of two filtered
    copies has Spark compute the jobs' whole plan (the run's pattern, the blamed jobs' join, the
    lost progress) once per copy. Same rows."""
    parts = ibis.memtable(pa.table({"seg_part": pa.array([0, 1], pa.int64())}))
    both = jobs.cross_join(parts)
    tail = both.seg_part == 1
    both = both.filter(~tail | (both.lineage & (both.lost_s > 0)))
    tail = both.seg_part == 1
    return _segment(
        both,
        ibis.cases(
            (tail, both.state_category),
            (both.lineage, Category.RELEASED.value),
            else_=both.state_category,
        ),
        ibis.cases(
            (tail, both.state_subcategory),
            (both.lineage, ibis.null(str)),
            else_=both.state_subcategory,
        ),
        ibis.ifelse(tail, ibis.greatest(both.clip_start_s, both.head_end_s), both.clip_start_s),
        ibis.ifelse(tail, both.clip_end_s, ibis.least(both.clip_end_s, both.head_end_s)),
    )


def _overhead_segments(jobs: ir.Table, overhead: ir.Table) -> ir.Table:
    """Overhead of lineage jobs, and the same intervals taken back out of ``released``.

    The pair keeps segments simple intervals: a released job stays one segment, and its stalls are a
    +overhead / -released pair over the same seconds, so every sum (total, per day, per run) is right.
    """
    lineage = jobs.filter(jobs.lineage)
    joined = lineage.join(overhead, ["cluster", "job_id_raw", "submit_s"])
    start = ibis.greatest(joined.o_start_s, joined.clip_start_s.cast("float64"))
    end = ibis.least(joined.o_end_s, joined.clip_end_s.cast("float64"), joined.head_end_s)
    joined = joined.mutate(seg_start_s=start, seg_end_s=end)
    plus = _segment(
        joined,
        ibis.literal(Category.OVERHEAD.value),
        ibis.null(str),
        joined.seg_start_s,
        joined.seg_end_s,
    )
    minus = _segment(
        joined,
        ibis.literal(Category.RELEASED.value),
        ibis.null(str),
        joined.seg_start_s,
        joined.seg_end_s,
    )
    return plus.union(minus.mutate(gpus=-minus.gpus))


def _with_lineage(jobs: ir.Table, manifest: Manifest) -> ir.Table:
    lineage = sorted(manifest.lineage_runs)
    intervals = {run: manifest.interval_s(run) for run in lineage}
    interval = (
        ibis.cases(
            *[(jobs.run == run, ibis.literal(v, "float64")) for run, v in intervals.items() if v],
            else_=ibis.null("float64"),
        )
        if any(intervals.values())
        else ibis.null("float64")
    )
    return jobs.mutate(
        lineage=jobs.run.isin(lineage).fill_null(False) if lineage else ibis.literal(False),
        interval_s=interval,
        restart_s=_per_run(jobs, manifest.restart_s),
        detection_s=_per_run(jobs, manifest.failure_detection_s),
    )


def _per_run(jobs: ir.Table, values: dict[str, float]) -> ir.FloatingValue:
    """A run's setting as a column (null for runs without it)."""
    if not values:
        return ibis.null("float64")
    return ibis.cases(
        *[(jobs.run == run, ibis.literal(v, "float64")) for run, v in sorted(values.items())],
        else_=ibis.null("float64"),
    )


def _hardware_blamed(
    backend: ibis.BaseBackend, allocations: ir.Table, node_ids: ir.Table
) -> ir.Table:
    """Failed jobs a node event on one of their nodes blames on the hardware.

    A fault (an unplanned event: DOWN, FAIL, a drain for repair) blames a failure that ended from
    10 min before to 5 min after the event's start (Meta's rule: the fault's symptoms come before
    it is declared). Planned maintenance is announced, not a symptom: it blames only a failure
    that ended inside it (killed by the maintenance taking its node), never one that merely ended
    minutes before it started (docs/ledger.md). From the per-node allocations the ledger has
    already joined (``failed``, ``full_end_s``), on the nodes' integer ids, which joins the
    millions of allocations in half the time of the names.
    """
    events = backend.table("node_events")
    events = events.join(node_ids, ["cluster", "node"]).select(
        "node_id", "start_s", "end_s", "planned"
    )
    failed = allocations.filter(allocations.failed)
    faults = events.filter(~events.planned)
    near = failed.join(
        faults,
        [
            failed.node_id == faults.node_id,
            faults.start_s >= failed.full_end_s - HW_BEFORE_S,
            faults.start_s <= failed.full_end_s + HW_AFTER_S,
        ],
    ).select("job_key")
    maintenance = events.filter(events.planned)
    inside = failed.join(
        maintenance,
        [
            failed.node_id == maintenance.node_id,
            maintenance.start_s <= failed.full_end_s,
            maintenance.end_s.isnull() | (maintenance.end_s > failed.full_end_s),
        ],
    ).select("job_key")
    blamed = near.union(inside).distinct().mutate(hw_event=ibis.literal(True))
    return small_on_spark(backend, blamed)


def _with_loss(jobs: ir.Table, lost_progress: ir.Table | None) -> ir.Table:
    """Seconds of progress lost at the job's end (0 when nothing was lost)."""
    if lost_progress is not None:
        jobs = jobs.left_join(lost_progress, ["cluster", "job_id_raw", "submit_s"]).select(
            jobs, measured_lost_s=lost_progress.lost_s
        )
    else:
        jobs = jobs.mutate(measured_lost_s=ibis.null("float64"))
    elapsed = (jobs.full_end_s - jobs.start_s).cast("float64")
    # Checkpoints every interval from the job's start until its progress stopped (a detected
    # failure stops failure_detection_s before its end): lost is everything after the last one.
    # Before the first one, progress counts from the first step (restart_s after the start: that
    # start-up is overhead, not lost progress, as telemetry measures it).
    # Without a known interval nothing shows a checkpoint was written, so the whole job is lost.
    progress = progress_elapsed(jobs, jobs.detection_s)
    saved = (progress / jobs.interval_s).floor() * jobs.interval_s
    startup = jobs.restart_s.fill_null(0.0)
    before_first = ibis.cases((progress >= startup, elapsed - startup), else_=elapsed)
    estimate = ibis.cases(
        (jobs.interval_s.isnull(), elapsed),
        (progress >= jobs.interval_s, elapsed - saved),
        else_=before_first,
    )
    loses = jobs.lineage & jobs.state.isin(list(LINEAGE_LOSS_STATES))
    return jobs.mutate(
        lost_s=ibis.cases((loses, jobs.measured_lost_s.fill_null(estimate)), else_=0.0),
        loss_measured=loses & jobs.measured_lost_s.notnull(),
    )


# A failure the job's own code reported, which a node event nearby shows was the hardware's.
HW_SUSPECT_STATES = ("FAILED", "SPECIAL_EXIT")


def _state_category(jobs: ir.Table) -> tuple[ir.StringValue, ir.StringValue]:
    state = jobs.state
    category = ibis.cases(
        (state.isin(list(_FAIL_STATES)), Category.FAILED.value),
        (state.isin(list(_CANCEL_STATES)), Category.CANCELLED.value),
        # COMPLETED, and jobs still running at the capture whose outcome is not known yet.
        else_=Category.EXPERIMENT.value,
    )
    sub = ibis.cases(
        (jobs.hw_event & state.isin(HW_SUSPECT_STATES), FailedCause.HARDWARE.value),
        *[(state == s, cause.value) for s, cause in _FAIL_STATES.items()],
        *[(state == s, sub.value) for s, sub in _CANCEL_STATES.items()],
        else_=ibis.null(str),
    )
    return category, sub


# What each job segment carries of its job, beside ``job_key`` and ``cluster``.
SEGMENT_JOB_ATTRIBUTES = (
    "job_id",
    "job_id_raw",
    "submit_s",
    "run",
    "user_name",
    "account",
    "partition",
    "state",
)


def _segment(
    jobs: ir.Table,
    category: ir.StringValue,
    subcategory: ir.StringValue,
    start: ir.IntegerValue,
    end: ir.NumericValue,
) -> ir.Table:
    return jobs.select(
        "job_key",
        "cluster",
        *SEGMENT_JOB_ATTRIBUTES,
        category=category,
        subcategory=subcategory,
        start_s=start.cast("float64"),
        end_s=end.cast("float64"),
        gpus=jobs.num_gpus.cast("float64"),
        measured=jobs.loss_measured,
    )


def _split_diverged_one_pass(segments: ir.Table, after_s: dict[str, float]) -> ir.Table:
    """``_split_diverged`` as Spark runs it best: the runs joined as a small table (Spark
    compiles a CASE of hundreds of runs into one Java method past the JVM's 64 KB limit, then
    interprets every row), and each segment read once, paired with a part number (0: all of it,
    or its time before ``after``; 1: a diverged run's time after it), where three filtered copies
    of the segments would compute them three times. Same rows."""
    runs = ibis.memtable({"d_run": list(after_s), "div_after_s": list(after_s.values())})
    joined = segments.left_join(runs, segments.run == runs.d_run)
    joined = joined.select(*segments.columns, "div_after_s")
    parts = ibis.memtable({"d_part": [0, 1]})
    both = joined.cross_join(parts)
    both = both.filter((both.d_part == 0) | both.div_after_s.notnull())
    later, diverged = both.d_part == 1, both.div_after_s.notnull()
    split = both.mutate(
        start_s=ibis.ifelse(later, ibis.greatest(both.start_s, both.div_after_s), both.start_s),
        end_s=ibis.ifelse(~later & diverged, ibis.least(both.end_s, both.div_after_s), both.end_s),
        category=ibis.ifelse(later, ibis.literal(Category.DIVERGED.value), both.category),
        subcategory=ibis.ifelse(later, ibis.null(str), both.subcategory),
    ).select(*segments.columns)
    return split.filter(split.end_s > split.start_s)


def _split_diverged(
    segments: ir.Table, manifest: Manifest, window: Window, *, spark: bool = False
) -> ir.Table:
    """Time of a diverged run (after its ``after`` instant, if given) becomes ``diverged``."""
    if not manifest.diverged:
        return segments
    after_s: dict[str, float] = {}
    for d in manifest.diverged:  # a run named twice: its first entry, as a CASE would take
        after_s.setdefault(d.run, float(d.after_s if d.after_s is not None else window.start_s - 1))
    if spark:
        return _split_diverged_one_pass(segments, after_s)
    else:
        after = ibis.cases(
            *[(segments.run == run, ibis.literal(v)) for run, v in after_s.items()],
            else_=ibis.null("float64"),
        )
        segments = segments.mutate(div_after_s=after)
    plain = segments.filter(segments.div_after_s.isnull())
    div = segments.filter(segments.div_after_s.notnull())
    before = div.mutate(end_s=ibis.least(div.end_s, div.div_after_s))
    later = div.mutate(
        start_s=ibis.greatest(div.start_s, div.div_after_s),
        category=ibis.literal(Category.DIVERGED.value),
        subcategory=ibis.null(str),
    )
    parts = plain.union(before).union(later).drop("div_after_s")
    return parts.filter(parts.end_s > parts.start_s)
