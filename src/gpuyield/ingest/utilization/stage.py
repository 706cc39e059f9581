"""From staged series to samples: the interval each sample covers, and the checks on the whole.

Both readers stage the same rows (``gy_series``, ``promjson.SERIES_SCHEMA`` plus ``ingest_id``);
from there on there is one code path, so a file means the same on either reader.

**The interval a sample covers.** A sample at ``t`` covers ``[start, t)``: exporters average their
counters over the interval that ends when they are scraped. ``start`` is the time of the sample
before it of the same GPU, but at most one *step* before ``t``: after a gap (an exporter down, a
NaN), the sample measures only the last step, and the gap stays unmeasured. The step is:

- the one the source knows (a run's average from Slurm covers the run);
- the one the user declared (``--step``): the data must not contradict it (two samples of a
  series closer than the step, or apart by other than whole steps, are an error naming the file,
  series and times);
- else the series' own spacing, read from the data (its smallest gap): a DCGM capture taken at
  15 s covers 15 s per sample, whatever ``--step`` would have said. The first sample of a series
  covers at most the default step (60 s) or the series' spacing, whichever is shorter.

So a GPU's samples never overlap: its measured time never exceeds the time that passed.

**Series.** The samples are stored as series (``gpu_series``), and the series of a GPU never
overlap in time. A GPU whose new series are of one metric, in time order and do not overlap
each other or the ones stored (a new series each time the job label changes, the next hour's
capture) goes in as it came. Anything else (several metrics of a GPU, overlapping series,
repeated or unordered times, jobstats' job-id gauge, a capture of hours already stored) is
pivoted with the stored samples it overlaps: one sample per GPU and time, the largest value of
each metric (a repeated time is one sample; a later capture replaces the earlier), cut again
into series (``series.py``).
"""

from __future__ import annotations

import duckdb

from gpuyield.errors import InputError, ParseError
from gpuyield.ingest.utilization.promjson import Role
from gpuyield.sqltext import literal
from gpuyield.times import iso_utc

#: The longest a sample without a known step covers: the first of a series, or any when the
#: spacing cannot be read (a series of one point). Prometheus' and the DCGM exporter's default
#: scrape interval is shorter; 60 s is the common site setting.
DEFAULT_STEP_S = 60
#: Activity is a fraction: above this (1 + rounding) it was given as a percentage.
_MAX_ACTIVITY = 1.0 + 1e-9

#: ``model``: DCGM's ``modelName`` label of the series, which DuckDB's reader keeps (the Python
#: reader leaves it empty: ``gpu_models`` reads the labels of those files itself). A row of a
#: metric not read carries only that label: no role, no times (no step below reads it).
STAGE_COLUMNS = """source VARCHAR, field VARCHAR, role VARCHAR, node VARCHAR, gpu BIGINT,
    job_label VARCHAR, ts BIGINT[], vs DOUBLE[], step_s BIGINT, ingest_id BIGINT, model VARCHAR"""


def create(con: duckdb.DuckDBPyConnection) -> None:
    """An empty ``gy_series`` for this ingest's sources."""
    con.execute(f"CREATE OR REPLACE TEMP TABLE gy_series ({STAGE_COLUMNS})")


def describe(con: duckdb.DuckDBPyConnection) -> None:
    """``gy_info``: per staged series, its times' order, ends, spacing, the step each of its
    samples covers, how many it measured and its largest value; ``gy_gpu``: per GPU, whether it
    loads straight in, and its span. The step each ingest was declared at is
    ``gy_new_ids.declared_step_s``.

    A series on a regular grid (every step present, as Prometheus answers when nothing was
    missed) is told in one native comparison with the grid; only the others are walked point by
    point to find their order and smallest gap.
    """
    con.execute(_SERIES_INFO_SQL, {"default": DEFAULT_STEP_S})
    _describe_gpus(con)


def _describe_gpus(con: duckdb.DuckDBPyConnection) -> None:
    """``gy_gpu``: per GPU, its span and whether its series load straight in (one role, each in
    time order, none a job's, none overlapping an earlier one)."""
    con.execute(
        f"""CREATE OR REPLACE TEMP TABLE gy_gpu AS
            SELECT node, gpu, min(first_t) AS lo, max(last_t) AS hi,
                   count(DISTINCT role) = 1 AND bool_and(strict)
                   AND NOT bool_or(role = {literal(Role.JOB.value)})
                   AND NOT bool_or(coalesce(first_t <= prev_last, false)) AS direct
            FROM gy_info GROUP BY node, gpu"""
    )


# ``gy_info``, in steps: each series' times and measured values (``raw``), whether its times
# strictly increase (``ordered``), the times sorted once when not (``sorted``), its ends, its
# smallest gap and its first sample off the declared step (``spaced``), then the step each sample
# covers and the latest end of the GPU's earlier series.
_SERIES_INFO_SQL = """CREATE OR REPLACE TEMP TABLE gy_info AS
            WITH raw AS (
                SELECT s.rowid AS sid, source, field, role, node, gpu, ingest_id,
                       step_s AS given, d.declared_step_s AS declared, len(ts) AS n, ts,
                       len(ts) < 2 OR (ts[2] > ts[1]
                           AND ts = generate_series(ts[1], ts[-1], ts[2] - ts[1])) AS regular,
                       list_filter(vs, lambda v: NOT isnan(v)) AS measured_vs
                FROM gy_series s JOIN gy_new_ids d USING (ingest_id) WHERE len(ts) > 0
            ), ordered AS (
                SELECT * EXCLUDE (measured_vs), len(measured_vs) AS measured,
                       list_max(measured_vs) AS peak,
                       CASE WHEN regular THEN true
                            ELSE coalesce(list_min(list_transform(range(2, n + 1),
                                      lambda i: ts[i] - ts[i - 1])), 1) > 0 END AS strict
                FROM raw
            ), sorted AS (
                SELECT * EXCLUDE (ts),
                       CASE WHEN strict THEN ts ELSE list_sort(list_distinct(ts)) END AS st
                FROM ordered
            ), spaced AS (
                SELECT * EXCLUDE (st), st[1] AS first_t, st[-1] AS last_t,
                       CASE WHEN regular THEN st[2] - st[1]
                            ELSE list_min(list_transform(range(2, len(st) + 1),
                                          lambda i: st[i] - st[i - 1])) END AS gap,
                       CASE WHEN declared IS NULL THEN NULL
                            WHEN regular THEN CASE WHEN (st[2] - st[1]) % declared <> 0
                                                   THEN 1 END
                            ELSE list_position(list_transform(range(2, len(st) + 1),
                                lambda i: (st[i] - st[i - 1]) % declared <> 0), true)
                       END AS bad_at,
                       st[bad_at] AS bad_t0, st[bad_at + 1] AS bad_t1
                FROM sorted
            )
            SELECT *,
                   coalesce(given, declared, gap, $default) AS step,
                   coalesce(given, declared, least(gap, $default), $default) AS first_step,
                   max(last_t) OVER (PARTITION BY node, gpu ORDER BY first_t, sid
                                     ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING)
                       AS prev_last
            FROM spaced"""


def check(con: duckdb.DuckDBPyConnection, *, cluster: str | None) -> None:
    """Refuse what would make the ledger wrong: a declared step the data contradicts, a GPU the
    inventory does not have, an activity above 100%."""
    _check_declared_step(con)
    _check_inventory(con, cluster)
    _check_activity(con)


def _check_declared_step(con: duckdb.DuckDBPyConnection) -> None:
    rows = con.execute(
        """SELECT source, field, role, node, gpu, bad_t0, bad_t1, declared FROM gy_info
           WHERE bad_at IS NOT NULL ORDER BY source, sid LIMIT 1"""
    ).fetchall()
    if rows:
        source, field, role, node, gpu, t0, t1, step_s = rows[0]
        raise ParseError(
            f"utilization.step_s {step_s}s: the {role} series of node {node} GPU {gpu} has samples at "
            f"{iso_utc(t0)} and {iso_utc(t1)}, {t1 - t0} s apart, not a whole number of steps",
            path=source,
            field=field,
            hint="leave utilization.step_s out to read each series' spacing from the data, or give the "
            "interval the data was taken at",
        )


def _check_inventory(con: duckdb.DuckDBPyConnection, cluster: str | None) -> None:
    """A sample of GPU 16 of an 8-GPU node is of no GPU the cluster has: refused while the
    inventory knows the node (a node it lacks is not attributed; see gpuyield.attribution)."""
    rows = con.execute(
        """SELECT i.source, i.field, i.node, i.gpu, n.num_gpus FROM gy_info i
           JOIN (SELECT node, min(num_gpus) AS num_gpus FROM nodes
                 WHERE $cluster IS NULL OR cluster = $cluster GROUP BY node) n USING (node)
           WHERE i.gpu >= n.num_gpus ORDER BY i.source, i.sid LIMIT 1""",
        {"cluster": cluster},
    ).fetchall()
    if rows:
        source, field, node, gpu, num_gpus = rows[0]
        raise ParseError(
            f"samples of node {node} GPU {gpu}, but the inventory gives {node} {num_gpus} "
            f"GPUs (indices 0 to {num_gpus - 1})",
            path=source,
            field=field,
            hint="check the GPU index label (MetricNames.gpu_labels) and that the samples and the "
            "inventory are of the same cluster (utilization.cluster)",
        )


def _check_activity(con: duckdb.DuckDBPyConnection) -> None:
    """Fractions must be fractions: a percentage read as a ratio would make every GPU busy."""
    rows = con.execute(
        f"""SELECT source, field, node, gpu, role, ts[pos], vs[pos] FROM (
                SELECT s.source, s.field, s.node, s.gpu, s.role, s.ts, s.vs,
                       list_position(list_transform(s.vs,
                           lambda v: v > {_MAX_ACTIVITY} AND NOT isnan(v)), true) AS pos
                FROM gy_series s JOIN gy_info i ON i.sid = s.rowid
                WHERE i.role <> {literal(Role.JOB.value)} AND i.peak > {_MAX_ACTIVITY})
            ORDER BY source LIMIT 1"""
    ).fetchall()
    if rows:
        source, field, node, gpu, role, t_s, value = rows[0]
        what = "graphics-engine activity" if role == Role.ACTIVE.value else f"{role} activity"
        raise InputError(
            f"{source}: {field}: node {node} GPU {gpu} at {iso_utc(t_s)}: {what} {value:g} is "
            "above 1 (100%)",
            hint="a ratio metric given as a percentage? set its scale (0.01 for percentages)",
        )
