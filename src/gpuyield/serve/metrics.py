"""The Prometheus exposition of a snapshot, written by the official ``prometheus-client``.

Every number comes from the snapshot's ``YieldReport`` records, the ones ``gpuyield report --json``
prints, so a PromQL sum over ``gpuyield_gpu_seconds_total`` equals the report's categories (the test
in tests/serve/test_prometheus.py checks it against a real Prometheus). Names follow the Prometheus
conventions: base units (seconds), ``_total`` on counters, ``_ratio`` on 0..1 gauges.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from importlib import metadata
from typing import TYPE_CHECKING

from gpuyield.categories import ALLOCATED, IDLE_ALLOCATED, SUBCATEGORIES, Category
from gpuyield.errors import MissingExtraError
from gpuyield.report.breakdown import OTHERS, UNALLOCATED
from gpuyield.report.summary import YieldReport
from gpuyield.serve.snapshot import Snapshot

if TYPE_CHECKING:
    from prometheus_client.metrics_core import CounterMetricFamily, GaugeMetricFamily, Metric

#: The ``subcategory`` label of a category's GPU-seconds its subcategories do not name.
UNATTRIBUTED = "unattributed"
# Below this, a difference between a category and the sum of its subcategories is float rounding.
_ROUNDING_GPU_S = 1e-6
_ALLOCATED = [c.value for c in ALLOCATED]


@dataclass(frozen=True, kw_only=True, slots=True)
class CollectionStats:
    """What the serving process itself did: collections and snapshot builds."""

    collections_total: int = 0
    """Scheduled collections attempted."""
    collection_errors_total: int = 0
    """Those that raised."""
    last_collection_duration_s: float | None = None
    """Wall time of the last collection."""
    last_collection_success_s: float | None = None
    """When a collection last succeeded (epoch seconds)."""
    collection_running: bool = False
    """A collection is running now."""
    snapshot_errors_total: int = 0
    """Snapshot builds that failed (the previous snapshot kept serving)."""
    last_error: str = ""
    """The last collection or snapshot error, for /healthz."""


def render(snapshot: Snapshot | None, stats: CollectionStats) -> bytes:
    """The text exposition format (version 0.0.4) of one snapshot and the process's stats."""
    try:
        from prometheus_client import CollectorRegistry, generate_latest
    except ImportError:
        raise MissingExtraError("serve", "prometheus_client") from None
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Collector(snapshot, stats))
    return bytes(generate_latest(registry))


class _Collector:
    """A one-shot collector: prometheus-client asks it for families when rendering."""

    def __init__(self, snapshot: Snapshot | None, stats: CollectionStats) -> None:
        self._snapshot = snapshot
        self._stats = stats

    def collect(self) -> Iterator[Metric]:
        yield from _process_families(self._stats)
        if self._snapshot is not None:
            yield from _ledger_families(self._snapshot)
            yield from _window_families(self._snapshot)
            yield from _now_families(self._snapshot)
            yield from _account_families(self._snapshot)
            yield from _weighted_families(self._snapshot)
            yield from _idle_account_families(self._snapshot)


def _process_families(stats: CollectionStats) -> Iterator[Metric]:
    from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, InfoMetricFamily

    yield InfoMetricFamily(
        "gpuyield_build", "The gpuyield serving these metrics.", value={"version": _version()}
    )
    yield CounterMetricFamily(
        "gpuyield_collections", "Scheduled collections attempted.", value=stats.collections_total
    )
    yield CounterMetricFamily(
        "gpuyield_collection_errors",
        "Scheduled collections that failed.",
        value=stats.collection_errors_total,
    )
    yield CounterMetricFamily(
        "gpuyield_snapshot_errors",
        "Rebuilds of the served numbers that failed (the previous numbers kept serving).",
        value=stats.snapshot_errors_total,
    )
    yield GaugeMetricFamily(
        "gpuyield_collection_running",
        "1 while a collection runs.",
        value=int(stats.collection_running),
    )
    if stats.last_collection_duration_s is not None:
        yield GaugeMetricFamily(
            "gpuyield_collection_duration_seconds",
            "Wall time of the last collection.",
            value=stats.last_collection_duration_s,
        )
    if stats.last_collection_success_s is not None:
        yield GaugeMetricFamily(
            "gpuyield_collection_last_success_timestamp_seconds",
            "When a collection last succeeded.",
            value=stats.last_collection_success_s,
        )


def _ledger_families(snap: Snapshot) -> Iterator[Metric]:
    from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

    report = snap.report
    gpu_s = CounterMetricFamily(
        "gpuyield_gpu_seconds",
        "Installed GPU-seconds by ledger category over the covered time (report --json).",
        labels=["cluster", "category", "subcategory"],
    )
    for category, subcategory, value in category_series(report):
        gpu_s.add_metric([snap.cluster, category, subcategory], value)
    yield gpu_s
    yield _one(
        CounterMetricFamily,
        "gpuyield_installed_gpu_seconds",
        "Installed GPU-seconds over the covered time.",
        snap.cluster,
        report.installed_gpu_seconds,
    )
    for name, value, what in (
        ("gpuyield_coverage_start_timestamp_seconds", report.window_start_s, "First second"),
        ("gpuyield_coverage_end_timestamp_seconds", report.window_end_s, "End"),
    ):
        yield _one(GaugeMetricFamily, name, f"{what} of the covered time.", snap.cluster, value)
    yield _one(
        GaugeMetricFamily,
        "gpuyield_rejected_rows",
        "Input rows rejected by lenient ingests.",
        snap.cluster,
        report.rejected_rows,
    )
    yield _one(
        GaugeMetricFamily,
        "gpuyield_snapshot_timestamp_seconds",
        "When these numbers were computed from the store.",
        snap.cluster,
        snap.built_at_s,
    )
    yield _one(
        GaugeMetricFamily,
        "gpuyield_snapshot_duration_seconds",
        "How long computing them took.",
        snap.cluster,
        snap.build_duration_s,
    )


def category_series(report: YieldReport) -> list[tuple[str, str, float]]:
    """(category, subcategory, GPU-seconds): a category's series sum to the report's figure."""
    return series_of(report.categories, report.subcategories)


def series_of(
    categories: Mapping[Category, float] | Mapping[str, float], subcategories: dict[str, float]
) -> list[tuple[str, str, float]]:
    """(category, subcategory, value) in any unit: a category's series sum to its figure."""
    series: list[tuple[str, str, float]] = []
    for category in Category:
        total = categories[category]
        subs = [k.split(".", 1)[1] for k in SUBCATEGORIES if k.startswith(category.value + ".")]
        if not subs:
            series.append((category.value, "", total))
            continue
        named = 0.0
        for sub in subs:
            value = subcategories.get(f"{category.value}.{sub}", 0.0)
            named += value
            series.append((category.value, sub, value))
        # Nothing is dropped: what the subcategories leave out gets its own series.
        if abs(total - named) > _ROUNDING_GPU_S:
            series.append((category.value, UNATTRIBUTED, total - named))
    return series


def _window_families(snap: Snapshot) -> Iterator[Metric]:
    from prometheus_client.core import GaugeMetricFamily

    labels = ["cluster", "window"]
    families = {
        "yield": GaugeMetricFamily("gpuyield_yield_ratio", "Released / installed.", labels=labels),
        "utilization": GaugeMetricFamily(
            "gpuyield_utilization_ratio", "Allocated / (installed - down).", labels=labels
        ),
        "goodput": GaugeMetricFamily(
            "gpuyield_goodput_ratio", "Released / allocated.", labels=labels
        ),
    }
    starts = GaugeMetricFamily(
        "gpuyield_window_start_timestamp_seconds",
        "Start of each rolling window (its length before the end, or the coverage start).",
        labels=labels,
    )
    for window in snap.windows:
        values = {
            "yield": window.report.yield_,
            "utilization": window.report.utilization,
            "goodput": window.report.goodput,
        }
        for key, family in families.items():
            value = values[key]
            if value is not None:  # no installed (or allocated) time: no ratio, not a zero
                family.add_metric([snap.cluster, window.name], value)
        starts.add_metric([snap.cluster, window.name], window.report.window_start_s)
    yield from families.values()
    yield starts


@dataclass(frozen=True, kw_only=True, slots=True)
class _Gauge:
    """GPUs in one state at the end of the covered time."""

    name: str
    gpu_seconds: float
    #: What the GPUs are (the metric's help says it).
    what: str


def _now_gauges(now: YieldReport) -> list[_Gauge]:
    """The GPUs installed, idle, down and allocated at the end of the covered time."""
    # With utilization samples the ledger moves allocated time measured idle into idle
    # (idle.allocated): it is still allocated here, and has a gauge of its own.
    idle_allocated = now.subcategories.get(IDLE_ALLOCATED, 0.0)
    idle = now.categories[Category.IDLE] - idle_allocated
    allocated = now.allocated_gpu_seconds + idle_allocated
    gauges = [
        _Gauge(
            name="gpuyield_installed_gpus", gpu_seconds=now.installed_gpu_seconds, what="installed"
        ),
        _Gauge(name="gpuyield_idle_gpus", gpu_seconds=idle, what="in service and not allocated"),
        _Gauge(
            name="gpuyield_down_gpus",
            gpu_seconds=now.categories[Category.DOWN],
            what="on nodes out of service",
        ),
        _Gauge(name="gpuyield_allocated_gpus", gpu_seconds=allocated, what="allocated to jobs"),
    ]
    if now.activity is not None:  # only a store with samples measures it: no zero otherwise
        what = "allocated to jobs but measured idle (below the activity threshold)"
        gauges.append(
            _Gauge(name="gpuyield_allocated_idle_gpus", gpu_seconds=idle_allocated, what=what)
        )
    return gauges


def _now_families(snap: Snapshot) -> Iterator[Metric]:
    from prometheus_client.core import GaugeMetricFamily

    now = snap.now
    seconds = max(now.window_end_s - now.window_start_s, 1)
    for gauge in _now_gauges(now):
        help_ = f"GPUs {gauge.what} at the end of the covered time."
        yield _one(GaugeMetricFamily, gauge.name, help_, snap.cluster, gauge.gpu_seconds / seconds)
    yield _one(
        GaugeMetricFamily,
        "gpuyield_pending_gpus",
        "GPUs asked for by jobs waiting at the end of the covered time.",
        snap.cluster,
        snap.waiting.gpus,
    )
    yield _one(
        GaugeMetricFamily,
        "gpuyield_pending_jobs",
        "Jobs waiting at the end of the covered time.",
        snap.cluster,
        snap.waiting.jobs,
    )
    down = GaugeMetricFamily(
        "gpuyield_node_down_duration_seconds",
        "How long each node out of service at the end of the covered time had been out.",
        labels=["cluster", "node", "state", "planned"],
    )
    for node in snap.down_nodes:
        labels = [node.cluster, node.node, node.state, str(node.planned).lower()]
        down.add_metric(labels, snap.report.window_end_s - node.since_s)
    yield down


def _account_families(snap: Snapshot) -> Iterator[Metric]:
    from prometheus_client.core import CounterMetricFamily

    family = CounterMetricFamily(
        "gpuyield_account_gpu_seconds",
        "GPU-seconds allocated to each account by category over the covered time "
        '(the largest accounts; the rest as account="(others)").',
        labels=["cluster", "account", "category"],
    )
    for row in snap.accounts.rows:
        if row.key == UNALLOCATED:  # down and idle belong to no account
            continue
        for category in _ALLOCATED:
            family.add_metric([snap.cluster, row.key, category], row.categories[category])
    yield family


#: Weighted counters (ledger/weights): metric name -> (``weighted`` unit, what one unit is).
WEIGHTED_METRICS = {
    "gpuyield_h100_equiv_seconds": (
        "h100_equiv_seconds",
        "H100-equivalent seconds (dense BF16 peak over the H100 SXM's, the estimator's catalog)",
    ),
    "gpuyield_dollars": ("dollars", "dollars (the manifest's [prices] per GPU-hour)"),
}


def _weighted_families(snap: Snapshot) -> Iterator[Metric]:
    """The ledger in H100-equivalents and dollars by category, by GPU type in GPU-seconds, and
    the largest accounts in each weight; a weight no GPU has exports no series, not zeros."""
    from prometheus_client.core import CounterMetricFamily

    fleet = snap.report.fleet
    if fleet is None:
        return
    for name, (unit, what) in WEIGHTED_METRICS.items():
        weighted = fleet.weighted.get(unit)
        if weighted is None or not weighted.weights:
            continue
        family = CounterMetricFamily(
            name,
            f"Installed {what} by ledger category over the covered time (report --json weighted).",
            labels=["cluster", "category", "subcategory"],
        )
        for category, subcategory, value in series_of(weighted.categories, weighted.subcategories):
            family.add_metric([snap.cluster, category, subcategory], value)
        yield family
    by_type = CounterMetricFamily(
        "gpuyield_gpu_type_gpu_seconds",
        "Installed GPU-seconds by GPU type (catalog model, or the name Slurm gives an unknown one) "
        "and ledger category over the covered time (report --json by_gpu_type).",
        labels=["cluster", "gpu_type", "category"],
    )
    for key, gpu_type in fleet.by_gpu_type.items():
        for category, value in gpu_type.categories.items():
            by_type.add_metric([snap.cluster, key, category], value)
    yield by_type
    yield from _weighted_account_families(snap)


_UNIT_WORDS = {"h100_equiv_seconds": "H100-equivalent seconds", "dollars": "Dollars"}


def _weighted_account_families(snap: Snapshot) -> Iterator[Metric]:
    from prometheus_client.core import CounterMetricFamily

    names = {unit: name for name, (unit, _) in WEIGHTED_METRICS.items()}
    for cut in snap.weighted_accounts:
        family = CounterMetricFamily(
            names[cut.unit].replace("gpuyield_", "gpuyield_account_"),
            f"{_UNIT_WORDS[cut.unit]} allocated to each account by category over the covered "
            'time (the largest accounts; the rest as account="(others)").',
            labels=["cluster", "account", "category"],
        )
        for row in cut.rows:
            if row.key == UNALLOCATED:
                continue
            for category in _ALLOCATED:
                family.add_metric([snap.cluster, row.key, category], row.categories[category])
        yield family


def _idle_account_families(snap: Snapshot) -> Iterator[Metric]:
    from prometheus_client.core import GaugeMetricFamily

    idle = snap.idle_now
    if not idle.measured:  # not measured: no series, not zeros
        return
    family = GaugeMetricFamily(
        "gpuyield_allocated_idle_gpus_by_account",
        "GPUs allocated to each account's jobs but measured idle at the end of the covered time "
        '(the accounts with the most; the rest as account="(others)"; /api/idle-now lists jobs).',
        labels=["cluster", "account"],
    )
    kept = idle.accounts[: snap.top_accounts]
    for account in kept:
        family.add_metric([snap.cluster, account.account], account.idle_gpus)
    rest = idle.accounts[snap.top_accounts :]
    if rest:
        family.add_metric([snap.cluster, OTHERS], sum(a.idle_gpus for a in rest))
    yield family


def _one(
    kind: type[GaugeMetricFamily | CounterMetricFamily],
    name: str,
    help_: str,
    cluster: str,
    value: float,
) -> Metric:
    family = kind(name, help_, labels=["cluster"])
    family.add_metric([cluster], value)
    return family


def _version() -> str:
    try:
        return metadata.version("gpuyield")
    except metadata.PackageNotFoundError:
        return "unknown"
