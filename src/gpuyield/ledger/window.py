"""The accounting window and the installed capacity inside it."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

import ibis
import ibis.expr.types as ir
import pyarrow as pa

from gpuyield.errors import DataConsistencyError, EmptyDataError, InputError

# A window starting this long before the first job is probably an old cluster registration, not
# the start of the capture: the report warns and suggests --since.
_LONG_LEAD_S = 7 * 86400
# Latest second the ledger can account for (2106-02-07): sweep keys in ledger/down.py.
_LATEST_S = (1 << 32) - 1


@dataclass(frozen=True, kw_only=True, slots=True)
class Window:
    """The half-open interval ``[start_s, end_s)`` the ledger accounts for."""

    start_s: int
    """First second (epoch, UTC)."""
    end_s: int
    """First second after the window."""
    as_of_s: int
    """Capture time of the data: running jobs and open events end here."""
    warnings: tuple[str, ...] = ()
    """Doubts about how the window was chosen."""

    def __post_init__(self) -> None:
        if self.end_s < self.start_s:
            raise InputError(
                f"window.end ({self.end_s}) is before window.start ({self.start_s})",
                hint="check --since and --until",
            )
        # The per-node sweep packs node and second into one integer (ledger/down.py).
        if self.start_s < 0 or self.end_s > _LATEST_S:
            raise InputError(
                f"window [{self.start_s}, {self.end_s}) is outside 1970-2106",
                hint="check --since and --until, and the times in the input files",
            )

    @property
    def duration_s(self) -> int:
        """Length of the window."""
        return self.end_s - self.start_s


def _scalar(expr: ir.Scalar) -> int | None:
    value = expr.to_pyarrow().as_py()
    return None if value is None else int(value)


def resolve_window(
    backend: ibis.BaseBackend, *, since_s: int | None, until_s: int | None
) -> Window:
    """Default window: from the cluster's registration (or the first job) to the capture time."""
    ingests = backend.table("ingests")
    as_of = _scalar(ingests.filter(ingests.as_of_s.notnull()).as_of_s.max())
    jobs = backend.table("jobs")
    first_job = _scalar(jobs.start_s.min())
    if as_of is None:
        raise EmptyDataError(
            "no scheduler data in the database", hint="run gpuyield ingest slurm --sacct FILE first"
        )
    end = as_of if until_s is None else until_s
    if end > as_of:
        raise InputError(
            f"--until is after the data's capture time ({as_of})",
            hint="nothing is known after the capture; ingest a newer sacct file or use an earlier --until",
        )
    warnings: list[str] = []
    if since_s is None:
        clusters = backend.table("cluster_events")
        before_first = (
            clusters if first_job is None else clusters.filter(clusters.start_s <= first_job)
        )
        registered = _scalar(before_first.start_s.max())
        since_s = registered if registered is not None else (first_job if first_job else end)
        if first_job is not None and first_job - since_s > _LONG_LEAD_S:
            warnings.append(
                "the window starts at the cluster's registration, "
                f"{(first_job - since_s) // 86400} days before the first job; "
                "pass --since to account for the capture period only"
            )
    else:
        registered = _scalar(backend.table("cluster_events").start_s.min())
        if registered is not None and since_s < registered < end:
            # As sreport does: a GPU cannot have been installed in a cluster not yet registered.
            warnings.append(
                f"--since is before the cluster's registration ({_iso(registered)}): installed "
                "capacity counts from the registration"
            )
    return Window(start_s=since_s, end_s=end, as_of_s=as_of, warnings=tuple(warnings))


def _iso(epoch_s: int) -> str:
    return datetime.fromtimestamp(epoch_s, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def node_capacity(backend: ibis.BaseBackend, window: Window) -> ir.Table:
    """Per node: ``cluster, node, num_gpus, start_s, end_s, node_id`` of capacity in the window.

    The inventory gives GPUs per node; without one, the cluster's registered ``gres/gpu`` is split
    evenly over its registered node list. Capacity starts when the cluster was registered (a node
    cannot have been installed in a cluster that did not exist yet).
    """
    nodes = backend.table("nodes")
    clusters = backend.table("cluster_events")
    registered = clusters.group_by("cluster").aggregate(reg_start_s=clusters.start_s.min())
    if _scalar(nodes.count()) == 0:
        nodes = _nodes_from_cluster_events(backend, clusters)
    joined = nodes.left_join(registered, "cluster")
    start = ibis.greatest(
        ibis.literal(window.start_s), joined.reg_start_s.fill_null(window.start_s)
    )
    return joined.select(
        joined.cluster,
        joined.node,
        joined.num_gpus,
        start_s=ibis.least(start, ibis.literal(window.end_s)),
        end_s=ibis.literal(window.end_s),
        # One integer per node: per-node windows partition on it, several times cheaper than
        # on the (cluster, node) strings.
        node_id=ibis.row_number().over(order_by=[joined.cluster, joined.node]),
    )


def _nodes_from_cluster_events(backend: ibis.BaseBackend, clusters: ir.Table) -> ir.Table:
    latest = clusters.filter(clusters.num_gpus.notnull() & clusters.node_list.notnull())
    latest = latest.order_by(latest.start_s.desc()).limit(1)
    rows = latest.select("cluster", "num_gpus", "node_list").to_pyarrow().to_pylist()
    if not rows:
        raise EmptyDataError(
            "installed capacity is unknown: no node inventory and no cluster TRES event",
            hint="give --nodes (scontrol -o show nodes) or --events in the long format with TRES",
        )
    from gpuyield.ingest.hostlist import expand_hostlist

    row = rows[0]
    names = expand_hostlist(row["node_list"])
    if not names or row["num_gpus"] % len(names):
        raise DataConsistencyError(
            f"cluster {row['cluster']} registered {row['num_gpus']} GPUs on {len(names)} nodes: "
            "cannot split evenly",
            hint="give a node inventory with --nodes",
        )
    per_node = row["num_gpus"] // len(names)
    return ibis.memtable(
        pa.table(
            {
                "cluster": pa.array([row["cluster"]] * len(names), pa.string()),
                "node": pa.array(names, pa.string()),
                "num_gpus": pa.array([per_node] * len(names), pa.int64()),
            }
        )
    )
