"""The manifest's per-run settings: durations the ledger estimates overhead and loss from.

``[run_settings.<run>]`` gives a run its checkpoint interval, checkpoint save stall, restart
(start-up) time and failure detection time, in seconds; ``runs.checkpoint_interval_s`` the
default interval. Each is checked here: a finite number of seconds, at most 366 days.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpuyield.errors import ManifestError

# Every run setting is a duration no longer than this: a checkpoint interval or a restart of a
# year and more is a typo (and an infinite one moved GPU-seconds between categories).
_MAX_SETTING_S = 366 * 86_400


def _seconds(value: Any) -> bool:
    # Not NaN or infinity either: NaN compares false with everything and would pass "<= 0".
    return (
        not isinstance(value, bool)
        and isinstance(value, int | float)
        and math.isfinite(value)
        and value <= _MAX_SETTING_S
    )


def positive_seconds(value: Any, path: Path, name: str) -> float:
    if not _seconds(value) or value <= 0:
        raise ManifestError(
            f"{path}: {name} must be a positive number of seconds up to {_MAX_SETTING_S:,} "
            f"(366 days), got {value!r}",
            hint="write e.g. checkpoint_interval_s = 3600",
        )
    return float(value)


def non_negative_seconds(value: Any, path: Path, name: str) -> float:
    if not _seconds(value) or value < 0:
        raise ManifestError(
            f"{path}: {name} must be a number of seconds from 0 to {_MAX_SETTING_S:,} "
            f"(366 days), got {value!r}",
            hint="write e.g. checkpoint_save_s = 30",
        )
    return float(value)


#: run_settings keys; every one is a duration in seconds. The interval must be > 0, the others
#: >= 0 (an instant start-up or an asynchronous save stalls for 0 s).
_RUN_SETTINGS = {
    "checkpoint_interval_s": True,
    "checkpoint_save_s": False,
    "restart_s": False,
    "failure_detection_s": False,
}


@dataclass(frozen=True, kw_only=True, slots=True)
class RunSettings:
    """``run_settings.<run>.<key>``: per key, the runs that set it and their seconds."""

    checkpoint_interval_s: dict[str, float]
    checkpoint_save_s: dict[str, float]
    restart_s: dict[str, float]
    failure_detection_s: dict[str, float]

    @staticmethod
    def from_dict(table: dict[str, Any], *, path: Path) -> RunSettings:
        """The ``[run_settings]`` table of the manifest at ``path`` (already known to be a table),
        checked."""
        out: dict[str, dict[str, float]] = {key: {} for key in _RUN_SETTINGS}
        for run, settings in table.items():
            if not isinstance(settings, dict):
                raise ManifestError(f"{path}: run_settings.{run} must be a table, got {settings!r}")
            unknown_keys = set(settings) - set(_RUN_SETTINGS)
            if unknown_keys:
                raise ManifestError(
                    f"{path}: run_settings.{run}: unknown key {sorted(unknown_keys)[0]!r}",
                    hint=f"known: {', '.join(_RUN_SETTINGS)}",
                )
            for key, strictly_positive in _RUN_SETTINGS.items():
                if key not in settings:
                    continue
                where = f"run_settings.{run}.{key}"
                value = settings[key]
                out[key][run] = (
                    positive_seconds(value, path, where)
                    if strictly_positive
                    else non_negative_seconds(value, path, where)
                )
        return RunSettings(**out)


__all__ = ["RunSettings", "non_negative_seconds", "positive_seconds"]
