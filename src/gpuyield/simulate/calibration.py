"""Default rates, calibrated from published numbers (sources cited on each table).

Failure causes come from Table 5 of "The Llama 3 Herd of Models" (arXiv 2407.21783), as
transcribed in ``shared/data/llama3-405b-interruptions/llama3_405b_unexpected_interruptions.csv``:
419 unexpected interruptions of one job on 16,384 H100 (2,048 nodes of 8) over 54 days. We turn each
count into a rate per 1,000 node-days of wall time: ``count / (2048 * 54) * 1000``. Research-job end
states come from Kokolis et al., "Revisiting Reliability in Large-Scale ML Research Clusters"
(arXiv 2410.21680), RSC-1 (facts.md section 3).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class CauseKind(StrEnum):
    """How a failure cause shows up in Slurm."""

    # The node dies or is pulled: a node event (DOWN/DOWN*, then DRAIN), its jobs end NODE_FAIL.
    HARDWARE = "hardware"
    # The job's own processes crash or hang: the job ends FAILED, no node event.
    SOFTWARE = "software"


@dataclass(frozen=True, kw_only=True, slots=True)
class Cause:
    """One row of the failure-cause table."""

    #: Short id used in scenario files and in ``truth.json`` ``by_cause``.
    id: str
    #: Component name as published.
    component: str
    #: Published category (GPU, Host, Network, Dependency, Unknown, Unplanned Maintenance).
    category: str
    kind: CauseKind
    #: Interruptions in the Llama 3 405B snapshot.
    llama3_count: int
    #: Node-event reason Slurm shows while the node is DOWN (``Not responding`` means DOWN*).
    reason: str

    @property
    def repair_reason(self) -> str:
        """The DRAIN reason while the node is repaired: it names the part, and never says
        maintenance (the ledger reads that word as planned down time; "Host Maintenance" here is
        Table 5's unplanned kind)."""
        return "repair: " + self.component.lower().replace("maintenance", "unplanned work")


#: Table 5 of arXiv 2407.21783 (counts sum to 419). Reasons are what an admin or health check would
#: set; "unplanned host maintenance" avoids the word maintenance, which the ledger reads as planned.
LLAMA3_CAUSES: tuple[Cause, ...] = (
    Cause(
        id="gpu",
        component="Faulty GPU",
        category="GPU",
        kind=CauseKind.HARDWARE,
        llama3_count=148,
        reason="GPU fell off the bus",
    ),
    Cause(
        id="hbm3",
        component="GPU HBM3 Memory",
        category="GPU",
        kind=CauseKind.HARDWARE,
        llama3_count=72,
        reason="GPU HBM3 uncorrectable ECC error",
    ),
    Cause(
        id="software",
        component="Software Bug",
        category="Dependency",
        kind=CauseKind.SOFTWARE,
        llama3_count=54,
        reason="",
    ),
    Cause(
        id="network",
        component="Network Switch/Cable",
        category="Network",
        kind=CauseKind.HARDWARE,
        llama3_count=35,
        reason="Not responding",
    ),
    Cause(
        id="host_unplanned",
        component="Host Maintenance",
        category="Unplanned Maintenance",
        kind=CauseKind.HARDWARE,
        llama3_count=32,
        reason="host pulled for unplanned repair",
    ),
    Cause(
        id="sram",
        component="GPU SRAM Memory",
        category="GPU",
        kind=CauseKind.HARDWARE,
        llama3_count=19,
        reason="GPU SRAM uncorrectable error",
    ),
    Cause(
        id="gsp",
        component="GPU System Processor",
        category="GPU",
        kind=CauseKind.HARDWARE,
        llama3_count=17,
        reason="GPU system processor (GSP) timeout",
    ),
    Cause(
        id="nic",
        component="NIC",
        category="Host",
        kind=CauseKind.HARDWARE,
        llama3_count=7,
        reason="Not responding",
    ),
    Cause(
        id="nccl_watchdog",
        component="NCCL Watchdog Timeouts",
        category="Unknown",
        kind=CauseKind.SOFTWARE,
        llama3_count=7,
        reason="",
    ),
    Cause(
        id="sdc",
        component="Silent Data Corruption",
        category="GPU",
        kind=CauseKind.HARDWARE,
        llama3_count=6,
        reason="silent data corruption detected",
    ),
    Cause(
        id="gpu_thermal",
        component="GPU Thermal Interface + Sensor",
        category="GPU",
        kind=CauseKind.HARDWARE,
        llama3_count=6,
        reason="GPU thermal sensor fault",
    ),
    Cause(
        id="ssd",
        component="SSD",
        category="Host",
        kind=CauseKind.HARDWARE,
        llama3_count=3,
        reason="SSD failure",
    ),
    Cause(
        id="psu",
        component="Power Supply",
        category="Host",
        kind=CauseKind.HARDWARE,
        llama3_count=3,
        reason="Not responding",
    ),
    Cause(
        id="chassis",
        component="Server Chassis",
        category="Host",
        kind=CauseKind.HARDWARE,
        llama3_count=2,
        reason="Not responding",
    ),
    Cause(
        id="io_board",
        component="IO Expansion Board",
        category="Host",
        kind=CauseKind.HARDWARE,
        llama3_count=2,
        reason="IO expansion board fault",
    ),
    Cause(
        id="dependency",
        component="Dependency",
        category="Dependency",
        kind=CauseKind.SOFTWARE,
        llama3_count=2,
        reason="",
    ),
    Cause(
        id="cpu",
        component="CPU",
        category="Host",
        kind=CauseKind.HARDWARE,
        llama3_count=2,
        reason="Not responding",
    ),
    Cause(
        id="system_memory",
        component="System Memory",
        category="Host",
        kind=CauseKind.HARDWARE,
        llama3_count=2,
        reason="host DIMM uncorrectable ECC error",
    ),
)

LLAMA3_NODES = 2048
LLAMA3_DAYS = 54
LLAMA3_UNEXPECTED = 419
LLAMA3_PLANNED = 47

CAUSES_BY_ID: dict[str, Cause] = {c.id: c for c in LLAMA3_CAUSES}


def llama3_rate_per_1000_node_days(cause: Cause) -> float:
    """Table 5 count of ``cause`` as failures per 1,000 node-days of wall time."""
    return cause.llama3_count / (LLAMA3_NODES * LLAMA3_DAYS) * 1000.0


#: RSC-1 job end states (Kokolis et al. 2024, via facts.md section 3). The remaining 3.2% is not
#: listed there; we assign it to user cancellation, of which a part are runs the user stopped
#: because they diverged (see ``ResearchConfig.diverged_share``).
RSC1_END_STATES: dict[str, float] = {
    "completed": 0.60,
    "failed": 0.24,
    "preempted": 0.10,
    "requeued": 0.02,
    "timeout": 0.006,
    "oom": 0.001,
    "cancelled": 0.032,
}
