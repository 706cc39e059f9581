"""`estimate essay-check`: every numeric claim of the essay, recomputed, with a verdict.

facts.md section 6 is the reference: the verdicts computed here must match it (tests check each).
"""

from __future__ import annotations

from collections import Counter

from gpuyield.estimate import essay_labs, essay_meta, essay_method
from gpuyield.estimate.claims import ClaimCheck, Verdict, claim_data


def check_essay() -> list[ClaimCheck]:
    """Every numeric claim of the essay, in the essay's order, recomputed and judged."""
    computed = [*essay_method.claims(), *essay_meta.claims(), *essay_labs.claims()]
    by_id = {check.id: check for check in computed}
    assert len(by_id) == len(computed), "claim ids must be unique"
    order = [entry["id"] for entry in claim_data()]
    # The data file and the computations must name the same claims: one without the other is a bug.
    assert sorted(order) == sorted(by_id), set(order) ^ set(by_id)
    return [by_id[claim_id] for claim_id in order]


def verdict_counts(checks: list[ClaimCheck]) -> dict[str, int]:
    """How many claims got each verdict, in ``Verdict`` order."""
    counts = Counter(check.verdict for check in checks)
    return {str(verdict): counts.get(verdict, 0) for verdict in Verdict}


def essay_to_markdown(checks: list[ClaimCheck]) -> str:
    """The check as a Markdown table, for pasting into a post."""
    lines = [
        "| claim | essay | recomputed | verdict | why |",
        "|---|---|---|---|---|",
    ]
    for check in checks:
        cells = (
            check.claim,
            check.stated_shown,
            check.recomputed_shown,
            str(check.verdict),
            check.reason,
        )
        lines.append("| " + " | ".join(_cell(cell) for cell in cells) + " |")
    return "\n".join(lines) + "\n"


def _cell(text: str) -> str:
    # `|` would end the cell and `*` would start emphasis in most renderers.
    return text.replace("|", "\\|").replace("*", "\\*")
