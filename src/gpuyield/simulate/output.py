"""Write a simulation as the files a real cluster would give the ledger, plus ``truth.json``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from gpuyield.simulate import slurm_text as st
from gpuyield.simulate.calibration import CAUSES_BY_ID
from gpuyield.simulate.cluster import SimulationResult
from gpuyield.simulate.failures import HARDWARE_CAUSES
from gpuyield.simulate.fleet_truth import fleet_truth
from gpuyield.simulate.fleet_types import is_typed, model_of
from gpuyield.simulate.research_states import S_RUNNING
from gpuyield.simulate.scenario import Scenario
from gpuyield.simulate.truth import Truth, compute_truth


def write_outputs(result: SimulationResult, out_dir: Path) -> Truth:
    """Write the simulator's output directory (docs/contracts.md); returns the truth written."""
    # Arrow formats the sacct rows; imported here so that `import gpuyield.simulate` (sweeps,
    # plans) does not pay its start-up (about 90 MB and a few tenths of a second).
    from gpuyield.simulate.sacct_file import write_sacct

    out_dir.mkdir(parents=True, exist_ok=True)
    truth = compute_truth(result)
    write_sacct(out_dir / "sacct.psv", result)
    (out_dir / "events.psv").write_text(_events_text(result), encoding="utf-8")
    (out_dir / "nodes.txt").write_text(_nodes_text(result), encoding="utf-8")
    (out_dir / "manifest.toml").write_text(_manifest_text(result), encoding="utf-8")
    telemetry = [run for run in result.lineage if run.telemetry]
    if telemetry:
        (out_dir / "telemetry").mkdir(exist_ok=True)
        for run in telemetry:
            text = "\n".join(run.telemetry) + "\n"
            (out_dir / "telemetry" / f"{run.run}.jsonl").write_text(text, encoding="utf-8")
    document = truth.to_dict()
    typed = fleet_truth(result)  # a typed fleet's truth by GPU type and weighted
    if typed is not None:
        document.update(typed.to_dict())
    text = json.dumps(document, indent=2) + "\n"
    (out_dir / "truth.json").write_text(text, encoding="utf-8")
    return truth


def _names(result: SimulationResult) -> st.NodeNaming:
    fleet = result.scenario.fleet
    return st.node_namer(fleet.node_prefix, fleet.num_nodes)


def _node_events(result: SimulationResult) -> list[tuple[int, int, str, int, int | None, str, str]]:
    """(node, start, state, end in window, end or None if still on, reason, user) per node event."""
    sc, out = result.scenario, result.outages
    end = sc.end_s
    node_events = []
    for i in range(len(out)):
        node = int(out.node[i])
        detect, drain, back = int(out.detect_s[i]), int(out.drain_s[i]), int(out.back_s[i])
        if detect >= end:
            continue
        if out.planned[i]:
            reason = sc.maintenance[int(out.cause[i])].reason
            stop = back if back < end else None
            node_events.append((node, detect, "DRAIN", min(back, end), stop, reason, "root(0)"))
            continue
        cause = CAUSES_BY_ID[HARDWARE_CAUSES[int(out.cause[i])]]
        dead = cause.reason == "Not responding"
        node_events.append(
            (
                node,
                detect,
                "DOWN*" if dead else "DOWN",
                min(drain, end),
                drain if drain < end else None,
                cause.reason,
                "slurm(64030)" if dead else "root(0)",
            )
        )
        if drain < end:
            node_events.append(
                (
                    node,
                    drain,
                    "DRAIN",
                    min(back, end),
                    back if back < end else None,
                    cause.repair_reason,
                    "root(0)",
                )
            )
    return node_events


def _events_text(result: SimulationResult) -> str:
    sc = result.scenario
    naming = _names(result)
    prefix, width = naming.prefix, naming.width
    gpn = sc.fleet.gpus_per_node
    lines = [st.EVENT_HEADER, _cluster_event(sc, prefix, width)]
    tres = st.node_tres(gpn)
    node_events = _node_events(result)
    for node, start, state, upto, stop, reason, user in sorted(node_events):
        lines.append(
            "|".join(
                (
                    sc.cluster,
                    "",
                    st.node_name(node, prefix, width),
                    "Node",
                    "2",
                    state,
                    str(st.STATE_RAW[state]),
                    st.time1(start),
                    st.time1(stop),
                    st.duration(upto - start),
                    reason,
                    user,
                    tres,
                )
            )
        )
    return "\n".join(lines) + "\n"


def _cluster_event(sc: Scenario, prefix: str, width: int) -> str:
    """The event line registering the cluster's TRES over the whole window."""
    all_nodes = st.hostlist(range(sc.fleet.num_nodes), prefix, width)
    return "|".join(
        (
            sc.cluster,
            all_nodes,
            "",
            "Cluster",
            "1",
            "",
            "0",
            st.time1(sc.start_s),
            "Unknown",
            st.duration(sc.end_s - sc.start_s),
            "Cluster Registered TRES",
            "",
            st.cluster_tres(sc.fleet.num_nodes, sc.fleet.gpus_per_node),
        )
    )


def _nodes_text(result: SimulationResult) -> str:
    sc = result.scenario
    naming = _names(result)
    prefix, width = naming.prefix, naming.width
    gpn = sc.fleet.gpus_per_node
    alloc = _allocated_at_end(result)
    state = _out_at_end(result)
    boot = st.time1(sc.start_s)
    lines = []
    train_nodes = sc.group_nodes_total()
    for node in range(sc.fleet.num_nodes):
        used = int(alloc[node])
        default = ("ALLOCATED" if used == gpn else "MIXED" if used else "IDLE", "")
        text, reason = state.get(node, default)
        research = node >= train_nodes
        # A typed fleet's nodes are each in their own partition, as its prices are.
        partitions = ("research" if research else "train") if is_typed(sc.fleet) else None
        lines.append(
            st.scontrol_node(
                st.node_name(node, prefix, width),
                text,
                gpn,
                used,
                reason or None,
                boot,
                gres_type=gres_type(result, research=research),
                partitions=partitions or "train,research",
            )
        )
    return "\n".join(lines) + "\n"


def _allocated_at_end(result: SimulationResult) -> np.ndarray:
    """GPUs allocated on each node at the window end (jobs still running there)."""
    alloc = np.zeros(result.scenario.fleet.num_nodes, dtype=np.int64)
    for run in result.lineage:
        for row in run.rows:
            if row.start_s is not None and row.end_s is None:
                alloc[list(row.nodes)] += row.num_gpus // len(row.nodes)
    if result.rows is not None:
        rows = result.rows
        for i in np.flatnonzero(rows.state == S_RUNNING).tolist():
            nodes = rows.nodes_of(i)
            alloc[nodes] += int(rows.num_gpus[i]) // nodes.size
    return alloc


def _out_at_end(result: SimulationResult) -> dict[int, tuple[str, str]]:
    """Node -> (state, reason) of the nodes out of service at the window end."""
    out, end = result.outages, result.scenario.end_s
    state: dict[int, tuple[str, str]] = {}
    open_now = np.flatnonzero((out.detect_s < end) & (out.back_s >= end))
    for i in open_now.tolist():
        if out.planned[i]:
            reason = result.scenario.maintenance[int(out.cause[i])].reason
            state[int(out.node[i])] = ("IDLE+DRAIN", reason)
            continue
        cause = CAUSES_BY_ID[HARDWARE_CAUSES[int(out.cause[i])]]
        if out.drain_s[i] < end:
            state[int(out.node[i])] = ("IDLE+DRAIN", cause.repair_reason)
        else:
            dead = cause.reason == "Not responding"
            state[int(out.node[i])] = ("DOWN*" if dead else "DOWN", cause.reason)
    return state


def _manifest_text(result: SimulationResult) -> str:
    """The release manifest, written with a TOML library (run and release names may hold quotes,
    backslashes or newlines; hand-built TOML broke on a release named ``pt "check"``)."""
    import tomli_w

    # Only runs with a job in the window: a manifest naming a run the logs never show is an error
    # for the ledger (a run submitted after a shortened --duration window simply is not there yet).
    present = [
        r for r, res in zip(result.scenario.lineage, result.lineage, strict=True) if res.rows
    ]
    releases: dict[str, list[str]] = {}
    for run in present:
        releases.setdefault(run.release, []).append(run.name)
    data: dict[str, Any] = {
        "runs": {"match": "comment:run=(?P<run>[^,\\s]+)"},
        "releases": [{"model": model, "runs": runs} for model, runs in releases.items()],
    }
    if result.jobs is not None and result.rows is not None:
        # Jobs with a row in the window, in job order (a mask: np.unique of millions of rows
        # took seconds).
        seen = np.zeros(result.jobs.job_id.size, dtype=bool)
        seen[result.rows.job] = True
        diverged = result.jobs.job_id[seen & result.jobs.diverged]
        if diverged.size:
            data["diverged"] = [{"run": f"r{job_id}"} for job_id in diverged.tolist()]
    # What the run's own configuration says, so the ledger can estimate overhead and lost
    # progress without telemetry (docs/manifest.md).
    data["run_settings"] = {
        run.name: {
            "checkpoint_interval_s": run.checkpoint_interval_s,
            "checkpoint_save_s": run.checkpoint_write_s,
            "restart_s": run.startup_s,
            "failure_detection_s": result.scenario.failures.detection_s,
        }
        for run in present
    }
    for empty in [key for key in ("releases", "run_settings") if not data[key]]:
        del data[empty]
    prices = _prices(result)
    if prices:
        data["prices"] = prices
    header = "# Release manifest written by `gpuyield simulate` (format: docs/contracts.md).\n"
    return header + tomli_w.dumps(data)


def gres_type(result: SimulationResult, *, research: bool) -> str:
    """The GRES type of the train or research nodes of a typed fleet (its catalog id), else ""."""
    fleet = result.scenario.fleet
    return model_of(fleet, research=research) if is_typed(fleet) else ""


def _prices(result: SimulationResult) -> dict[str, Any]:
    """``[prices]`` of a priced fleet: the train nodes' price by model, the research
    partition's in its own table (a model may cost differently in each)."""
    fleet = result.scenario.fleet
    if not (fleet.price_per_gpu_hour or fleet.research_price_per_gpu_hour):
        return {}
    train, research = model_of(fleet, research=False), model_of(fleet, research=True)
    return {
        "source": "gpuyield simulate: the scenario's fleet prices",
        "basis": "list",
        train: fleet.price_per_gpu_hour,
        "partitions": {"research": {research: fleet.research_price_per_gpu_hour}},
    }
