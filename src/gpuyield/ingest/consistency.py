"""Checks across files, run on the store at the end of each ingest (inside its transaction, so a
contradiction leaves the store as it was): a job that holds more GPUs than its nodes have, and an
inventory whose node names no cluster registration lists. Either would make the report's numbers
wrong (a job's GPUs vanishing, installed capacity doubled) while every file looked fine alone.
"""

from __future__ import annotations

import duckdb

from gpuyield.errors import DataConsistencyError, ParseError
from gpuyield.hostlist import HOSTLIST_MACRO_SQL, expand_hostlist
from gpuyield.ingest.sacct import load as sacct_load
from gpuyield.sqltext import literal


def check_store(
    con: duckdb.DuckDBPyConnection, *, new_job_ingests: tuple[int, ...], inventory_changed: bool
) -> None:
    """Raise when the store, as this ingest leaves it, contradicts itself."""
    if new_job_ingests or inventory_changed:
        _check_job_gpus(con, None if inventory_changed else new_job_ingests)
    _check_registration_sizes(con)
    _check_registrations_cover_inventory(con)


def _check_job_gpus(con: duckdb.DuckDBPyConnection, ingest_ids: tuple[int, ...] | None) -> None:
    """A job cannot hold more GPUs than the inventory gives its nodes together (only jobs whose
    every node is in the inventory: for the others the capacity is not known here)."""
    mine = (
        ""
        if ingest_ids is None
        else f"AND ingest_id IN ({', '.join(literal(i) for i in ingest_ids)})"
    )
    jobs_sql = f"""SELECT job_key, cluster, num_gpus, node_list, ingest_id, line FROM jobs
        WHERE num_gpus IS NOT NULL AND {sacct_load.HAS_JOB_NODES_SQL} {mine}"""
    # A job on one node is checked against that node alone, row by row: grouping every job's
    # nodes (10M groups at 10M jobs) held a 3 GB hash table, three times the rest of the ingest.
    # Its one job_nodes row is its node list; the inventory has one row per node (its key).
    one_sql = f"""SELECT j.ingest_id, j.line, j.num_gpus, n.num_gpus AS capacity, 1 AS nodes
        FROM ({jobs_sql} AND {sacct_load.ONE_NODE_SQL}) j
        JOIN nodes n ON n.cluster = j.cluster AND n.node = j.node_list
        WHERE j.num_gpus > n.num_gpus"""
    many_sql = f"""SELECT any_value(j.ingest_id), any_value(j.line), any_value(j.num_gpus),
            sum(n.num_gpus), count(n.node)
        FROM ({jobs_sql} AND NOT {sacct_load.ONE_NODE_SQL}) j JOIN job_nodes jn USING (job_key)
        LEFT JOIN nodes n ON n.cluster = j.cluster AND n.node = jn.node
        GROUP BY j.job_key
        HAVING count(n.node) = count(*) AND any_value(j.num_gpus) > sum(n.num_gpus)"""
    rows = con.execute(
        f"""SELECT i.path, c.line, c.num_gpus, c.capacity, c.nodes
            FROM ({one_sql} UNION ALL {many_sql}) c JOIN ingests i USING (ingest_id)
            ORDER BY i.path, c.line LIMIT 1"""
    ).fetchall()
    if rows:
        path, line, gpus, capacity, nodes = rows[0]
        raise ParseError(
            f"the job holds {gpus} GPUs, but its {nodes} node(s) have {capacity} in the inventory",
            path=path,
            line=int(line),
            field="AllocTRES",
            hint="check the job's AllocTRES and the node inventory (ingest.nodes) are of the same "
            "cluster",
        )


# The most node names all cluster registrations of one cluster may hold together: the ledger gives
# each registration's nodes their own capacity intervals, so this bounds its memory (e.g. 200
# registrations of a 10,000-node cluster). Counted from the ranges, before anything is expanded.
MAX_REGISTERED_NAMES = 2_000_000


def _check_registration_sizes(con: duckdb.DuckDBPyConnection) -> None:
    con.execute(HOSTLIST_MACRO_SQL)
    rows = con.execute(
        f"""SELECT cluster, path, line, total FROM (
                SELECT c.cluster, i.path, c.line, sum(hostlist_size(c.node_list)) OVER (
                    PARTITION BY c.cluster ORDER BY c.start_s, c.line) AS total
                FROM cluster_events c JOIN ingests i USING (ingest_id)
                WHERE c.node_list IS NOT NULL)
            WHERE total > {MAX_REGISTERED_NAMES} ORDER BY total LIMIT 1"""
    ).fetchall()
    if rows:
        cluster, path, line, total = rows[0]
        raise ParseError(
            f"the registrations of cluster {cluster} name {int(total):,} nodes in all up to this "
            f"one, more than {MAX_REGISTERED_NAMES:,}",
            path=path,
            line=int(line),
            field="ClusterNodes",
            hint="check the Cluster Nodes ranges of the cluster registrations",
        )


def _check_registrations_cover_inventory(con: duckdb.DuckDBPyConnection) -> None:
    """Every inventory node of a cluster whose registrations list nodes must be in one of them:
    names that differ (n1 in the events, node1 in the inventory) would count each GPU twice."""
    lists = con.execute(
        """SELECT cluster, list(DISTINCT node_list) FROM cluster_events
           WHERE node_list IS NOT NULL GROUP BY cluster"""
    ).fetchall()
    for cluster, node_lists in lists:
        listed = {name for text in node_lists for name in expand_hostlist(text)}
        missing = con.execute(
            """SELECT n.node, n.line, i.path FROM nodes n JOIN ingests i USING (ingest_id)
               WHERE n.cluster = ? AND n.node NOT IN (SELECT unnest(?)) ORDER BY n.line""",
            [cluster, sorted(listed)],
        ).fetchall()
        if missing:
            node, line, path = missing[0]
            raise DataConsistencyError(
                f"{path}:{line}: inventory node {node!r} of cluster {cluster} is in no cluster "
                f"registration of the node events ({', '.join(sorted(node_lists)[:2])}); "
                f"{len(missing)} such node(s)",
                hint="the events and the inventory must come from the same cluster and name its "
                "nodes alike (sacctmgr show event, scontrol show nodes)",
            )
