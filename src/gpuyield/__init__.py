"""gpuyield: of every GPU-second a training cluster paid for, how much ended up in a released model?

The public surface. The errors import eagerly; every other name on first use, so that training jobs
importing ``gpuyield.Recorder`` do not pay for DuckDB and Ibis, and ``gpuyield preflight`` (at every
``sbatch``) not for the guard either.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from gpuyield.errors import (
    ConservationError,
    DataConsistencyError,
    GpuyieldError,
    InputError,
    ManifestError,
    MissingExtraError,
    ParseError,
    UnknownFormat,
    UnknownIdError,
)

if TYPE_CHECKING:
    from gpuyield.categories import CancelCause, Category, DownCause, FailedCause
    from gpuyield.guard import DivergenceWatch, Recorder

__version__ = "0.1.0"

_LAZY = {
    "CancelCause": "gpuyield.categories",
    "Category": "gpuyield.categories",
    "DownCause": "gpuyield.categories",
    "FailedCause": "gpuyield.categories",
    "DivergenceWatch": "gpuyield.guard",
    "Recorder": "gpuyield.guard",
    "check_essay": "gpuyield.estimate",
    "estimate_lab": "gpuyield.estimate",
    "estimate_train": "gpuyield.estimate",
    "get_accelerator": "gpuyield.estimate",
    "get_model": "gpuyield.estimate",
    "list_accelerators": "gpuyield.estimate",
    "list_models": "gpuyield.estimate",
    "params_from_budget": "gpuyield.estimate",
    "params_from_speed": "gpuyield.estimate",
    "write_html_report": "gpuyield.report.html",
    "ScanResult": "gpuyield.ingest.telemetry",
    "scan": "gpuyield.ingest.telemetry",
    "SweepSpec": "gpuyield.simulate",
    "load_scenario": "gpuyield.simulate",
    "run_scenario": "gpuyield.simulate",
    "run_sweep": "gpuyield.simulate",
    "Ledger": "gpuyield.ledger",
    "Manifest": "gpuyield.manifest",
    "SlurmInputs": "gpuyield.ingest.slurm",
    "YieldReport": "gpuyield.report",
    "build_report": "gpuyield.report",
    "compute_ledger": "gpuyield.ledger",
    "ingest_slurm": "gpuyield.ingest.slurm",
    "load_manifest": "gpuyield.manifest",
    "run_fit": "gpuyield.whatif",
    "run_whatif": "gpuyield.whatif",
}

__all__ = [
    "CancelCause",
    "Category",
    "ConservationError",
    "DataConsistencyError",
    "DivergenceWatch",
    "DownCause",
    "FailedCause",
    "GpuyieldError",
    "InputError",
    "Ledger",
    "Manifest",
    "ManifestError",
    "MissingExtraError",
    "ParseError",
    "Recorder",
    "ScanResult",
    "SlurmInputs",
    "SweepSpec",
    "UnknownFormat",
    "UnknownIdError",
    "YieldReport",
    "build_report",
    "check_essay",
    "compute_ledger",
    "estimate_lab",
    "estimate_train",
    "get_accelerator",
    "get_model",
    "ingest_slurm",
    "list_accelerators",
    "list_models",
    "load_manifest",
    "load_scenario",
    "params_from_budget",
    "params_from_speed",
    "run_fit",
    "run_scenario",
    "run_sweep",
    "run_whatif",
    "scan",
    "write_html_report",
]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'gpuyield' has no attribute {name!r}")
