"""docs/simulate.md's table of published cases is what `simulate validate` prints now.

(docs/plan.md's figure, like every figure, is checked by tests/docs/test_figures.py.)"""

from __future__ import annotations

from pathlib import Path

from gpuyield.simulate.validate import cases_markdown, validate_cases

DOCS = Path(__file__).resolve().parents[2] / "docs" / "simulate.md"


def test_validate_table_is_current() -> None:
    assert cases_markdown(validate_cases()) in DOCS.read_text(encoding="utf-8"), (
        "regenerate with gpuyield.simulate.validate.cases_markdown(validate_cases())"
    )
