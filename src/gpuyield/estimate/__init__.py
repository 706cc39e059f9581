"""The essay's back-of-envelope method as a calculator: training compute and time, model size from
decode speed or budget, a lab's yield, and a check of the essay's own arithmetic.

Every function shows its work (a ``Worksheet`` of formula, substituted numbers and result), carries
ranges (``low:high``) through exactly where the formula is monotonic, and cites each catalog number.
"""

from __future__ import annotations

from gpuyield.estimate.catalog import (
    Accelerator,
    Model,
    Precision,
    SourceStatus,
    get_accelerator,
    get_model,
    list_accelerators,
    list_models,
)
from gpuyield.estimate.claims import ClaimCheck, Verdict
from gpuyield.estimate.essay import check_essay, essay_to_markdown
from gpuyield.estimate.lab import LabEstimate, estimate_lab, list_lab_scenarios
from gpuyield.estimate.numbers import Range, parse_number, parse_range
from gpuyield.estimate.sizing import BudgetParams, SpeedBound, params_from_budget, params_from_speed
from gpuyield.estimate.train import TrainEstimate, estimate_train
from gpuyield.estimate.worksheet import Step, Worksheet, to_markdown

__all__ = [
    "Accelerator",
    "BudgetParams",
    "ClaimCheck",
    "LabEstimate",
    "Model",
    "Precision",
    "Range",
    "SourceStatus",
    "SpeedBound",
    "Step",
    "TrainEstimate",
    "Verdict",
    "Worksheet",
    "check_essay",
    "essay_to_markdown",
    "estimate_lab",
    "estimate_train",
    "get_accelerator",
    "get_model",
    "list_accelerators",
    "list_lab_scenarios",
    "list_models",
    "params_from_budget",
    "params_from_speed",
    "parse_number",
    "parse_range",
    "to_markdown",
]
