"""A small, independent reading of the simulator's files with the ledger rules of docs/contracts.md.

It parses only the written text (sacct.psv, events.psv, nodes.txt, manifest.toml, telemetry/), never
the simulator's objects, so agreeing with ``truth.json`` checks the files carry the truth. It is a
test oracle, not the ledger: slow, plain Python, for small scenarios.
"""

from __future__ import annotations

import json
import re
import tomllib
from collections import defaultdict
from datetime import UTC, datetime
from pathlib import Path

from gpuyield.hostlist import expand_hostlist

FAILED_STATES = {"FAILED", "NODE_FAIL", "BOOT_FAIL", "OUT_OF_MEMORY"}
CANCEL_STATES = {"PREEMPTED", "CANCELLED", "REQUEUED"}


def epoch(text: str) -> int:
    return int(datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp())


def read_psv(path: Path) -> list[dict[str, str]]:
    lines = path.read_text(encoding="utf-8").splitlines()
    header = lines[0].split("|")
    rows = [dict(zip(header, line.split("|"), strict=True)) for line in lines[1:]]
    return rows


def classify(out_dir: Path, window_end: int) -> dict[str, dict[str, int]]:
    """Categories and subcategories (GPU-seconds) of ``out_dir`` by the contract's rules."""
    manifest = tomllib.loads((out_dir / "manifest.toml").read_text(encoding="utf-8"))
    lineage = {r for rel in manifest.get("releases", []) for r in rel["runs"]}
    diverged = {d["run"] for d in manifest.get("diverged", [])}
    interval = manifest.get("run_settings", {})
    match = re.compile(manifest["runs"]["match"].removeprefix("comment:"))
    gpus_per_node = {
        m.group(1): int(m.group(2))
        for m in re.finditer(
            r"NodeName=(\S+) .*?Gres=gpu:(\d+)", (out_dir / "nodes.txt").read_text(encoding="utf-8")
        )
    }
    events = read_psv(out_dir / "events.psv")
    start = next(epoch(e["TimeStart"]) for e in events if e["Reason"] == "Cluster Registered TRES")
    node_events = [e for e in events if e["NodeName"]]
    telemetry = _telemetry(out_dir)
    cats: dict[str, int] = defaultdict(int)
    subs: dict[str, int] = defaultdict(int)
    alloc_by_node: dict[str, list[tuple[int, int, int]]] = defaultdict(list)
    for row in read_psv(out_dir / "sacct.psv"):
        if row["Start"] == "Unknown":
            continue
        s = max(epoch(row["Start"]), start)
        e = window_end if row["End"] == "Unknown" else min(epoch(row["End"]), window_end)
        gpus = int(re.search(r"gres/gpu=(\d+)", row["AllocTRES"]).group(1))
        nodes = expand_hostlist(row["NodeList"])
        for node in nodes:
            alloc_by_node[node].append((s, e, gpus // len(nodes)))
        state = row["State"].split(" by ")[0]
        run = match.search(row["Comment"]).group("run")
        elapsed = e - s
        if run in lineage:
            _book_lineage(
                cats,
                subs,
                row,
                state,
                elapsed,
                gpus,
                interval[run],
                telemetry.get(row["JobIDRaw"], []),
                s,
                e,
                nodes,
                node_events,
            )
            continue
        if run in diverged:
            cats["diverged"] += elapsed * gpus
        elif state in FAILED_STATES | {"TIMEOUT", "DEADLINE"}:
            cats["failed"] += elapsed * gpus
            subs[f"failed.{_cause(state, e, nodes, node_events)}"] += elapsed * gpus
        elif state in ("CANCELLED", "REQUEUED"):
            cats["cancelled"] += elapsed * gpus
            subs["cancelled.user"] += elapsed * gpus
        elif state == "PREEMPTED":
            cats["cancelled"] += elapsed * gpus
            subs["cancelled.preempted"] += elapsed * gpus
        else:
            assert state in ("COMPLETED", "RUNNING"), state
            cats["experiment"] += elapsed * gpus
    down = 0
    for ev in node_events:
        node = ev["NodeName"]
        s = epoch(ev["TimeStart"])
        e = window_end if ev["TimeEnd"] == "Unknown" else min(epoch(ev["TimeEnd"]), window_end)
        busy = sum(g * max(0, min(e, b) - max(s, a)) for a, b, g in alloc_by_node[node])
        planned = ev["State"] == "MAINT" or "maint" in ev["Reason"].lower()
        subs["down.planned" if planned else "down.unplanned"] += (
            gpus_per_node[node] * (e - s) - busy
        )
        down += gpus_per_node[node] * (e - s) - busy
    installed = sum(gpus_per_node.values()) * (window_end - start)
    allocated = sum((b - a) * g for spans in alloc_by_node.values() for a, b, g in spans)
    cats["down"] = down
    cats["idle"] = installed - allocated - down
    return {"categories": dict(cats), "subcategories": dict(subs), "installed": {"": installed}}


def _cause(state: str, end: int, nodes: list[str], node_events: list[dict[str, str]]) -> str:
    if state in ("NODE_FAIL", "BOOT_FAIL"):
        return "hardware"
    if state in ("OUT_OF_MEMORY", "TIMEOUT", "DEADLINE"):
        return {"OUT_OF_MEMORY": "oom"}.get(state, "timeout")
    for ev in node_events:
        if ev["NodeName"] in nodes and end - 600 <= epoch(ev["TimeStart"]) <= end + 300:
            return "hardware"
    return {"OUT_OF_MEMORY": "oom", "TIMEOUT": "timeout", "DEADLINE": "timeout"}.get(
        state, "software"
    )


def _book_lineage(cats, subs, row, state, elapsed, gpus, interval, lines, s, e, nodes, node_events):
    lost_to = (
        "failed" if state in FAILED_STATES else "cancelled" if state in CANCEL_STATES else None
    )
    if not lines:
        # No telemetry: the run's settings give its timeline (docs/manifest.md run_settings).
        tau, save = interval["checkpoint_interval_s"], interval.get("checkpoint_save_s", 0)
        startup = interval.get("restart_s", 0)
        detected = state in ("FAILED", "NODE_FAIL")
        progress = max(elapsed - interval.get("failure_detection_s", 0), 0) if detected else elapsed
        k = progress // tau
        has_step = progress >= startup
        resumed = s + k * tau if k else s + startup if has_step else s
        lost = e - resumed if lost_to else 0
        overhead = (startup if has_step else 0) + k * save
    else:
        saves = [x for x in lines if x["event"] == "checkpoint_saved" and s <= x["t"] <= e]
        steps = [x["t"] for x in lines if x["event"] == "step" and s <= x["t"] <= e]
        # Lost since the last save, else since the first step, else since job start; start-up
        # (job start to first step) and every save's write stall are overhead.
        resumed = max((x["t"] for x in saves), default=min(steps, default=s))
        lost = e - resumed if lost_to else 0
        overhead = (min(steps) - s if steps else 0) + sum(x["duration_s"] for x in saves)
    if lost_to == "failed":
        subs[f"failed.{_cause(state, e, nodes, node_events)}"] += int(lost * gpus)
    elif lost_to:
        subs["cancelled.user"] += int(lost * gpus)
    if lost_to:
        cats[lost_to] += int(lost * gpus)
    cats["overhead"] += int(overhead * gpus)
    cats["released"] += int((elapsed - lost - overhead) * gpus)


def _telemetry(out_dir: Path) -> dict[str, list[dict]]:
    by_job: dict[str, list[dict]] = defaultdict(list)
    folder = out_dir / "telemetry"
    if not folder.is_dir():
        return by_job
    for path in sorted(folder.glob("*.jsonl")):
        job = None
        for text in path.read_text(encoding="utf-8").splitlines():
            line = json.loads(text)
            if line["event"] == "job_start":
                job = line["job_id"]
            by_job[job].append(line)
    return by_job
