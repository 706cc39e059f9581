"""The tables of a scenario file as typed, checked records.

``[fleet]``, ``[failures]``, ``[[lineage]]``, ``[research]`` (with its ``[[research.classes]]``) and
``[[maintenance]]``: each checks its own fields in ``__post_init__`` with its dotted name, so a typo
in a file says where. Checks across tables belong to the whole ``Scenario``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gpuyield.errors import InputError, UnknownIdError
from gpuyield.simulate.calibration import CAUSES_BY_ID, RSC1_END_STATES
from gpuyield.simulate.fleet_types import check_prices
from gpuyield.simulate.policies import Policy, SparesFor
from gpuyield.simulate.scenario_types import check_array, check_table

# The largest fleet simulated: ten million GPUs (the 100k-GPU year is the benchmark).
MAX_GPUS = 10_000_000


def positive(value: float, name: str) -> None:
    if not value > 0:
        raise InputError(f"{name} must be > 0, got {value!r}", hint="fix the scenario file")


def non_negative(value: float, name: str) -> None:
    if not value >= 0:
        raise InputError(f"{name} must be >= 0, got {value!r}", hint="fix the scenario file")


@dataclass(frozen=True, kw_only=True, slots=True)
class FleetConfig:
    """The machines."""

    #: Nodes in the cluster, lineage groups and research pool together.
    num_nodes: int
    #: GPUs per node (all nodes alike).
    gpus_per_node: int = 8
    #: Accelerator id in the estimator's catalog: the lineage groups' (partition ``train``), and
    #: every node's unless ``research_accelerator`` is given.
    accelerator: str = "h100-sxm"
    #: Node names are ``<prefix><number>`` zero-padded to the width of the largest number.
    node_prefix: str = "n"
    #: A mixed fleet: the research nodes' (partitions ``research``) accelerator; "" for the same.
    research_accelerator: str = ""
    #: $ per GPU-hour of the train and the research nodes (0: not priced); a typed fleet
    #: (fleet_types.py) with either this or a research accelerator.
    price_per_gpu_hour: float = 0.0
    research_price_per_gpu_hour: float = 0.0

    def __post_init__(self) -> None:
        positive(self.num_nodes, "fleet.num_nodes")
        positive(self.gpus_per_node, "fleet.gpus_per_node")
        if self.num_nodes * self.gpus_per_node > MAX_GPUS:
            raise InputError(
                f"fleet.num_nodes x fleet.gpus_per_node must be at most {MAX_GPUS:,} GPUs",
                hint="fix the scenario file",
            )
        check_prices(self)

    @property
    def num_gpus(self) -> int:
        """GPUs installed."""
        return self.num_nodes * self.gpus_per_node


@dataclass(frozen=True, kw_only=True, slots=True)
class FailureConfig:
    """The failure process: independent Poisson failures per node and cause."""

    #: Failures per 1,000 node-days by cause id (``calibration.LLAMA3_CAUSES``); default Table 5.
    rates_per_1000_node_days: dict[str, float] = field(default_factory=dict)
    #: Multiplies every rate (sweeps use it; 1.0 keeps the calibration).
    rate_scale: float = 1.0
    #: From a hardware fault to Slurm marking the node down (job ends NODE_FAIL then).
    detection_s: int = 120
    #: From a software crash or hang to the job ending FAILED (NCCL watchdog, launcher exit).
    software_detection_s: int = 60
    #: Seconds a failed node shows DOWN/DOWN* before it is set to DRAIN for repair.
    down_s: int = 600
    #: Mean repair time (exponential), detection to return to service, of a fault that needs a
    #: replacement part.
    repair_mean_s: int = 3 * 86400
    #: Failure table id (``gpuyield/data/failures/tables.toml``): its rate scales the Table 5 mix;
    #: empty keeps Table 5's own rates (Llama 3, H100).
    table: str = ""
    #: Share of hardware faults a reboot or GPU reset clears, and their mean repair time.
    recoverable_share: float = 0.0
    recoverable_repair_mean_s: int = 1800
    #: Share of failures a person restarts by hand, and the extra delay (sweeps).
    manual_share: float = 0.0
    manual_delay_s: int = 3600
    #: Lemon nodes: this share of nodes fails ``lemon_factor`` times as often as the rest.
    lemon_share: float = 0.0
    lemon_factor: float = 1.0
    #: Divergence rollbacks per day and the progress each throws away (sweeps).
    rollbacks_per_day: float = 0.0
    rollback_s: int = 0

    def __post_init__(self) -> None:
        for cause_id, rate in self.rates_per_1000_node_days.items():
            if cause_id not in CAUSES_BY_ID:
                raise UnknownIdError("failure cause", cause_id, CAUSES_BY_ID)
            non_negative(rate, f"failures.rates_per_1000_node_days.{cause_id}")
        non_negative(self.rate_scale, "failures.rate_scale")
        non_negative(self.detection_s, "failures.detection_s")
        non_negative(self.software_detection_s, "failures.software_detection_s")
        non_negative(self.down_s, "failures.down_s")
        positive(self.repair_mean_s, "failures.repair_mean_s")
        if self.table:
            from gpuyield.simulate.failure_tables import get_failure_table

            get_failure_table(self.table)
        for name in ("recoverable_share", "manual_share", "lemon_share"):
            if not 0 <= getattr(self, name) <= 1:
                raise InputError(
                    f"failures.{name} must be in [0, 1], got {getattr(self, name)!r}",
                    hint="a share, e.g. 0.3",
                )
        positive(self.recoverable_repair_mean_s, "failures.recoverable_repair_mean_s")
        non_negative(self.manual_delay_s, "failures.manual_delay_s")
        if not self.lemon_factor >= 1:
            raise InputError("failures.lemon_factor must be >= 1", hint="e.g. 5")
        non_negative(self.rollbacks_per_day, "failures.rollbacks_per_day")
        non_negative(self.rollback_s, "failures.rollback_s")


@dataclass(frozen=True, kw_only=True, slots=True)
class LineageConfig:
    """One release-lineage training run on its own group of nodes."""

    #: Run id, written as ``Comment=run=<name>``.
    name: str
    #: Released model this run belongs to (runs sharing a release form its lineage, in file order).
    release: str
    num_gpus: int
    #: When the run is submitted, days after the scenario start.
    start_day: float = 0.0
    #: Productive compute needed, in days of the whole job; 0 runs until the window ends.
    work_days: float = 0.0
    #: Alternative to ``work_days``: tokens to train on (work = 6 * params * tokens / (GPUs * peak * MFU)).
    tokens: float = 0.0
    #: Active parameters, billions (with ``tokens``).
    active_params_b: float = 0.0
    #: Model FLOPs utilisation while computing (with ``tokens``).
    mfu: float = 0.4
    #: Dense BF16 peak per GPU, TFLOP/s; 0 takes it from the estimator's catalog (fleet.accelerator).
    peak_tflops: float = 0.0
    checkpoint_interval_s: int = 1800
    #: Training stalls for this long while a checkpoint is written (ends at start + k * interval).
    checkpoint_write_s: int = 30
    #: From job start to the first step (loading, NCCL init, checkpoint load).
    startup_s: int = 300
    #: After a failure, until the requeued job starts again (policy ``restart``).
    requeue_wait_s: int = 300
    #: After a failure, until a hot spare has swapped in (policy ``spares``).
    spare_swap_s: int = 30
    #: Hot spare / replacement nodes kept for this run (idle while unused).
    spare_nodes: int = 0
    #: Which remedies may use the spares: the same for drop and restart unless this says so.
    spares_for: SparesFor = SparesFor.ALL
    policy: Policy = Policy.RESTART
    #: Nodes per data-parallel replica (policy ``drop`` loses one replica per failed node).
    replica_nodes: int = 16
    #: Policy ``drop``: seconds the surviving replicas stall per failure (heartbeat lapse, new
    #: quorum); -1 stalls until Slurm detects the fault (``failures.detection_s``).
    drop_stall_s: float = -1.0
    #: Policy ``drop``: seconds from the failure until a dropped replica is back on a free spare
    #: (process restart and state copy); -1 takes ``spare_swap_s`` + ``startup_s`` from
    #: detection. Without a free spare (or with ``spares_for`` restart) it waits for the repair.
    drop_rejoin_s: float = -1.0
    #: Planned stops (firmware updates, changes to training) per day; each stops after a checkpoint.
    planned_stops_per_day: float = 0.0
    #: How long a planned stop keeps the run off the cluster.
    planned_pause_s: int = 600
    #: Write telemetry JSONL for this run (lets the ledger measure overhead).
    telemetry: bool = True

    @staticmethod
    def from_dict(data: dict[str, Any]) -> LineageConfig:
        """A ``[[lineage]]`` table (keys and value types already checked), its ids as enums."""
        data = dict(data)
        if "spares_for" in data:
            try:
                data["spares_for"] = SparesFor(data["spares_for"])
            except ValueError as error:
                raise UnknownIdError(
                    "spares_for", str(data["spares_for"]), [s.value for s in SparesFor]
                ) from error
        if "policy" in data:
            try:
                data["policy"] = Policy(data["policy"])
            except ValueError as error:
                raise UnknownIdError(
                    "policy", str(data["policy"]), [p.value for p in Policy]
                ) from error
        return LineageConfig(**data)

    def __post_init__(self) -> None:
        where = f"lineage.{self.name}"
        positive(self.num_gpus, f"{where}.num_gpus")
        non_negative(self.start_day, f"{where}.start_day")
        non_negative(self.work_days, f"{where}.work_days")
        non_negative(self.tokens, f"{where}.tokens")
        non_negative(self.active_params_b, f"{where}.active_params_b")
        non_negative(self.peak_tflops, f"{where}.peak_tflops")
        self._check_work(where)
        positive(self.checkpoint_interval_s, f"{where}.checkpoint_interval_s")
        non_negative(self.checkpoint_write_s, f"{where}.checkpoint_write_s")
        non_negative(self.startup_s, f"{where}.startup_s")
        if self.startup_s + self.checkpoint_write_s >= self.checkpoint_interval_s:
            raise InputError(
                f"{where}.checkpoint_interval_s must exceed startup_s + checkpoint_write_s",
                hint="checkpoints are saved at job start + k * interval; make the interval longer",
            )
        non_negative(self.requeue_wait_s, f"{where}.requeue_wait_s")
        non_negative(self.spare_swap_s, f"{where}.spare_swap_s")
        non_negative(self.spare_nodes, f"{where}.spare_nodes")
        positive(self.replica_nodes, f"{where}.replica_nodes")
        for name in ("drop_stall_s", "drop_rejoin_s"):
            if not (getattr(self, name) >= 0 or getattr(self, name) == -1):
                raise InputError(
                    f"{where}.{name} must be >= 0 (or -1 for the default), got "
                    f"{getattr(self, name)!r}",
                    hint="seconds, e.g. 15",
                )
        if self.policy is Policy.IN_MEMORY:
            raise InputError(
                f"{where}.policy in-memory is modelled only by sweeps",
                hint="lineage runs take restart, drop or spares; compare in-memory with "
                "gpuyield simulate sweep --policy restart,in-memory",
            )
        non_negative(self.planned_stops_per_day, f"{where}.planned_stops_per_day")
        non_negative(self.planned_pause_s, f"{where}.planned_pause_s")

    def _check_work(self, where: str) -> None:
        """The work is given one way: days of compute, or tokens with the model and its MFU."""
        if not 0 < self.mfu <= 1:
            raise InputError(f"{where}.mfu must be in (0, 1], got {self.mfu}", hint="e.g. 0.4")
        if self.tokens and self.work_days:
            raise InputError(
                f"{where}: give work_days or tokens, not both",
                hint="tokens with active_params_b and mfu set the work",
            )
        if self.tokens and not self.active_params_b:
            raise InputError(
                f"{where}.active_params_b must be > 0 with tokens",
                hint="e.g. active_params_b = 405",
            )


@dataclass(frozen=True, kw_only=True, slots=True)
class JobClass:
    """One size class of research jobs (they run in their own share of the research nodes)."""

    num_gpus: int
    #: Share of research GPU-time demand in this class (shares are normalised).
    gpu_time_share: float
    #: Median run time; durations are log-normal.
    median_duration_s: int
    #: Log-normal sigma of durations.
    duration_sigma: float = 1.0
    #: Time limit; TIMEOUT jobs run to it.
    time_limit_s: int = 3 * 86400

    def __post_init__(self) -> None:
        positive(self.num_gpus, "research.classes.num_gpus")
        positive(self.gpu_time_share, "research.classes.gpu_time_share")
        positive(self.median_duration_s, "research.classes.median_duration_s")
        non_negative(self.duration_sigma, "research.classes.duration_sigma")
        positive(self.time_limit_s, "research.classes.time_limit_s")


def _default_classes() -> tuple[JobClass, ...]:
    # Small jobs dominate counts, large ones GPU-time (the shape of Kokolis et al. 2024; our
    # numbers are
    # chosen so a 100k-GPU year has about 3M research jobs, ~40 GPU-hours each as on RSC-1).
    return (
        JobClass(num_gpus=1, gpu_time_share=0.02, median_duration_s=6 * 3600, duration_sigma=1.2),
        JobClass(num_gpus=8, gpu_time_share=0.38, median_duration_s=8 * 3600, duration_sigma=1.2),
        JobClass(num_gpus=64, gpu_time_share=0.25, median_duration_s=12 * 3600),
        JobClass(num_gpus=512, gpu_time_share=0.35, median_duration_s=24 * 3600),
    )


@dataclass(frozen=True, kw_only=True, slots=True)
class ResearchConfig:
    """Research jobs on the nodes not held by lineage groups."""

    enabled: bool = False
    #: Offered load: demanded GPU-time / research GPU capacity (above 1 the queue grows).
    load: float = 0.8
    classes: tuple[JobClass, ...] = field(default_factory=_default_classes)
    #: End-state mix of research jobs (RSC-1 by default); NODE_FAIL comes from the failure process.
    end_states: dict[str, float] = field(default_factory=lambda: dict(RSC1_END_STATES))
    #: Share of jobs whose run diverged and was cancelled by its user (listed in ``[[diverged]]``).
    diverged_share: float = 0.02
    #: Research jobs may use lineage groups while no lineage run holds them (preempted at run
    #: start).
    backfill_lineage_gaps: bool = False
    #: The scaling ladder (docs/ladder.md): share of jobs above the smallest class that skip
    #: their lower rung, and how much likelier such a job ends failed, cancelled or OOM.
    ladder_skip_share: float = 0.0
    ladder_skip_failure_multiplier: float = 1.0

    @staticmethod
    def from_dict(data: dict[str, Any], *, origin: str) -> ResearchConfig:
        """The ``[research]`` table (keys and value types already checked) and its
        ``[[research.classes]]``, checked here."""
        data = dict(data)
        if "classes" in data:
            classes = []
            for i, c in enumerate(check_array(data["classes"], "research.classes", origin)):
                check_table(JobClass, c, f"research.classes[{i}]", origin)
                classes.append(JobClass(**c))
            data["classes"] = tuple(classes)
        return ResearchConfig(**data)

    def __post_init__(self) -> None:
        non_negative(self.load, "research.load")
        non_negative(self.ladder_skip_share, "research.ladder_skip_share")
        non_negative(self.ladder_skip_failure_multiplier, "research.ladder_skip_failure_multiplier")
        if self.ladder_skip_share > 1:
            raise InputError("research.ladder_skip_share must be at most 1", hint="e.g. 0.3")
        if not self.classes:
            raise InputError("research.classes must not be empty", hint="add [[research.classes]]")
        for state, share in self.end_states.items():
            if state not in RSC1_END_STATES:
                raise UnknownIdError("research end state", state, RSC1_END_STATES)
            non_negative(share, f"research.end_states.{state}")
        if sum(self.end_states.values()) <= 0:
            raise InputError("research.end_states must not all be 0", hint="give some shares")
        non_negative(self.diverged_share, "research.diverged_share")


@dataclass(frozen=True, kw_only=True, slots=True)
class MaintenanceWindow:
    """Planned maintenance: research nodes drained (running jobs requeued) for a while."""

    start_day: float
    duration_h: float
    #: First node (0-based) and how many; only research nodes (after the lineage groups).
    first_node: int
    num_nodes: int
    #: Node event reason; it must say maintenance, which is how the ledger knows it is planned.
    reason: str = "scheduled maintenance: firmware update"

    def __post_init__(self) -> None:
        non_negative(self.start_day, "maintenance.start_day")
        positive(self.duration_h, "maintenance.duration_h")
        non_negative(self.first_node, "maintenance.first_node")
        positive(self.num_nodes, "maintenance.num_nodes")
        if "maint" not in self.reason.lower():
            raise InputError(
                "maintenance.reason must mention maintenance",
                hint="the ledger reads 'maint' in a reason as planned down time",
            )


def check_maintenance_overlap(windows: tuple[MaintenanceWindow, ...]) -> None:
    """Two windows may not drain the same node at the same time (one event per node at a time)."""
    for i, a in enumerate(windows):
        for b in windows[i + 1 :]:
            same_nodes = a.first_node < b.first_node + b.num_nodes and (
                b.first_node < a.first_node + a.num_nodes
            )
            a_end, b_end = a.start_day + a.duration_h / 24, b.start_day + b.duration_h / 24
            if same_nodes and a.start_day < b_end and b.start_day < a_end:
                raise InputError(
                    f"maintenance windows at day {a.start_day} and {b.start_day} overlap",
                    hint="merge them or move one",
                )


__all__ = [
    "MAX_GPUS",
    "FailureConfig",
    "FleetConfig",
    "JobClass",
    "LineageConfig",
    "MaintenanceWindow",
    "ResearchConfig",
    "check_maintenance_overlap",
    "non_negative",
    "positive",
]
