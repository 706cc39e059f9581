"""The store's tables and views as SQL: the schema text, its version, and the sample view.

Times are integer epoch seconds (UTC); intervals are half-open ``[start_s, end_s)``; a NULL
``end_s`` means "still open at the capture time". A change to the tables raises ``SCHEMA_VERSION``
(a store of another version is rebuilt from its input files, never migrated).
"""

from __future__ import annotations

# 3 (flops): GPU models of nodes and jobs. 4: utilization samples carry the interval they cover
# (start_s) and are attributed at ingest. Both were 3 on their branches: a store of either is
# rebuilt.
SCHEMA_VERSION = 4

SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key VARCHAR PRIMARY KEY, value VARCHAR);
CREATE SEQUENCE IF NOT EXISTS ingest_ids START 1;
CREATE TABLE IF NOT EXISTS ingests (
    ingest_id BIGINT PRIMARY KEY, source VARCHAR NOT NULL, path VARCHAR NOT NULL,
    sha256 VARCHAR NOT NULL, size_bytes BIGINT, rows_read BIGINT, rows_rejected BIGINT,
    rows_skipped BIGINT, as_of_s BIGINT, options VARCHAR, ingested_at TIMESTAMP
);
CREATE TABLE IF NOT EXISTS rejects (
    ingest_id BIGINT, path VARCHAR, line BIGINT, field VARCHAR, message VARCHAR, raw VARCHAR
);
CREATE TABLE IF NOT EXISTS jobs (
    cluster VARCHAR NOT NULL, job_id VARCHAR NOT NULL, job_id_raw VARCHAR NOT NULL,
    submit_s BIGINT NOT NULL, name VARCHAR, user_name VARCHAR, account VARCHAR, partition VARCHAR,
    qos VARCHAR, state VARCHAR NOT NULL, state_raw VARCHAR, exit_code VARCHAR, start_s BIGINT,
    end_s BIGINT, num_gpus BIGINT, gpu_types VARCHAR, num_nodes BIGINT, node_list VARCHAR,
    comment VARCHAR, reason VARCHAR, ingest_id BIGINT NOT NULL, line BIGINT NOT NULL,
    job_key BIGINT NOT NULL, elapsed_s BIGINT
);
CREATE TABLE IF NOT EXISTS job_nodes (job_key BIGINT NOT NULL, node VARCHAR NOT NULL);
CREATE TABLE IF NOT EXISTS node_events (
    cluster VARCHAR NOT NULL, node VARCHAR NOT NULL, state VARCHAR NOT NULL, reason VARCHAR,
    user_name VARCHAR, start_s BIGINT NOT NULL, end_s BIGINT, planned BOOLEAN NOT NULL,
    ingest_id BIGINT NOT NULL, line BIGINT NOT NULL
);
CREATE TABLE IF NOT EXISTS cluster_events (
    cluster VARCHAR NOT NULL, start_s BIGINT NOT NULL, end_s BIGINT, num_gpus BIGINT,
    node_list VARCHAR, ingest_id BIGINT NOT NULL, line BIGINT NOT NULL,
    PRIMARY KEY (cluster, start_s)
);
CREATE TABLE IF NOT EXISTS nodes (
    cluster VARCHAR NOT NULL, node VARCHAR NOT NULL, num_gpus BIGINT NOT NULL, gpu_type VARCHAR,
    partitions VARCHAR, features VARCHAR, ingest_id BIGINT NOT NULL, line BIGINT NOT NULL,
    PRIMARY KEY (cluster, node)
);
-- GPU model names other sources saw on a node (gres.conf's Type, DCGM's modelName label):
-- ledger/weights resolves each node's model from these, the inventory and the manifest.
CREATE TABLE IF NOT EXISTS gpu_names (
    cluster VARCHAR NOT NULL, node VARCHAR NOT NULL, name VARCHAR NOT NULL, source VARCHAR NOT NULL,
    ingest_id BIGINT NOT NULL, line BIGINT
);
CREATE TABLE IF NOT EXISTS manifests (
    ingest_id BIGINT PRIMARY KEY, document VARCHAR NOT NULL
);
CREATE TABLE IF NOT EXISTS telemetry (
    run VARCHAR NOT NULL, job_id VARCHAR, event VARCHAR NOT NULL, t_s DOUBLE, step BIGINT,
    duration_s DOUBLE, status VARCHAR, loss DOUBLE, ingest_id BIGINT NOT NULL, line BIGINT
);
CREATE TABLE IF NOT EXISTS coverage (
    cluster VARCHAR NOT NULL, start_s BIGINT NOT NULL, end_s BIGINT NOT NULL, source VARCHAR NOT NULL,
    ingest_id BIGINT
);
CREATE TABLE IF NOT EXISTS divergence_events (
    run VARCHAR NOT NULL, step BIGINT NOT NULL, t_s DOUBLE, kind VARCHAR NOT NULL, metric VARCHAR,
    value DOUBLE, threshold DOUBLE, ingest_id BIGINT NOT NULL
);
-- Fault-tolerant runs (replica groups): their steps per group, checkpoints and failure events.
CREATE TABLE IF NOT EXISTS ft_events (
    run VARCHAR NOT NULL, replica BIGINT, event VARCHAR NOT NULL, t_s DOUBLE NOT NULL, step BIGINT,
    replicas BIGINT, gpus BIGINT, quorum_id BIGINT, participants BIGINT, attempt BIGINT,
    ingest_id BIGINT NOT NULL
);
-- Utilization samples, as series: one row per GPU, job label and stretch of time, its sample
-- times and activities as lists (DuckDB writes a list at a fraction of the cost of a row per
-- sample). A GPU's series never overlap in time. The sample at ts[i] covers the time since the
-- sample before it of its GPU (ts[i-1], or prev_t for the first), at most step_s before it
-- (first_step_s for the first): the view gpu_samples below has a row per sample
-- (ingest/utilization/stage.py).
CREATE TABLE IF NOT EXISTS gpu_series (
    cluster VARCHAR, node VARCHAR NOT NULL, gpu BIGINT NOT NULL, job_id VARCHAR,
    first_t BIGINT NOT NULL, last_t BIGINT NOT NULL, prev_t BIGINT, step_s BIGINT NOT NULL,
    first_step_s BIGINT NOT NULL, ts BIGINT[] NOT NULL, active DOUBLE[], tensor_active DOUBLE[],
    sm_active DOUBLE[], ingest_id BIGINT NOT NULL
);
-- The samples attributed to jobs, grouped per node, attribution, job and interval (kept up to
-- date by every ingest: gpuyield/attribution). Activity sums in billionths, exact as integers.
CREATE TABLE IF NOT EXISTS sample_groups (
    node VARCHAR NOT NULL, how VARCHAR NOT NULL, job_ref BIGINT, start_s BIGINT NOT NULL,
    end_s BIGINT NOT NULL, samples BIGINT NOT NULL, idle_samples BIGINT NOT NULL, active_sum BIGINT NOT NULL, tensor_sum BIGINT NOT NULL,
    tensor_samples BIGINT NOT NULL, gpu_mask HUGEINT NOT NULL
);
-- The allocations (job run x node) and inventory the attribution used, to find what an ingest
-- changes; job_ref names a job run (cluster, job_id_raw, submit_s) across re-ingests.
CREATE SEQUENCE IF NOT EXISTS job_refs START 1;
CREATE TABLE IF NOT EXISTS sample_jobs (
    job_ref BIGINT NOT NULL, cluster VARCHAR NOT NULL, job_id_raw VARCHAR NOT NULL,
    submit_s BIGINT NOT NULL, node VARCHAR NOT NULL, start_s BIGINT NOT NULL,
    end_s BIGINT NOT NULL, gpus DOUBLE NOT NULL, gpu_mask HUGEINT
);
CREATE TABLE IF NOT EXISTS sample_nodes (
    cluster VARCHAR NOT NULL, node VARCHAR NOT NULL, num_gpus BIGINT NOT NULL
);
-- GPUs measured per job run and node (distinct indices): more than the run held means the
-- samples contradict the allocation, and none of them is charged to it.
CREATE TABLE IF NOT EXISTS sample_job_gpus (
    job_ref BIGINT NOT NULL, node VARCHAR NOT NULL, gpus_measured BIGINT NOT NULL
);
-- The GPU indices a job run held on a node (scontrol -d show job, captured while it ran).
CREATE TABLE IF NOT EXISTS job_gpus (
    cluster VARCHAR NOT NULL, job_id_raw VARCHAR NOT NULL, start_s BIGINT NOT NULL,
    node VARCHAR NOT NULL, gpu BIGINT NOT NULL, first_seen_s BIGINT NOT NULL,
    last_seen_s BIGINT NOT NULL, ingest_id BIGINT NOT NULL, line BIGINT NOT NULL
);
-- A running job's comment as the controller printed it (scontrol -d show job; sacct stores the
-- comment only at the job's end): the latest capture's per run, ingest/running.py.
CREATE TABLE IF NOT EXISTS job_comments (
    cluster VARCHAR NOT NULL, job_id_raw VARCHAR NOT NULL, start_s BIGINT NOT NULL,
    comment VARCHAR NOT NULL, seen_s BIGINT NOT NULL, ingest_id BIGINT NOT NULL,
    line BIGINT NOT NULL
);
"""


def samples_sql(
    *, source_sql: str = "gpu_series o", computed_sql: str = "", kept_sql: str = ""
) -> str:
    """One row per GPU and sample time with a measurement, covering ``[start_s, t_s)``, from the
    series ``o`` of ``source_sql`` (``gpu_series o``, or it joined to what selects some): the
    view ``gpu_samples`` is all of them. A point without any measurement (NaN) still ends the
    interval of the one after it. More columns: ``computed_sql`` (``, expr AS name`` over the
    source) and ``kept_sql`` (``, name``)."""
    return f"""
        SELECT cluster, node, gpu, job_id,
               greatest(t_s - step_s, before_s) AS start_s, t_s, step_s,
               active, tensor_active, sm_active, ingest_id{kept_sql}
        FROM (
            SELECT *, CASE WHEN t_s = first_t THEN first_step_s ELSE o_step_s END AS step_s
            FROM (
                SELECT o.cluster, o.node, o.gpu, o.job_id, o.ingest_id, o.first_t,
                       o.first_step_s, o.step_s AS o_step_s{computed_sql},
                       unnest(o.ts) AS t_s,
                       unnest(list_prepend(o.prev_t, o.ts[1:len(o.ts) - 1])) AS before_s,
                       unnest(o.active) AS active, unnest(o.tensor_active) AS tensor_active,
                       unnest(o.sm_active) AS sm_active
                FROM {source_sql}
            )
        )
        WHERE coalesce(NOT isnan(active), false) OR coalesce(NOT isnan(tensor_active), false)
           OR coalesce(NOT isnan(sm_active), false)"""


__all__ = ["SCHEMA", "SCHEMA_VERSION", "samples_sql"]
