"""docs/estimate.md's effective-MFU and validation tables are what the code prints now."""

from __future__ import annotations

from pathlib import Path

from gpuyield.estimate.effective import distribution_markdown
from gpuyield.estimate.validate import validate_catalog, validation_markdown

DOCS = Path(__file__).resolve().parents[2] / "docs" / "estimate.md"


def test_effective_mfu_and_validation_tables_are_current() -> None:
    text = DOCS.read_text(encoding="utf-8")
    hint = "regenerate: gpuyield estimate validate --markdown, distribution_markdown()"
    assert distribution_markdown() in text, hint
    assert validation_markdown(validate_catalog()) in text, hint
