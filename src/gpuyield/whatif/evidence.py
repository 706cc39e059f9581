"""Tables the fit reports beside its parameters: down time by reason, the job mix of each ledger
category, and the stretches of whole idle nodes (the gaps filling idle time would fill)."""

from __future__ import annotations

import duckdb

from gpuyield.categories import Category
from gpuyield.ledger import Ledger
from gpuyield.report.breakdown import breakdown
from gpuyield.whatif.model import CategoryMix, DownReason, IdleStretches


def down_by_reason(con: duckdb.DuckDBPyConnection, ledger: Ledger) -> tuple[DownReason, ...]:
    """Node events in the window by reason: how many, and node-hours inside the window."""
    w = ledger.window
    rows = con.execute(
        """SELECT coalesce(reason, ''), planned, count(*),
                  sum(least(coalesce(end_s, ?), ?) - greatest(start_s, ?)) / 3600.0
           FROM node_events WHERE start_s < ? AND coalesce(end_s, ?) > ?
           GROUP BY ALL ORDER BY 4 DESC, 1""",
        [w.as_of_s, w.end_s, w.start_s, w.end_s, w.as_of_s, w.start_s],
    ).fetchall()
    return tuple(
        DownReason(reason=r, planned=bool(p), outages=int(n), node_hours=float(h))
        for r, p, n, h in rows
    )


def job_mix(ledger: Ledger) -> tuple[CategoryMix, ...]:
    """Per ledger category: jobs with time in it, their GPU-hours there, sizes and durations."""
    seg = ledger.segments
    seg = seg.filter(seg.job_key.notnull() & (seg.category != Category.DOWN.value))
    per_job = seg.group_by(["category", "job_key"]).aggregate(
        gpu_s=((seg.end_s - seg.start_s) * seg.gpus).sum()
    )
    jobs = ledger.jobs.select(
        "job_key", "num_gpus", duration_s=(ledger.jobs.full_end_s - ledger.jobs.start_s)
    )
    joined = per_job.join(jobs, "job_key")
    table = joined.group_by("category").aggregate(
        jobs=joined.job_key.count(),
        gpu_hours=joined.gpu_s.sum() / 3600.0,
        gpus_median=joined.num_gpus.cast("float64").median(),
        gpus_max=joined.num_gpus.max(),
        duration_median_s=joined.duration_s.cast("float64").median(),
        duration_p90_s=joined.duration_s.cast("float64").quantile(0.9),
    )
    rows = {r["category"]: r for r in table.to_pyarrow().to_pylist()}
    return tuple(
        CategoryMix(
            category=c.value,
            jobs=int(rows[c.value]["jobs"]),
            gpu_hours=float(rows[c.value]["gpu_hours"]),
            gpus_median=float(rows[c.value]["gpus_median"]),
            gpus_max=int(rows[c.value]["gpus_max"]),
            duration_median_s=float(rows[c.value]["duration_median_s"]),
            duration_p90_s=float(rows[c.value]["duration_p90_s"]),
        )
        for c in Category
        if c.value in rows
    )


def idle_stretches(ledger: Ledger, gpus_per_node: int) -> IdleStretches:
    """Hours in which at least a node's worth of GPUs sat idle, joined into stretches."""
    hours = breakdown(ledger, "hour").rows
    node_hour = gpus_per_node * 3600.0
    lengths: list[int] = []
    idle_node_hours = 0.0
    run = 0
    for row in hours:
        idle = row.categories.get(Category.IDLE.value, 0.0)
        if idle >= node_hour:
            run += 1
            idle_node_hours += idle / node_hour
        elif run:
            lengths.append(run)
            run = 0
    if run:
        lengths.append(run)
    lengths.sort()
    if not lengths:
        return IdleStretches(stretches=0, node_hours=0.0, median_h=0.0, p90_h=0.0, longest_h=0.0)
    return IdleStretches(
        stretches=len(lengths),
        node_hours=idle_node_hours,
        median_h=float(lengths[len(lengths) // 2]),
        p90_h=float(lengths[min(int(len(lengths) * 0.9), len(lengths) - 1)]),
        longest_h=float(lengths[-1]),
    )
