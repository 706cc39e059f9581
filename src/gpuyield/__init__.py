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
    EmptyDataError,
    FieldError,
    GpuyieldError,
    InputError,
    ManifestError,
    MissingExtraError,
    ParseError,
    UnknownFormat,
    UnknownIdError,
)

if TYPE_CHECKING:
    from gpuyield.categories import CancelCause, Category, DownCause, FailedCause, IdleCause
    from gpuyield.guard import DivergenceWatch, Recorder

__version__ = "0.1.0"

_LAZY = {
    "CancelCause": "gpuyield.categories",
    "Category": "gpuyield.categories",
    "DownCause": "gpuyield.categories",
    "FailedCause": "gpuyield.categories",
    "IdleCause": "gpuyield.categories",
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
    "MetricNames": "gpuyield.ingest.utilization",
    "PrometheusSource": "gpuyield.ingest.utilization",
    "ingest_utilization": "gpuyield.ingest.utilization",
    "ingest_telemetry_files": "gpuyield.ingest.runlog",
    "ingest_gres_conf": "gpuyield.ingest.gpu_models",
    "collect": "gpuyield.ingest.collect",
    "run_doctor": "gpuyield.ingest.doctor",
    "build_idle_now": "gpuyield.report.idle_now",
    "build_ladder": "gpuyield.report.ladder",
    "preflight": "gpuyield.rungs",
    "ft_loss": "gpuyield.ledger.ft",
    "validate_catalog": "gpuyield.estimate.validate",
    "list_lab_scenarios": "gpuyield.estimate",
    "bundled_names": "gpuyield.simulate",
    "validate_cases": "gpuyield.simulate.validate",
    "run_ladder_sweep": "gpuyield.simulate.ladder",
    "PlanSpec": "gpuyield.simulate.plan",
    "plan": "gpuyield.simulate.plan",
    "ServeSettings": "gpuyield.serve",
    "Listen": "gpuyield.serve",
    "TrainConfig": "gpuyield.train",
    "train_ft": "gpuyield.train.launch",
    "LakeSource": "gpuyield.lake",
    "export_lake": "gpuyield.lake",
    "sync_store": "gpuyield.lake",
    "check_lake": "gpuyield.lake.check",
    "size_fleets": "gpuyield.lake.sizing",
    "check_launch": "gpuyield.launch",
    "run_fit": "gpuyield.whatif",
    "run_whatif": "gpuyield.whatif",
}
# Names whose module imports an optional extra when loaded (serve's import theirs when called): a
# missing one raises MissingExtraError (the install line), as the CLI does, not a bare ImportError.
_EXTRA = {"gpuyield.train.launch": "train"}

__all__ = [
    "CancelCause",
    "Category",
    "ConservationError",
    "DataConsistencyError",
    "DivergenceWatch",
    "DownCause",
    "EmptyDataError",
    "FailedCause",
    "FieldError",
    "GpuyieldError",
    "IdleCause",
    "InputError",
    "LakeSource",
    "Ledger",
    "Listen",
    "Manifest",
    "ManifestError",
    "MetricNames",
    "MissingExtraError",
    "ParseError",
    "PlanSpec",
    "PrometheusSource",
    "Recorder",
    "ScanResult",
    "ServeSettings",
    "SlurmInputs",
    "SweepSpec",
    "TrainConfig",
    "UnknownFormat",
    "UnknownIdError",
    "YieldReport",
    "build_idle_now",
    "build_ladder",
    "build_report",
    "bundled_names",
    "check_essay",
    "check_lake",
    "check_launch",
    "collect",
    "compute_ledger",
    "estimate_lab",
    "estimate_train",
    "export_lake",
    "ft_loss",
    "get_accelerator",
    "get_model",
    "ingest_gres_conf",
    "ingest_slurm",
    "ingest_telemetry_files",
    "ingest_utilization",
    "list_accelerators",
    "list_lab_scenarios",
    "list_models",
    "load_manifest",
    "load_scenario",
    "params_from_budget",
    "params_from_speed",
    "plan",
    "preflight",
    "run_doctor",
    "run_fit",
    "run_ladder_sweep",
    "run_scenario",
    "run_sweep",
    "run_whatif",
    "scan",
    "size_fleets",
    "sync_store",
    "train_ft",
    "validate_cases",
    "validate_catalog",
    "write_html_report",
]


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module 'gpuyield' has no attribute {name!r}")
    module = _LAZY[name]
    try:
        return getattr(importlib.import_module(module), name)
    except ModuleNotFoundError as error:
        if module not in _EXTRA or (error.name or "").startswith("gpuyield"):
            raise
        raise MissingExtraError(_EXTRA[module], error.name or module) from error
