"""Turn the Philly trace slice (tests/ingest/fixtures/philly) into inputs gpuyield ingests.

The slice is facts: per-job files of per-GPU, per-minute ``nvidia-smi`` utilization, the jobs'
``cluster_job_log`` entries (placement per machine and GPU, start and end) and the machine list.
This module writes what a Slurm cluster with the DCGM exporter would have given for the same
facts: ``sacct`` rows, a cluster-registration event, ``scontrol show node`` lines, and a
Prometheus ``query_range`` response of ``DCGM_FI_DEV_GPU_UTIL`` whose ``hpc_job`` label names the
job holding the GPU at the scrape instant (the exporter's job mapping), none when no job did.

Philly times are Pacific local time (``PST``/``PDT``); sacct text keeps them so, and is ingested
with ``tz=America/Los_Angeles``; Prometheus times are epoch seconds.
"""

from __future__ import annotations

import csv
import json
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

PHILLY = Path(__file__).parent / "fixtures" / "philly"
TZ_NAME = "America/Los_Angeles"
STEP_S = 60
_STATES = {"Pass": "COMPLETED", "Failed": "FAILED", "Killed": "CANCELLED"}
SACCT_HEADER = (
    "JobID|JobIDRaw|JobName|User|Account|Partition|State|Submit|Start|End|ElapsedRaw|"
    "AllocTRES|NodeList|NNodes|Comment"
)
EVENT_HEADER = (
    "Cluster|Cluster Nodes|NodeName|Event|EventRaw|State|StateRaw|TimeStart|TimeEnd|"
    "Duration|Reason|User|TRES"
)


@dataclass(frozen=True, kw_only=True, slots=True)
class Sample:
    """One per-minute reading of one GPU, as the slice's files hold it."""

    machine: str
    gpu: int
    t_s: int
    util_pct: float


@dataclass(frozen=True, kw_only=True, slots=True)
class PhillyInputs:
    """Paths of the converted inputs and the window the samples cover."""

    sacct: Path
    events: Path
    nodes: Path
    prom_json: Path
    since_s: int
    until_s: int
    capture_until_s: int


def local_epoch(text: str) -> int:
    """Epoch seconds of a Philly time (``2017-11-16 07:51:02``, Pacific local time)."""
    return int(datetime.fromisoformat(text).replace(tzinfo=ZoneInfo(TZ_NAME)).timestamp())


def slurm_id(philly_job_id: str) -> str:
    """``application_1508364558011_44664`` -> ``44664`` (unique within the slice)."""
    return philly_job_id.rsplit("_", 1)[1]


def jobs() -> list[dict[str, object]]:
    loaded: list[dict[str, object]] = json.loads((PHILLY / "sampled_jobs.json").read_text())
    return loaded


def machine_gpus() -> dict[str, int]:
    with (PHILLY / "cluster_machine_list").open() as f:
        rows = list(csv.reader(f))[1:]
    return {r[0]: int(r[1]) for r in rows}


def samples() -> list[Sample]:
    """Every reading of the slice, once (files of jobs sharing a GPU may repeat a minute).

    A file's columns -10..3 are minutes from the job's start rounded down to the minute.
    """
    seen: dict[tuple[str, int, int], Sample] = {}
    for job in jobs():
        minute0 = datetime.fromisoformat(str(job["start_time"])).replace(second=0)
        with (PHILLY / "gpu_util" / f"{job['jobid']}.csv").open() as f:
            reader = csv.reader(f)
            offsets = [int(x) for x in next(reader)[3:]]
            for row in reader:
                machine, gpu = row[0].split("_gpu")
                for offset, value in zip(offsets, row[3:], strict=True):
                    if value == "":
                        continue
                    t = minute0 + timedelta(minutes=offset)
                    s = Sample(
                        machine=machine,
                        gpu=int(gpu),
                        t_s=local_epoch(t.isoformat(sep=" ")),
                        util_pct=float(value),
                    )
                    key = (s.machine, s.gpu, s.t_s)
                    assert seen.setdefault(key, s) == s, f"two readings disagree at {key}"
    return sorted(seen.values(), key=lambda s: (s.machine, s.gpu, s.t_s))


def write_inputs(out: Path) -> PhillyInputs:
    out.mkdir(parents=True, exist_ok=True)
    readings = samples()
    since_s = min(s.t_s for s in readings) - STEP_S
    capture_until_s = max(local_epoch(str(j["end_time"])) for j in jobs())
    machines = machine_gpus()
    names = sorted(machines, key=lambda m: int(m[1:]))
    inputs = PhillyInputs(
        sacct=out / "sacct.psv",
        events=out / "events.psv",
        nodes=out / "nodes.txt",
        prom_json=out / "dcgm_query_range.json",
        since_s=since_s,
        until_s=max(s.t_s for s in readings),
        capture_until_s=capture_until_s,
    )
    inputs.sacct.write_text("\n".join([SACCT_HEADER, *map(_sacct_line, jobs())]) + "\n")
    registered = datetime.fromtimestamp(since_s, ZoneInfo(TZ_NAME)).strftime("%Y-%m-%dT%H:%M:%S")
    node_list = "m[" + ",".join(m[1:] for m in names) + "]"
    inputs.events.write_text(
        f"{EVENT_HEADER}\nphilly|{node_list}||Cluster|1||0|{registered}|Unknown||"
        f"Cluster Registered TRES||cpu={len(names)},gres/gpu={sum(machines.values())}\n"
    )
    inputs.nodes.write_text(
        "".join(
            f"NodeName={m} Arch=x86_64 Gres=gpu:{machines[m]} State=IDLE Partitions=gpu "
            f"CfgTRES=cpu=1,mem=1000M,gres/gpu={machines[m]}\n"
            for m in names
        )
    )
    inputs.prom_json.write_text(json.dumps(_query_range(readings)))
    return inputs


def _sacct_line(job: dict[str, object]) -> str:
    detail = job["detail"]
    assert isinstance(detail, list)
    jid = slurm_id(str(job["jobid"]))
    start, end = (str(job[k]).replace(" ", "T") for k in ("start_time", "end_time"))
    gpus = sum(len(d["gpus"]) for d in detail)
    elapsed = local_epoch(str(job["end_time"])) - local_epoch(str(job["start_time"]))
    return "|".join(
        [
            jid,
            jid,
            f"philly{jid}",
            str(job["user"]),
            str(job["vc"]),
            "gpu",
            _STATES[str(job["status"])],
            str(job["submitted_time"]).replace(" ", "T"),
            start,
            end,
            str(elapsed),
            f"billing=1,cpu=1,gres/gpu={gpus},node={len(detail)}",
            ",".join(d["ip"] for d in detail),
            str(len(detail)),
            "",
        ]
    )


def _holder(machine: str, gpu: int, t_s: int) -> str | None:
    """The job whose placement held the GPU at the scrape instant ``t_s``, if one did."""
    for job in jobs():
        detail = job["detail"]
        assert isinstance(detail, list)
        placed = any(d["ip"] == machine and f"gpu{gpu}" in d["gpus"] for d in detail)
        start, end = local_epoch(str(job["start_time"])), local_epoch(str(job["end_time"]))
        if placed and start <= t_s < end:
            return slurm_id(str(job["jobid"]))
    return None


def _query_range(readings: list[Sample]) -> dict[str, object]:
    series: dict[tuple[str, int, str | None], list[list[object]]] = {}
    for s in readings:
        key = (s.machine, s.gpu, _holder(s.machine, s.gpu, s.t_s))
        series.setdefault(key, []).append([s.t_s, repr(s.util_pct)])
    result = []
    for (machine, gpu, job), values in series.items():
        labels = {"__name__": "DCGM_FI_DEV_GPU_UTIL", "Hostname": machine, "gpu": str(gpu)}
        if job is not None:
            labels["hpc_job"] = job
        result.append({"metric": labels, "values": values})
    return {"status": "success", "data": {"resultType": "matrix", "result": result}}
