"""docs/simulate.md's table of published cases is what `simulate validate` prints now."""

from __future__ import annotations

from pathlib import Path

from gpuyield.simulate.validate import cases_markdown, validate_cases

DOCS = Path(__file__).resolve().parents[2] / "docs" / "simulate.md"


def test_validate_table_is_current() -> None:
    assert cases_markdown(validate_cases()) in DOCS.read_text(encoding="utf-8"), (
        "regenerate with gpuyield.simulate.validate.cases_markdown(validate_cases())"
    )


def test_plan_table_is_current() -> None:
    from gpuyield.simulate.plan import PlanSpec, plan
    from gpuyield.simulate.plan_result import variants_markdown

    spec = PlanSpec(params="70B", tokens="15T", gpus="16k", accelerator="h100-sxm")
    text = (DOCS.parent / "plan.md").read_text(encoding="utf-8")
    assert variants_markdown(plan(spec)) in text, "regenerate with variants_markdown(plan(...))"
