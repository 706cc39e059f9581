"""The test's own reading of what real Slurm printed, and the ledger rules applied to it.

Nothing here imports gpuyield: these are the numbers the ledger is checked against, derived straight
from ``sacct -a -P -X -D``, ``sacctmgr show event`` and ``sinfo`` output and from the rules in
``docs/contracts.md``. Kept small on purpose; it handles what the lab workload produces and raises
``OracleError`` on anything it does not (overlapping events on one node, unknown job states).

All instants are integer epoch seconds (UTC); intervals are half-open ``[start_s, end_s)``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from fractions import Fraction

#: sacct -X -D columns the test asks for (no SubmitLine: it can span several physical lines).
SACCT_FORMAT = "JobIDRaw,JobID,JobName,State,Start,End,ElapsedRaw,AllocTRES,NodeList,NNodes,Comment"

# Ledger rules from docs/contracts.md, as sets of the first word of sacct's State.
FAILED_STATES = frozenset({"FAILED", "NODE_FAIL", "BOOT_FAIL", "OUT_OF_MEMORY"})
STOPPED_STATES = frozenset({"PREEMPTED", "CANCELLED", "REQUEUED"})
NON_LINEAGE_FAILED = FAILED_STATES | {"TIMEOUT", "DEADLINE"}
HARDWARE_STATES = frozenset({"NODE_FAIL", "BOOT_FAIL"})
# A FAILED job with "a node event starting on its nodes from 10 min before to 5 min after its end"
HARDWARE_EVENT_BEFORE_S = 600
HARDWARE_EVENT_AFTER_S = 300

CATEGORIES = (
    "down",
    "idle",
    "failed",
    "cancelled",
    "diverged",
    "experiment",
    "overhead",
    "released",
)


class OracleError(Exception):
    """Input the oracle was not written for; the test must be extended, not the number guessed."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Window:
    """The ledger window."""

    start_s: int  # inclusive
    end_s: int  # exclusive

    def __post_init__(self) -> None:
        if self.end_s <= self.start_s:
            raise OracleError(
                f"window.end_s {self.end_s} must be after window.start_s {self.start_s}"
            )

    def clip(self, start_s: int, end_s: int) -> tuple[int, int] | None:
        """The part of ``[start_s, end_s)`` inside the window, or None."""
        a, b = max(start_s, self.start_s), min(end_s, self.end_s)
        return (a, b) if b > a else None


@dataclass(frozen=True, kw_only=True, slots=True)
class JobRun:
    """One row of ``sacct -X -D``: one run of a job (a requeued job has one row per run)."""

    job_id: str  # JobID as printed, e.g. "8_1"
    name: str
    state: str  # first word of State: "CANCELLED by 0" -> "CANCELLED"
    start_s: int | None  # None: never started
    end_s: int | None  # None: still running ("Unknown")
    elapsed_s: int
    num_gpus: int  # gres/gpu in AllocTRES, over all of the job's nodes
    nodes: tuple[str, ...]
    run: str | None  # from Comment "run=<id>"; empty while a job runs

    def interval(self, window: Window) -> tuple[int, int] | None:
        """In-window part of the run; a running job runs to the window end."""
        if self.start_s is None or self.num_gpus == 0:
            return None
        return window.clip(self.start_s, self.end_s if self.end_s is not None else window.end_s)

    def gpu_seconds(self, window: Window) -> int:
        """GPU-seconds allocated inside the window."""
        span = self.interval(window)
        return 0 if span is None else self.num_gpus * (span[1] - span[0])

    def gpus_on_node(self) -> Fraction:
        """The contract spreads a job's GPUs evenly over its nodes."""
        return Fraction(self.num_gpus, len(self.nodes))


@dataclass(frozen=True, kw_only=True, slots=True)
class NodeEvent:
    """One node row of ``sacctmgr show event`` (DOWN, DOWN*, DRAIN, ...)."""

    node: str
    state: str
    start_s: int
    end_s: int | None  # None: still open ("Unknown")
    reason: str

    @property
    def planned(self) -> bool:
        """MAINT state or a reason that says maintenance (contract: down.planned)."""
        return "MAINT" in self.state.upper() or "maint" in self.reason.lower()


@dataclass(frozen=True, kw_only=True, slots=True)
class Releases:
    """The parts of the release manifest the oracle needs (the test writes the TOML from this)."""

    lineage_runs: frozenset[str]
    diverged_runs: frozenset[str] = frozenset()
    checkpoint_interval_s: Mapping[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for run, interval in self.checkpoint_interval_s.items():
            if interval <= 0:
                raise OracleError(
                    f"releases.checkpoint_interval_s[{run!r}] must be > 0, got {interval}"
                )


def parse_time(text: str) -> int | None:
    """Slurm's ``YYYY-MM-DDTHH:MM:SS`` (UTC on the lab) to epoch seconds; None for Unknown/None."""
    if text in ("Unknown", "None", ""):
        return None
    return int(datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp())


def format_time(epoch_s: int) -> str:
    """Epoch seconds to Slurm's zoneless UTC form."""
    return datetime.fromtimestamp(epoch_s, UTC).strftime("%Y-%m-%dT%H:%M:%S")


def expand_hostlist(text: str) -> tuple[str, ...]:
    """``n[1-2],n4`` -> ("n1", "n2", "n4"); ``None assigned`` -> ()."""
    if text in ("", "None assigned"):
        return ()
    names: list[str] = []
    for prefix, ranges, plain in re.findall(r"([^,\[]+)\[([^\]]+)\]|([^,\[\]]+)", text):
        if plain:
            names.append(plain)
            continue
        for part in ranges.split(","):
            lo, _, hi = part.partition("-")
            width = len(lo)
            names.extend(f"{prefix}{i:0{width}d}" for i in range(int(lo), int(hi or lo) + 1))
    return tuple(names)


def psv_records(text: str) -> list[dict[str, str]]:
    """Rows of a ``-P`` table with a header. ``-P`` does not quote, so a record whose field holds a
    newline (a multi-line SubmitLine) spans several physical lines: join them until it has every
    field.
    """
    lines = text.splitlines()
    header = lines[0].split("|")
    records: list[dict[str, str]] = []
    pending = ""
    for line in lines[1:]:
        pending = f"{pending}\n{line}" if pending else line
        fields = pending.split("|")
        if len(fields) < len(header):
            continue
        if len(fields) > len(header):
            raise OracleError(f"record has {len(fields)} fields, header {len(header)}: {pending!r}")
        records.append(dict(zip(header, fields, strict=True)))
        pending = ""
    if pending:
        raise OracleError(f"truncated last record: {pending!r}")
    return records


def _gpus_in_tres(tres: str) -> int:
    match = re.search(r"(?:^|,)gres/gpu=(\d+)", tres)
    return int(match.group(1)) if match else 0


def _run_of(comment: str) -> str | None:
    match = re.search(r"(?:^|,)run=([^,\s]+)", comment)
    return match.group(1) if match else None


def parse_sacct(text: str) -> list[JobRun]:
    """``sacct -a -P -X -D --format=...`` with a header (at least the SACCT_FORMAT columns)."""
    jobs = []
    for row in psv_records(text):
        jobs.append(
            JobRun(
                job_id=row["JobID"],
                name=row["JobName"],
                state=row["State"].split()[0],
                start_s=parse_time(row["Start"]),
                end_s=parse_time(row["End"]),
                elapsed_s=int(row["ElapsedRaw"]),
                num_gpus=_gpus_in_tres(row["AllocTRES"]),
                nodes=expand_hostlist(row["NodeList"]),
                run=_run_of(row["Comment"]),
            )
        )
    return jobs


def parse_events(text: str) -> tuple[int | None, list[NodeEvent]]:
    """``sacctmgr -P show event All_Time format=...`` -> (first registration, node events)."""
    registered: list[int] = []
    events: list[NodeEvent] = []
    for row in psv_records(text):
        start_s = parse_time(row["TimeStart"])
        if start_s is None:
            raise OracleError(f"event without a start: {row}")
        if row["Event"] == "Cluster":
            if row["Reason"] == "Cluster Registered TRES":
                registered.append(start_s)
            continue
        events.append(
            NodeEvent(
                node=row["NodeName"],
                state=row["State"],
                start_s=start_s,
                end_s=parse_time(row["TimeEnd"]),
                reason=row["Reason"],
            )
        )
    return (min(registered) if registered else None), events


def parse_maint_reservations(text: str) -> list[NodeEvent]:
    """``sacctmgr -P show reservation format=...,Flags,NodeNames``: each MAINT reservation as a
    planned event per node (contract: maintenance is planned down time)."""
    events = []
    for row in psv_records(text):
        if "MAINT" not in row["Flags"].split(","):
            continue
        start_s, end_s = parse_time(row["TimeStart"]), parse_time(row["TimeEnd"])
        if start_s is None:
            raise OracleError(f"reservation without a start: {row}")
        events += [
            NodeEvent(node=node, state="MAINT", start_s=start_s, end_s=end_s, reason=row["Name"])
            for node in expand_hostlist(row["NodeName"])
        ]
    return events


def parse_sinfo_gpus(text: str) -> dict[str, int]:
    """``sinfo -h -N -o '%N|%G'`` (one row per node and partition) -> GPUs per node."""
    gpus: dict[str, int] = {}
    for line in text.splitlines():
        node, _, gres = line.partition("|")
        match = re.search(r"gpu(?::[^:(,]+)?:(\d+)", gres)
        gpus[node] = int(match.group(1)) if match else 0
    return gpus


def installed_gpu_seconds(gpus_per_node: Mapping[str, int], window: Window) -> int:
    """Every node's GPUs over the whole window (the window starts at registration or later)."""
    return sum(gpus_per_node.values()) * (window.end_s - window.start_s)


def registered_gpu_seconds(text: str, window: Window) -> int:
    """Installed GPU-seconds as the cluster's registrations say: each "Cluster Registered TRES"
    row's ``gres/gpu`` over its own [TimeStart, TimeEnd) (an open one: to the window end)."""
    total = 0
    for row in psv_records(text):
        if row["Event"] != "Cluster" or row["Reason"] != "Cluster Registered TRES":
            continue
        start_s = parse_time(row["TimeStart"])
        if start_s is None:
            raise OracleError(f"registration without a start: {row}")
        end_s = parse_time(row["TimeEnd"])
        span = window.clip(start_s, window.end_s if end_s is None else end_s)
        if span is not None:
            total += _gpus_in_tres(row["TRES"]) * (span[1] - span[0])
    return total


def allocated_gpu_seconds(jobs: Iterable[JobRun], window: Window) -> int:
    """What sreport calls Allocated: GPUs x in-window run time, every run of every job."""
    return sum(job.gpu_seconds(window) for job in jobs)


def _overlap(a: tuple[int, int], b: tuple[int, int]) -> int:
    return max(0, min(a[1], b[1]) - max(a[0], b[0]))


def _event_spans(
    events: Iterable[NodeEvent], window: Window
) -> list[tuple[NodeEvent, tuple[int, int]]]:
    spans = []
    for event in events:
        span = window.clip(event.start_s, event.end_s if event.end_s is not None else window.end_s)
        if span is not None:
            spans.append((event, span))
    by_node: dict[str, list[tuple[int, int]]] = {}
    for event, span in spans:
        for other in by_node.get(event.node, []):
            if _overlap(span, other):
                raise OracleError(f"overlapping events on {event.node}: {span} and {other}")
        by_node.setdefault(event.node, []).append(span)
    return spans


def down_gpu_seconds(
    events: Iterable[NodeEvent],
    jobs: Iterable[JobRun],
    gpus_per_node: Mapping[str, int],
    window: Window,
) -> dict[str, Fraction]:
    """Down GPU-seconds ("planned", "unplanned"): a node's GPUs during its events, less the GPUs
    jobs held on that node meanwhile (allocation wins)."""
    job_list = list(jobs)
    down = {"planned": Fraction(0), "unplanned": Fraction(0)}
    for event, span in _event_spans(events, window):
        held = sum(
            (
                job.gpus_on_node() * _overlap(span, job_span)
                for job in job_list
                if event.node in job.nodes and (job_span := job.interval(window)) is not None
            ),
            Fraction(0),
        )
        down["planned" if event.planned else "unplanned"] += (
            gpus_per_node[event.node] * (span[1] - span[0]) - held
        )
    return down


def _failed_cause(job: JobRun, events: Iterable[NodeEvent]) -> str:
    if job.state in HARDWARE_STATES:
        return "hardware"
    if job.state == "OUT_OF_MEMORY":
        return "oom"
    if job.state in ("TIMEOUT", "DEADLINE"):  # node events do not relabel these
        return "timeout"
    assert job.end_s is not None, "a failed job has ended"
    if any(
        e.node in job.nodes
        and job.end_s - HARDWARE_EVENT_BEFORE_S <= e.start_s <= job.end_s + HARDWARE_EVENT_AFTER_S
        for e in events
    ):
        return "hardware"
    return "software"


def _lost_gpu_seconds(job: JobRun, interval_s: int | None, window: Window) -> int:
    """Progress lost since the last checkpoint (one every interval from job start; no interval
    known: the whole job), in-window."""
    assert job.start_s is not None and job.end_s is not None, "only ended jobs lose progress"
    lost_s = job.elapsed_s if interval_s is None else job.elapsed_s % interval_s
    span = window.clip(job.end_s - lost_s, job.end_s)
    return 0 if span is None else job.num_gpus * (span[1] - span[0])


def _charge_job(
    job: JobRun, releases: Releases, events: list[NodeEvent], window: Window
) -> dict[str, int]:
    """The job's in-window GPU-seconds by category and subcategory (keys "failed.hardware", ...)."""
    gpu_s = job.gpu_seconds(window)
    state = job.state
    if job.run in releases.lineage_runs:
        if state in ("COMPLETED", "TIMEOUT", "RUNNING"):
            return {"released": gpu_s}
        if state not in FAILED_STATES | STOPPED_STATES:
            raise OracleError(f"lineage job {job.job_id} in state {state}: rule not written")
        lost = _lost_gpu_seconds(job, releases.checkpoint_interval_s.get(job.run), window)
        if state in FAILED_STATES:
            key = f"failed.{_failed_cause(job, events)}"
        else:
            key = "cancelled.preempted" if state == "PREEMPTED" else "cancelled.user"
        return {"released": gpu_s - lost, key: lost}
    if job.run in releases.diverged_runs:
        return {"diverged": gpu_s}
    if state in NON_LINEAGE_FAILED:
        return {f"failed.{_failed_cause(job, events)}": gpu_s}
    if state == "PREEMPTED":
        return {"cancelled.preempted": gpu_s}
    if state in ("CANCELLED", "REQUEUED"):
        return {"cancelled.user": gpu_s}
    if state in ("COMPLETED", "RUNNING"):
        return {"experiment": gpu_s}
    raise OracleError(f"job {job.job_id} in state {state}: rule not written")


@dataclass(frozen=True, kw_only=True, slots=True)
class Ledger:
    """The oracle's ledger for one window."""

    installed_gpu_seconds: int
    allocated_gpu_seconds: int
    categories: dict[str, Fraction]  # every name in CATEGORIES
    subcategories: dict[str, Fraction]  # "failed.hardware", "cancelled.user", "down.planned", ...


def expected_ledger(
    jobs: list[JobRun],
    events: list[NodeEvent],
    gpus_per_node: Mapping[str, int],
    releases: Releases,
    window: Window,
) -> Ledger:
    """Every category of the contract, from the raw Slurm output, for ``window``."""
    sub: dict[str, Fraction] = {}
    for job in jobs:
        if job.interval(window) is None:
            continue
        for key, charged in _charge_job(job, releases, events, window).items():
            sub[key] = sub.get(key, Fraction(0)) + charged
    for cause, down in down_gpu_seconds(events, jobs, gpus_per_node, window).items():
        sub[f"down.{cause}"] = down
    categories = {name: Fraction(0) for name in CATEGORIES}
    for key, amount in sub.items():
        categories[key.partition(".")[0]] += amount
    installed = installed_gpu_seconds(gpus_per_node, window)
    allocated = allocated_gpu_seconds(jobs, window)
    categories["idle"] = installed - allocated - categories["down"]
    return Ledger(
        installed_gpu_seconds=installed,
        allocated_gpu_seconds=allocated,
        categories=categories,
        subcategories={k: v for k, v in sub.items() if "." in k},
    )
