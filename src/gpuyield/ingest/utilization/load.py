"""Staging and loading utilization samples: one row per GPU and sample time, metrics side by side.

A sample at ``t_s`` covers ``[t_s - step_s, t_s)``: exporters average their counters over the
interval that ends when they are scraped. Loading replaces rows of the same ``node, gpu, t_s``
(a second capture of the same hours), so re-reading overlapping files never counts a GPU twice.
"""

from __future__ import annotations

import duckdb
import pyarrow as pa

from gpuyield.errors import InputError
from gpuyield.ingest.utilization.promjson import Role


def stage(
    con: duckdb.DuckDBPyConnection,
    points_sql: str,
    ingest_ids: dict[str, int],
    *,
    step_s: int,
    cluster: str | None,
) -> dict[int, int]:
    """Pivot the points (``RAW_SCHEMA`` + ``source``) into ``staged_gpu_samples``.

    ``ingest_ids`` maps each source to its ingest; a GPU sample whose metrics came from several
    sources keeps the first. Returns the samples staged per ingest.
    """
    ids = pa.table({"source": list(ingest_ids), "ingest_id": list(ingest_ids.values())})
    con.register("gy_ingest_ids", ids)
    try:
        con.execute(
            f"""CREATE OR REPLACE TEMP TABLE staged_gpu_samples AS
            SELECT {_sql_text(cluster)} AS cluster, node, gpu, max(job_id) AS job_id, t_s,
                   {int(step_s)}::BIGINT AS step_s,
                   max(value) FILTER (WHERE role = '{Role.ACTIVE.value}') AS active,
                   max(value) FILTER (WHERE role = '{Role.TENSOR.value}') AS tensor_active,
                   max(value) FILTER (WHERE role = '{Role.SM.value}') AS sm_active,
                   min(i.ingest_id) AS ingest_id
            FROM ({points_sql}) p JOIN gy_ingest_ids i ON i.source = p.source
            GROUP BY node, gpu, t_s"""
        )
    finally:
        con.unregister("gy_ingest_ids")
    _check_activity(con)
    rows = con.execute(
        "SELECT ingest_id, count(*) FROM staged_gpu_samples GROUP BY ingest_id"
    ).fetchall()
    return {int(i): int(n) for i, n in rows}


def load(con: duckdb.DuckDBPyConnection) -> None:
    """Write the staged samples into the store, replacing earlier rows of the same GPU and time."""
    con.execute(
        """DELETE FROM gpu_samples USING staged_gpu_samples s
           WHERE gpu_samples.node = s.node AND gpu_samples.gpu = s.gpu
             AND gpu_samples.t_s = s.t_s"""
    )
    con.execute(
        """INSERT INTO gpu_samples
            SELECT cluster, node, gpu, job_id, t_s, step_s, active, tensor_active, sm_active,
                   ingest_id FROM staged_gpu_samples"""
    )
    con.execute("DROP TABLE staged_gpu_samples")


def _check_activity(con: duckdb.DuckDBPyConnection) -> None:
    """Fractions must be fractions: a percentage read as a ratio would make every GPU busy."""
    bad = con.execute(
        """SELECT node, gpu, t_s, active FROM staged_gpu_samples
           WHERE active > 1.0 + 1e-9 OR tensor_active > 1.0 + 1e-9 LIMIT 1"""
    ).fetchall()
    if bad:
        node, gpu, t_s, active = bad[0]
        raise InputError(
            f"node {node} GPU {gpu} at {t_s}: activity {active} is above 1 (100%)",
            hint="a ratio metric given as a percentage? set its scale (0.01 for percentages)",
        )


def _sql_text(value: str | None) -> str:
    if value is None:
        return "NULL::VARCHAR"
    return "'" + value.replace("'", "''") + "'"
