"""Build small, readable Slurm inputs for ledger tests: named instants, one line per job or event."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

T0 = datetime(2026, 1, 1, 0, 0, 0, tzinfo=UTC)
T0_S = int(T0.timestamp())
HOUR_S = 3600
GPUS_PER_NODE = 8

SACCT_FIELDS = (
    "JobID|JobIDRaw|JobName|User|Account|Partition|State|Submit|Start|End|ElapsedRaw|"
    "AllocTRES|NodeList|NNodes|Comment"
)
EVENT_HEADER = (
    "Cluster|Cluster Nodes|NodeName|Event|EventRaw|State|StateRaw|TimeStart|TimeEnd|"
    "Duration|Reason|User|TRES"
)


def ts(offset_s: int | None) -> str:
    """Slurm's time text for T0 + offset (``Unknown`` for None)."""
    if offset_s is None:
        return "Unknown"
    return datetime.fromtimestamp(T0_S + offset_s, UTC).strftime("%Y-%m-%dT%H:%M:%S")


@dataclass
class Job:
    """One sacct -X -D row."""

    job_id: int
    start_s: int | None
    end_s: int | None
    state: str = "COMPLETED"
    gpus: int | None = 8
    nodes: str = "n1"
    run: str = ""
    account: str = "acct"
    user: str = "alice"
    submit_s: int | None = None
    tres: str | None = None

    def line(self) -> str:
        tres = (
            self.tres
            if self.tres is not None
            else ("" if self.gpus is None else f"billing=1,cpu=1,gres/gpu={self.gpus},node=1")
        )
        elapsed = 0 if self.start_s is None else ((self.end_s or self.start_s) - self.start_s)
        node_count = self.nodes.count(",") + 1 if "[" not in self.nodes else 2
        submit = self.submit_s if self.submit_s is not None else (self.start_s or 0)
        comment = f"run={self.run}" if self.run else ""
        return "|".join(
            [
                str(self.job_id),
                str(self.job_id),
                f"job{self.job_id}",
                self.user,
                self.account,
                "gpu",
                self.state,
                ts(submit),
                ts(self.start_s) if self.start_s is not None else "None",
                ts(self.end_s),
                str(elapsed),
                tres,
                self.nodes,
                str(node_count),
                comment,
            ]
        )


@dataclass
class Event:
    """One sacctmgr node event."""

    node: str
    start_s: int
    end_s: int | None
    state: str = "DOWN"
    reason: str = "hw fault"

    def line(self) -> str:
        return "|".join(
            [
                "lab",
                "",
                self.node,
                "Node",
                "2",
                self.state,
                "1",
                ts(self.start_s),
                ts(self.end_s),
                "",
                self.reason,
                "root(0)",
                f"cpu=8,gres/gpu={GPUS_PER_NODE}",
            ]
        )


@dataclass
class Cluster:
    """A whole small cluster: nodes, jobs, events, and where to write them."""

    num_nodes: int = 2
    jobs: list[Job] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)
    registered_s: int = 0
    registrations: list[Registration] | None = None
    """"Cluster Registered TRES" rows; default: one at ``registered_s`` for all nodes."""
    inventory: dict[str, int] | None = None
    """Node name -> GPUs in nodes.txt; default: every node with GPUS_PER_NODE."""

    def write(self, directory: Path) -> dict[str, Path]:
        directory.mkdir(parents=True, exist_ok=True)
        sacct = directory / "sacct.psv"
        sacct.write_text("\n".join([SACCT_FIELDS, *[j.line() for j in self.jobs]]) + "\n")
        events = directory / "events.psv"
        registrations = self.registrations or [
            Registration(
                self.registered_s, f"n[1-{self.num_nodes}]", GPUS_PER_NODE * self.num_nodes
            )
        ]
        rows = [r.line(registrations[i + 1 :]) for i, r in enumerate(registrations)]
        events.write_text("\n".join([EVENT_HEADER, *rows, *[e.line() for e in self.events]]) + "\n")
        inventory = self.inventory or {f"n{i}": GPUS_PER_NODE for i in range(1, self.num_nodes + 1)}
        nodes = directory / "nodes.txt"
        nodes.write_text(
            "".join(
                f"NodeName={name} Arch=x86_64 Gres=gpu:{gpus} State=IDLE Partitions=gpu "
                f"CfgTRES=cpu=8,mem=4000M,gres/gpu={gpus}\n"
                for name, gpus in inventory.items()
            )
        )
        return {"sacct": sacct, "events": events, "nodes": nodes}


@dataclass
class Registration:
    """One "Cluster Registered TRES" row: the nodes and GPUs of the cluster from ``start_s``."""

    start_s: int
    node_list: str
    num_gpus: int

    def line(self, later: list[Registration]) -> str:
        # As slurmdbd records them: a registration ends when the next one starts.
        end = later[0].start_s if later else None
        return "|".join(
            [
                "lab",
                self.node_list,
                "",
                "Cluster",
                "1",
                "",
                "0",
                ts(self.start_s),
                ts(end),
                "",
                "Cluster Registered TRES",
                "",
                f"cpu=8,gres/gpu={self.num_gpus}",
            ]
        )
