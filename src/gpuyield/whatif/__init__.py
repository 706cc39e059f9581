"""What would a remedy buy on this cluster? Fit the simulator to a cluster's own ledger, check the
fit by replaying its window, and project remedies (docs/whatif.md).

Library entry points (the CLI ``gpuyield whatif`` wraps them)::

    report = run_fit("gpuyield.duckdb", out=Path("fitted.toml"))   # FitReport: fit + replay check
    projection = run_whatif("gpuyield.duckdb", remedies=["drop-replicas", "checkpoint=20m"],
                            horizon="90d", seeds=5)                 # Projection, ranked
"""

from __future__ import annotations

from gpuyield.whatif.api import FitReport, ProjectionRefused, run_fit, run_whatif
from gpuyield.whatif.fit import fit_cluster
from gpuyield.whatif.model import ClusterFit
from gpuyield.whatif.params import MIN_EVENTS, Parameter, Status
from gpuyield.whatif.project import Projection, RemedyProjection, project
from gpuyield.whatif.remedies import DEFAULT_REMEDIES, Remedy, parse_remedy
from gpuyield.whatif.replay import ReplayCheck, replay_check
from gpuyield.whatif.scenario_out import ScenarioFile, scenario_file

__all__ = [
    "DEFAULT_REMEDIES",
    "MIN_EVENTS",
    "ClusterFit",
    "FitReport",
    "Parameter",
    "Projection",
    "ProjectionRefused",
    "Remedy",
    "RemedyProjection",
    "ReplayCheck",
    "ScenarioFile",
    "Status",
    "fit_cluster",
    "parse_remedy",
    "project",
    "replay_check",
    "run_fit",
    "run_whatif",
    "scenario_file",
]
