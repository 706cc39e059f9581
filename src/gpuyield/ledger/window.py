"""The accounting window and the installed capacity inside it."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import ibis
import ibis.expr.types as ir
import pyarrow as pa

from gpuyield.errors import EmptyDataError, FieldError, InputError
from gpuyield.ledger.capacity import Registration, capacity_intervals
from gpuyield.ledger.coverage import (
    CoverageGapError,
    CoverageSpan,
    covered_bounds,
    gaps_in,
    stored_coverage,
)
from gpuyield.times import iso_utc as _iso

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
    coverage: tuple[CoverageSpan, ...] = ()
    """The store's covered time per cluster (empty: a store that never recorded it)."""
    not_captured: tuple[CoverageSpan, ...] = ()
    """Gaps in coverage inside the window (only with ``allow_gaps``): out of installed capacity."""

    def __post_init__(self) -> None:
        if self.end_s < self.start_s:
            raise InputError(
                f"window.until ({self.end_s}) is before window.since ({self.start_s})",
                hint="check window.since and window.until",
            )
        # The per-node sweep packs node and second into one integer (ledger/down.py).
        if self.start_s < 0 or self.end_s > _LATEST_S:
            raise InputError(
                f"window [{self.start_s}, {self.end_s}) is outside 1970-2106",
                hint="check window.since and window.until, and the times in the input files",
            )

    @property
    def duration_s(self) -> int:
        """Length of the window."""
        return self.end_s - self.start_s


@dataclass(frozen=True, kw_only=True, slots=True)
class _WindowFacts:
    """What the default window is made of (None: the store has none of it)."""

    as_of_s: int | None
    """The latest capture time of an ingest."""
    first_job_s: int | None
    """When the first job started."""
    registered_before_first_job_s: int | None
    """The cluster's last registration up to the first job (any, without jobs)."""
    first_registered_s: int | None
    """The cluster's first registration."""


def _window_facts(backend: ibis.BaseBackend) -> _WindowFacts:
    """The window's facts in one query (on Spark each query is seconds whatever its size)."""
    ingests = backend.table("ingests")
    jobs = backend.table("jobs")
    clusters = backend.table("cluster_events")
    # Without jobs (a null first start) every registration is before the first job.
    before = clusters.filter((clusters.start_s <= jobs.start_s.min().as_scalar()).fill_null(True))
    captured = ingests.filter(ingests.as_of_s.notnull())
    row = (
        captured.aggregate(as_of=captured.as_of_s.max())
        .cross_join(jobs.aggregate(first_job=jobs.start_s.min()))
        .cross_join(before.aggregate(before_first=before.start_s.max()))
        .cross_join(clusters.aggregate(first_registered=clusters.start_s.min()))
        .to_pyarrow()
        .to_pylist()[0]
    )

    def whole(value: int | None) -> int | None:
        return None if value is None else int(value)

    return _WindowFacts(
        as_of_s=whole(row["as_of"]),
        first_job_s=whole(row["first_job"]),
        registered_before_first_job_s=whole(row["before_first"]),
        first_registered_s=whole(row["first_registered"]),
    )


def resolve_window(
    backend: ibis.BaseBackend,
    *,
    since_s: int | None,
    until_s: int | None,
    allow_gaps: bool = False,
) -> Window:
    """Default window: the covered time, or (a store without coverage) from the cluster's
    registration (or the first job) to the capture time. Outside coverage: an error, or with
    ``allow_gaps`` the gaps are named in ``not_captured``."""
    covered = stored_coverage(backend)
    bounds = covered_bounds(covered)
    if bounds is not None:
        since_s = bounds.start_s if since_s is None else since_s
        until_s = bounds.end_s if until_s is None else until_s
    # A collect whose files were all unchanged records coverage but no new ingest: its end is
    # a capture time too.
    covered_end = max((c.end_s for c in covered), default=None)
    window = _plain_window(backend, since_s=since_s, until_s=until_s, covered_end_s=covered_end)
    if bounds is None:
        return window
    gaps = gaps_in(covered, window.start_s, window.end_s)
    if gaps and not allow_gaps:
        raise CoverageGapError(gaps, covered)
    return dataclasses.replace(window, coverage=covered, not_captured=gaps)


def _plain_window(
    backend: ibis.BaseBackend,
    *,
    since_s: int | None,
    until_s: int | None,
    covered_end_s: int | None = None,
) -> Window:
    facts = _window_facts(backend)
    as_of, first_job = facts.as_of_s, facts.first_job_s
    if as_of is not None and covered_end_s is not None:
        as_of = max(as_of, covered_end_s)
    if as_of is None:
        raise EmptyDataError(
            "no scheduler data in the database", hint="run gpuyield ingest slurm --sacct FILE first"
        )
    end = as_of if until_s is None else until_s
    if end > as_of:
        raise FieldError(
            "window.until",
            f"is after the data's capture time ({as_of})",
            hint="nothing is known after the capture; ingest a newer sacct file or use an earlier "
            "window.until",
        )
    warnings: list[str] = []
    if since_s is None:
        registered = facts.registered_before_first_job_s
        since_s = (
            registered if registered is not None else (first_job if first_job is not None else end)
        )
        if first_job is not None and first_job - since_s > _LONG_LEAD_S:
            warnings.append(
                "the window starts at the cluster's registration, "
                f"{(first_job - since_s) // 86400} days before the first job; "
                "pass --since to account for the capture period only"
            )
    else:
        registered = facts.first_registered_s
        if registered is not None and since_s < registered < end:
            # As sreport does: a GPU cannot have been installed in a cluster not yet registered.
            warnings.append(
                f"--since is before the cluster's registration ({_iso(registered)}): installed "
                "capacity counts from the registration"
            )
    return Window(start_s=since_s, end_s=end, as_of_s=as_of, warnings=tuple(warnings))


@dataclass(frozen=True, kw_only=True, slots=True)
class NodeCapacity:
    """Installed GPUs per node interval, as a table, with what the user should know."""

    table: ir.Table
    warnings: tuple[str, ...]


def node_capacity(backend: ibis.BaseBackend, window: Window) -> NodeCapacity:
    """Installed GPUs per node over time in the window, and doubts about them.

    Columns ``cluster, node, num_gpus, start_s, end_s, node_id``: a row per node and stretch of
    time with a fixed GPU count (see ledger/capacity.py); a node's rows never overlap, and all of
    them share its ``node_id``, one integer per node that per-node windows partition on (several
    times cheaper than the (cluster, node) strings).
    """
    inventory = {
        (r["cluster"], r["node"]): int(r["num_gpus"])
        for r in backend.table("nodes")
        .select("cluster", "node", "num_gpus")
        .to_pyarrow()
        .to_pylist()
    }
    events = backend.table("cluster_events").select("cluster", "start_s", "num_gpus", "node_list")
    registrations = [
        Registration(
            cluster=r["cluster"],
            start_s=int(r["start_s"]),
            num_gpus=None if r["num_gpus"] is None else int(r["num_gpus"]),
            node_list=r["node_list"],
        )
        for r in events.to_pyarrow().to_pylist()
    ]
    jobs = backend.table("jobs")
    ran = jobs.filter(jobs.start_s.notnull() & (jobs.start_s < window.end_s))
    first_jobs = ran.group_by("cluster").aggregate(first_s=ran.start_s.min())
    first_job_s = {r["cluster"]: int(r["first_s"]) for r in first_jobs.to_pyarrow().to_pylist()}
    found = capacity_intervals(
        inventory,
        registrations,
        start_s=window.start_s,
        end_s=window.end_s,
        first_job_s=first_job_s,
    )
    intervals = found.intervals
    node_ids: dict[tuple[str, str], int] = {}
    for item in intervals:  # sorted by cluster and node
        node_ids.setdefault((item.cluster, item.node), len(node_ids) + 1)
    table = pa.table(
        {
            "cluster": pa.array([i.cluster for i in intervals], pa.string()),
            "node": pa.array([i.node for i in intervals], pa.string()),
            "num_gpus": pa.array([i.num_gpus for i in intervals], pa.int64()),
            "start_s": pa.array([i.start_s for i in intervals], pa.int64()),
            "end_s": pa.array([i.end_s for i in intervals], pa.int64()),
            "node_id": pa.array([node_ids[(i.cluster, i.node)] for i in intervals], pa.int64()),
        }
    )
    return NodeCapacity(table=ibis.memtable(table), warnings=tuple(found.warnings))
