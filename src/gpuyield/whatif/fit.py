"""``gpuyield whatif fit``: the simulator's parameters for a cluster, from its own store.

One read-only pass over the store: the ledger of the window (the real categories, the run of
every job), the node events (failures, repairs, maintenance), the lineage runs' jobs and
telemetry, and the research jobs. Each parameter keeps its interval and its evidence; what the
records cannot show is assumed and said so (``notes``).
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import duckdb

from gpuyield import store
from gpuyield.categories import Category
from gpuyield.errors import InputError
from gpuyield.ledger import Ledger, Window, backend_for, compute_ledger
from gpuyield.whatif import evidence, fit_failures, fit_lineage, fit_research
from gpuyield.whatif.jobs import jobs_table, lineage_rows, telemetry_of, unused_nodes
from gpuyield.whatif.maintenance import maintenance_windows
from gpuyield.whatif.model import ClusterFit, Evidence, LedgerShares
from gpuyield.whatif.outages import Outage, read_outages
from gpuyield.whatif.params import Parameter, Status, fitted, stated
from gpuyield.whatif.price import manifest_price
from gpuyield.whatif.stats import median_estimate, poisson_rate, proportion


def fit_cluster(
    db: str | Path, *, since_s: int | None = None, until_s: int | None = None
) -> ClusterFit:
    """Fit the simulator to the store at ``db`` over ``[since_s, until_s)`` (default: the
    store's covered window)."""
    con = store.connect(db, read_only=True)
    try:
        ledger = compute_ledger(
            backend_for(con), since_s=since_s, until_s=until_s, keep_segments=True
        )
        return _fit(con, ledger, str(db))
    finally:
        con.close()


def _fit(con: duckdb.DuckDBPyConnection, ledger: Ledger, db: str) -> ClusterFit:
    w = ledger.window
    fleet = _fleet(con)
    outages = read_outages(con, w.start_s, w.end_s, w.as_of_s)
    exposure = fit_failures.exposure(outages, fleet.num_nodes, fleet.gpn, w.start_s, w.end_s)
    params = fit_failures.rate_parameters(outages, exposure, w.start_s)
    params.append(fit_failures.down_parameter(outages, w.start_s))
    params.append(fit_failures.repair_parameter(outages, w.start_s))
    jobs = jobs_table(con, ledger.manifest)
    lineage = _lineage(con, ledger, jobs, outages, fleet, params)
    group_nodes = sum(f.shape.num_gpus // fleet.gpn + f.shape.spare_nodes for f in lineage.facts)
    research = _research(con, jobs, lineage.facts, w, fleet.gpn)
    plan = maintenance_windows(outages, w.start_s, group_nodes, fleet.num_nodes)
    params += lineage.params + research.params
    return ClusterFit(
        db=db,
        cluster=fleet.cluster,
        start_s=w.start_s,
        end_s=w.end_s,
        num_nodes=fleet.num_nodes,
        gpus_per_node=fleet.gpn,
        parameters=tuple(params),
        lineage=tuple(f.shape for f in lineage.facts),
        research_classes=research.classes,
        backfill=research.backfill,
        maintenance=tuple(plan.windows),
        real=shares_of(ledger),
        evidence=Evidence(
            down_by_reason=evidence.down_by_reason(con, ledger),
            job_mix=evidence.job_mix(ledger),
            idle=evidence.idle_stretches(ledger, fleet.gpn),
        ),
        notes=tuple(
            fleet.notes + lineage.notes + research.notes + plan.notes + _assumed_notes(params)
        ),
        price=manifest_price(ledger),
    )


@dataclass(frozen=True, kw_only=True, slots=True)
class _Fleet:
    cluster: str
    num_nodes: int
    gpn: int
    notes: list[str]


@dataclass(frozen=True, kw_only=True, slots=True)
class _Part:
    """What one part of the fit (lineage, research) adds."""

    params: list[Parameter]
    notes: list[str]
    facts: list[fit_lineage.RunFacts] = field(default_factory=list)
    classes: tuple[int, ...] = ()
    backfill: bool = False


def _lineage(
    con: duckdb.DuckDBPyConnection,
    ledger: Ledger,
    jobs: str,
    outages: list[Outage],
    fleet: _Fleet,
    failure_params: list[Parameter],
) -> _Part:
    """The lineage runs: their facts, parameters and notes."""
    w = ledger.window
    released = _released_by_run(ledger)
    facts = [
        fit_lineage.run_facts(
            run,
            rows,
            manifest=ledger.manifest,
            outages=outages,
            gpus_per_node=fleet.gpn,
            window=w,
            released_gpu_s=released.get(run, 0.0),
            telemetry=bool(telemetry_of(con, run)),
        )
        for run, rows in lineage_rows(con, jobs, w.start_s, w.end_s).items()
    ]
    used = sum(f.shape.num_gpus // fleet.gpn + f.shape.spare_nodes for f in facts)
    if used > fleet.num_nodes:
        raise InputError(
            f"the lineage runs used {used} nodes but the inventory has {fleet.num_nodes}",
            hint="ingest the node inventory (ingest.nodes) that covers every node the jobs ran on",
        )
    params = _global_lineage_parameters(facts, ledger)
    unused = unused_nodes(con, jobs, w.start_s, w.end_s)
    facts, notes = _with_enough_spares(facts, failure_params, unused)
    for run in facts:
        name = run.shape.name
        params += fit_lineage.checkpoint_parameters(name, ledger.manifest, telemetry_of(con, name))
        params += fit_lineage.restart_parameters(name, run)
    notes += [
        f"lineage run {f.shape.name} held {f.held_gpus} GPUs; the simulator runs lineage jobs on "
        f"whole nodes: {f.shape.num_gpus}"
        for f in facts
        if f.held_gpus != f.shape.num_gpus
    ]
    return _Part(params=params, notes=notes, facts=facts)


def shares_of(ledger: Ledger) -> LedgerShares:
    """A ledger's categories as shares of installed GPU-time."""
    installed = ledger.installed_gpu_seconds
    return LedgerShares(
        installed_gpu_seconds=installed,
        shares={c.value: ledger.categories[c] / installed if installed else 0.0 for c in Category},
    )


def _fleet(con: duckdb.DuckDBPyConnection) -> _Fleet:
    rows = con.execute("SELECT cluster, num_gpus FROM nodes").fetchall()
    if not rows:
        raise InputError(
            "the store has no node inventory: the fit needs the fleet's nodes",
            hint="ingest scontrol -o show nodes with gpuyield ingest slurm --nodes",
        )
    clusters = sorted({c for c, _ in rows})
    if len(clusters) > 1:
        raise InputError(
            f"the store holds {len(clusters)} clusters ({', '.join(clusters)}): fit one at a time",
            hint="ingest each cluster into its own store.db",
        )
    sizes = Counter(int(g) for _, g in rows if g)
    gpn = sizes.most_common(1)[0][0] if sizes else 8
    notes = []
    if len(sizes) > 1:
        notes.append(
            f"nodes hold {', '.join(str(s) for s in sorted(sizes))} GPUs; the simulator's nodes "
            f"are alike: every node has {gpn} (the most common)"
        )
    return _Fleet(cluster=clusters[0], num_nodes=len(rows), gpn=gpn, notes=notes)


def _released_by_run(ledger: Ledger) -> dict[str, float]:
    """Released GPU-seconds of each lineage run in the window (its kept progress)."""
    seg = ledger.segments
    seg = seg.filter((seg.category == Category.RELEASED.value) & seg.run.notnull())
    table = seg.group_by("run").aggregate(gpu_s=((seg.end_s - seg.start_s) * seg.gpus).sum())
    return {r["run"]: float(r["gpu_s"]) for r in table.to_pyarrow().to_pylist()}


def _global_lineage_parameters(
    facts: list[fit_lineage.RunFacts], ledger: Ledger
) -> list[Parameter]:
    """Failure settings the scenario holds once for all runs: software failures, detection,
    manual restarts and rollbacks."""
    params = [_software(facts), *_detection(facts, ledger), *_manual(facts)]
    days = sum(f.running_s for f in facts) / 86400
    rollbacks = sum(f.rollbacks for f in facts)
    params.append(
        fitted(
            "failures.rollbacks_per_day",
            poisson_rate(rollbacks, days),
            unit="per day",
            events=rollbacks,
            evidence=f"{rollbacks} lineage jobs cancelled by their user over {days:,.1f} running days",
        )
    )
    return params


def _software(facts: list[fit_lineage.RunFacts]) -> Parameter:
    if not facts:
        return stated(
            "failures.rate.software",
            0.0,
            unit="per 1,000 node-days",
            status=Status.ASSUMED,
            evidence="no lineage run: the simulator draws software failures for lineage jobs only",
        )
    count = sum(f.software_failures for f in facts)
    return fit_failures.software_rate(count, sum(f.running_node_s for f in facts))


def _detection(facts: list[fit_lineage.RunFacts], ledger: Ledger) -> list[Parameter]:
    """Fault to Slurm's notice: the manifest's failure_detection_s (the records cannot show when
    a fault happened, only when Slurm saw it)."""
    settings = [
        ledger.manifest.failure_detection_s[f.shape.name]
        for f in facts
        if f.shape.name in ledger.manifest.failure_detection_s
    ]
    if settings:
        value = float(median_estimate(settings).value)
        evidence = "manifest run_settings failure_detection_s (FAILED and NODE_FAIL alike)"
        return [
            stated(
                "failures.detection_s", value, unit="s", status=Status.SETTING, evidence=evidence
            ),
            stated(
                "failures.software_detection_s",
                value,
                unit="s",
                status=Status.SETTING,
                evidence=evidence,
            ),
        ]
    evidence = "a fault's time is not in Slurm's records and the manifest gives none: the default"
    return [
        stated("failures.detection_s", 120.0, unit="s", status=Status.ASSUMED, evidence=evidence),
        stated(
            "failures.software_detection_s",
            60.0,
            unit="s",
            status=Status.ASSUMED,
            evidence=evidence,
        ),
    ]


def _manual(facts: list[fit_lineage.RunFacts]) -> list[Parameter]:
    """Restarts that waited for a person: gaps far longer than the run's usual one."""
    manual: list[float] = []
    total = 0
    for f in facts:
        usual = fit_lineage.usual_gap(list(f.restart_gaps))
        total += len(f.restart_gaps)
        manual += [g - usual for g in f.restart_gaps if fit_lineage.is_manual(g, usual)]
    share = fitted(
        "failures.manual_share",
        proportion(len(manual), total),
        unit="share",
        events=len(manual),
        evidence=f"{len(manual)} of {total} restarts after a failure waited far longer than usual",
    )
    if not manual:
        delay = stated(
            "failures.manual_delay_s",
            3600.0,
            unit="s",
            status=Status.ASSUMED,
            evidence="no restart waited for a person: the default (unused at share 0)",
        )
    else:
        delay = fitted(
            "failures.manual_delay_s",
            median_estimate(manual),
            unit="s",
            events=len(manual),
            evidence=f"median extra wait of {len(manual)} restarts by hand",
        )
    return [share, delay]


def _research(
    con: duckdb.DuckDBPyConnection,
    jobs: str,
    facts: list[fit_lineage.RunFacts],
    window: Window,
    gpn: int,
) -> _Part:
    """Classes, parameters, backfill and notes of the research workload."""
    table = fit_research.research_table(con, jobs, gpn)
    arrivals = [p for p in fit_research.arrival_parameters(con, table, window) if p.value > 0]
    classes = tuple(int(p.key.rsplit(".", 1)[1]) for p in arrivals)
    if not classes:
        return _Part(params=[], notes=["no research jobs in the window: the scenario has none"])
    params = list(arrivals)
    limits: dict[int, float] = {}
    for cls in classes:
        limit = fit_research.limit_parameter(con, table, cls, window.duration_s)
        limits[cls] = limit.value
        params.append(limit)
        params += fit_research.duration_parameters(con, table, cls, window.end_s, limit.value)
    states = fit_research.end_state_parameters(con, table, window, limits)
    notes = (
        [
            f"{states.unsettled:,} research jobs started too late (or never ended) to show their "
            "end state: the end-state shares leave them out"
        ]
        if states.unsettled
        else []
    )
    lineage_nodes = sorted({n for f in facts for n in f.nodes})
    return _Part(
        params=params + states.params,
        notes=notes,
        classes=classes,
        backfill=fit_research.ran_on(con, jobs, lineage_nodes),
    )


def _assumed_notes(params: list[Parameter]) -> list[str]:
    return [f"{p.key} assumed: {p.evidence}" for p in params if p.status is Status.ASSUMED]


def _with_enough_spares(
    facts: list[fit_lineage.RunFacts], params: list[Parameter], unused: int
) -> tuple[list[fit_lineage.RunFacts], list[str]]:
    """Runs that never waited for a repaired node get spares enough not to (see
    ``fit_lineage.enough_spares``): the window shows only the spares a run happened to use. The
    extra spares come out of the ``unused`` nodes (no job ran on them in the window), shared out
    when they are too few: a hot spare sits idle, so a node that ran research is not one (taking
    it would add idle time the window did not have)."""
    values = {p.key: p.value for p in params}
    rate = values["failures.hardware_total"] / 1000
    repair_days = values["failures.repair_mean_s"] / 86400
    wanted = [fit_lineage.enough_spares(f, rate, repair_days) - f.shape.spare_nodes for f in facts]
    given = wanted
    if sum(wanted) > unused:
        given = [w * unused // sum(wanted) for w in wanted]
    changed, notes = [], []
    for f, want, extra in zip(facts, wanted, given, strict=True):
        if extra < want:
            notes.append(
                f"lineage run {f.shape.name} never waited for a repaired node, but only {extra} "
                f"of the {want} more spares that would keep the simulator's run from waiting sat "
                "unused in the window: the replay's run may wait where this one did not"
            )
        if extra > 0:
            spares = f.shape.spare_nodes + extra
            notes.append(
                f"lineage run {f.shape.name} used {f.shape.spare_nodes} spare nodes and never "
                f"waited for a repaired one: the scenario gives it {spares}, so that the "
                f"simulator's run seldom waits either (at most {1 - fit_lineage.SPARE_QUANTILE:.1%} "
                "of the time, within the nodes no job used)"
            )
            f = dataclasses.replace(f, shape=dataclasses.replace(f.shape, spare_nodes=spares))
        changed.append(f)
    return changed, notes
