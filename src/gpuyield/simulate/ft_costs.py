"""Recovery costs measured by ``python -m bench ft``, scaled to a big job for the sweeps.

The calibration file (``gpuyield/data/calibration/ft-costs.toml``, written by the benchmark) holds
what a failure cost in the real drop and restart runs, per failure, and the rules that carry those
costs to a job of thousands of GPUs (docs/simulate.md, "Measured recovery costs"). With ``G``
replica groups of ``gpus_per_group`` GPUs and ``G0`` groups measured:

* drop stall (``JobModel.detection_s``) = ``stall_s x log2(G) / log2(G0)``: the survivors wait for
  the failed group's heartbeat to lapse and for a new quorum and communicator, whose setup is a tree
  over the groups;
* drop rejoin (``JobModel.rejoin_s``) = ``heal_s + replacement_s + state_gb_per_gpu x 8 / link_gbps``:
  one process restart and a point-to-point copy of the state from one live peer, whatever ``G``,
  plus the wait for a node to restart on (0 with a hot spare pool);
* restart (``JobModel.restart_s``) = ``restart_s x log2(G) / log2(G0) + checkpoint_load_s``: every
  process restarts and meets at a rendezvous (a tree again), then reads the checkpoint.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from gpuyield import tomlfile
from gpuyield.errors import InputError, ParseError

BUNDLED = "ft-costs.toml"


@dataclass(frozen=True, kw_only=True, slots=True)
class RecoveryCosts:
    """The three recovery costs of ``JobModel`` at one job size, seconds."""

    restart_s: float
    detection_s: float
    rejoin_s: float


@dataclass(frozen=True, kw_only=True, slots=True)
class FtCalibration:
    """Measured recovery costs per failure and the rules that scale them (see module doc)."""

    path: str
    #: Replica groups in the measured runs (G0).
    measured_groups: int
    #: Survivors' stall per failure, seconds (per surviving group).
    stall_s: float
    #: Failure to healed rejoin of the dropped group, seconds.
    heal_s: float
    #: Failure to checkpoint loaded by the restarted job, seconds.
    restart_s: float
    #: Measured lost GPU-seconds per failure, drop over restart (for the record).
    ratio_drop_to_restart: float
    gpus_per_group: int
    replacement_s: float
    state_gb_per_gpu: float
    link_gbps: float
    checkpoint_load_s: float

    def to_dict(self) -> dict[str, object]:
        """The JSON shape: where the costs come from and every figure the rules use."""
        return {
            "path": self.path,
            "measured_groups": self.measured_groups,
            "stall_s": self.stall_s,
            "heal_s": self.heal_s,
            "restart_s": self.restart_s,
            "gpus_per_group": self.gpus_per_group,
            "replacement_s": self.replacement_s,
            "state_gb_per_gpu": self.state_gb_per_gpu,
            "link_gbps": self.link_gbps,
            "checkpoint_load_s": self.checkpoint_load_s,
        }

    def costs_at(self, gpus: int) -> RecoveryCosts:
        """The recovery costs of a job of ``gpus`` GPUs."""
        groups = max(gpus // self.gpus_per_group, 2)
        tree = math.log2(groups) / math.log2(self.measured_groups)
        transfer_s = self.state_gb_per_gpu * 8.0 / self.link_gbps
        return RecoveryCosts(
            restart_s=self.restart_s * tree + self.checkpoint_load_s,
            detection_s=self.stall_s * tree,
            rejoin_s=self.heal_s + self.replacement_s + transfer_s,
        )


def _number(data: dict[str, object], table: str, key: str, path: str) -> float:
    value = data.get(table, {})
    raw = value.get(key) if isinstance(value, dict) else None
    if isinstance(raw, bool) or not isinstance(raw, int | float) or not raw >= 0:
        raise ParseError(
            f"expected a number >= 0, got {raw!r}",
            path=path,
            line=None,
            field=f"{table}.{key}",
            hint="rewrite it with: python -m bench ft",
        )
    return float(raw)


def load_ft_calibration(path: str | Path | None = None) -> FtCalibration:
    """Read a calibration file; ``None`` reads the bundled one."""
    if path is None:
        source = resources.files("gpuyield").joinpath("data", "calibration", BUNDLED)
        doc = tomlfile.parse(source.read_text("utf-8"), f"gpuyield/data/calibration/{BUNDLED}")
    elif not Path(path).exists():
        raise InputError(f"{path}: no such calibration file", hint="python -m bench ft writes one")
    else:
        # Bounded, a regular file; syntax, nesting, nan, inf and 1e300 named with the key.
        doc = tomlfile.read_file(path, kind="calibration")
    data, name = doc.data, doc.origin

    def get(table: str, key: str) -> float:
        return _number(data, table, key, name)

    groups = int(get("measured", "replicas"))
    if groups < 2:
        raise ParseError("needs >= 2", path=name, line=None, field="measured.replicas")
    return FtCalibration(
        path=name,
        measured_groups=groups,
        stall_s=get("measured", "stall_s"),
        heal_s=get("measured", "heal_s"),
        restart_s=get("measured", "restart_s"),
        ratio_drop_to_restart=get("measured", "ratio_drop_to_restart"),
        gpus_per_group=max(int(get("scale", "gpus_per_group")), 1),
        replacement_s=get("scale", "replacement_s"),
        state_gb_per_gpu=get("scale", "state_gb_per_gpu"),
        link_gbps=max(get("scale", "link_gbps"), 1e-9),
        checkpoint_load_s=get("scale", "checkpoint_load_s"),
    )
