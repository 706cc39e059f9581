"""Claims of the essay and how they are judged (used by ``essay``, which lists them).

A computed claim *holds* when the essay's figure is within the recomputed range widened by a
tolerance: the larger of half the place value of the figure's last written digit ("40M" stands for
35M-45M) and 10% of the recomputed value (the essay's back-of-envelope inputs are themselves
rounded). Otherwise it is *off*. A claim that the essay's stated inputs do not determine is
*not_reproducible*; a figure the essay takes from elsewhere is *sourced*.

The claims' words, stated figures and sources are data: ``gpuyield/data/essay/claims.toml``, read
by ``claim`` below. The computations live in ``essay_method``, ``essay_meta`` (Meta and Llama) and
``essay_labs`` (xAI, Anthropic, OpenAI, the waste breakdown); ``essay.check_essay`` lists them all
in the data file's order.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from functools import cache
from typing import Any

from gpuyield import tomlfile
from gpuyield.errors import ParseError
from gpuyield.estimate.numbers import Range, last_digit_unit, parse_number
from gpuyield.estimate.worksheet import DOWN, UP, Step, compute, show

#: Relative slack for a back-of-envelope figure (see the module docstring).
RELATIVE_TOLERANCE = 0.10


class Verdict(StrEnum):
    """Outcome of checking one claim."""

    # The essay's figure is what its inputs give, within rounding.
    HOLDS = "holds"
    # The essay's inputs give a value off by more than rounding.
    OFF = "off"
    # The essay's stated inputs do not determine the figure.
    NOT_REPRODUCIBLE = "not_reproducible"
    # The essay quotes the figure from a source; nothing to compute.
    SOURCED = "sourced"


@dataclass(frozen=True, kw_only=True, slots=True)
class ClaimCheck:
    """One claim of the essay and what recomputing it gives."""

    #: Short slug (``llama3-405b-days``).
    id: str
    #: Part of the essay it belongs to (``Meta``, ``xAI``).
    section: str
    #: The essay's words.
    claim: str
    #: How the words are read: typos resolved, assumptions made.
    reading: str
    #: The figure as the essay writes it (``65``, ``940k``, ``40M``); empty if none.
    stated: str
    #: Unit of ``stated`` and ``recomputed``.
    unit: str
    #: What the essay's inputs give; None when nothing can be computed.
    recomputed: Range | None
    #: holds / off / not_reproducible / sourced.
    verdict: Verdict
    #: One line saying why.
    reason: str
    #: The shown work.
    steps: tuple[Step, ...] = ()
    #: Where a sourced figure comes from.
    source: str = ""

    def __post_init__(self) -> None:
        computed_verdict = self.verdict in (Verdict.HOLDS, Verdict.OFF)
        if computed_verdict and self.recomputed is None:
            raise ValueError(f"claim.recomputed is needed for verdict {self.verdict} ({self.id})")
        if not computed_verdict and self.recomputed is not None:
            raise ValueError(
                f"claim.recomputed must be None for verdict {self.verdict} ({self.id})"
            )
        if self.verdict is Verdict.SOURCED and not self.source:
            raise ValueError(f"claim.source is needed for a sourced claim ({self.id})")

    def to_dict(self) -> dict[str, Any]:
        """``claim``, ``recomputed`` (a number or null) and ``verdict``, plus the detail."""
        return {
            "id": self.id,
            "section": self.section,
            "claim": self.claim,
            "reading": self.reading,
            "stated": self.stated,
            "stated_value": _stated_value(self.stated, self.id),
            "unit": self.unit,
            "recomputed": None if self.recomputed is None else self.recomputed.central,
            "recomputed_range": None if self.recomputed is None else self.recomputed.to_dict(),
            "verdict": str(self.verdict),
            "reason": self.reason,
            "source": self.source,
            "steps": [step.to_dict() for step in self.steps],
        }

    @property
    def stated_shown(self) -> str:
        """The essay's figure with its unit (a percentage carries its own sign)."""
        if not self.stated or self.unit == "%":
            return self.stated
        return f"{self.stated} {self.unit}"

    @property
    def recomputed_shown(self) -> str:
        """The recomputed value with its unit, or an empty string."""
        return "" if self.recomputed is None else show(self.recomputed, self.unit)


def _stated_value(stated: str, claim_id: str) -> float | None:
    return parse_number(stated, field=f"claim {claim_id}") if stated else None


def judge(stated: str, recomputed: Range, *, claim_id: str) -> Verdict:
    """HOLDS if ``stated`` lies within ``recomputed`` widened by the tolerance, else OFF."""
    value = parse_number(stated, field=f"claim {claim_id}")
    rounding = last_digit_unit(stated, field=f"claim {claim_id}") / 2
    slack = max(rounding, RELATIVE_TOLERANCE * abs(recomputed.central))
    inside = recomputed.low - slack <= value <= recomputed.high + slack
    return Verdict.HOLDS if inside else Verdict.OFF


def computed(
    *,
    id: str,
    section: str,
    claim: str,
    reading: str,
    stated: str,
    unit: str,
    steps: tuple[Step, ...] | list[Step],
    reason: str,
) -> ClaimCheck:
    """A claim whose value is the last of ``steps``, judged against ``stated``."""
    result = steps[-1].value
    return ClaimCheck(
        id=id,
        section=section,
        claim=claim,
        reading=reading,
        stated=stated,
        unit=unit,
        recomputed=result,
        verdict=judge(stated, result, claim_id=id),
        reason=reason,
        steps=tuple(steps),
    )


def sourced(
    *, id: str, section: str, claim: str, stated: str, unit: str, source: str, reason: str
) -> ClaimCheck:
    """A figure the essay quotes; the catalog or a citation says where it comes from."""
    return ClaimCheck(
        id=id,
        section=section,
        claim=claim,
        reading="quoted figure",
        stated=stated,
        unit=unit,
        recomputed=None,
        verdict=Verdict.SOURCED,
        reason=reason,
        source=source,
    )


def unreproducible(
    *,
    id: str,
    section: str,
    claim: str,
    reading: str,
    stated: str,
    unit: str,
    reason: str,
    steps: tuple[Step, ...] | list[Step] = (),
) -> ClaimCheck:
    """A figure the essay's inputs do not determine; ``steps`` may show what it would need."""
    return ClaimCheck(
        id=id,
        section=section,
        claim=claim,
        reading=reading,
        stated=stated,
        unit=unit,
        recomputed=None,
        verdict=Verdict.NOT_REPRODUCIBLE,
        reason=reason,
        steps=tuple(steps),
    )


def ratio_step(name: str, label: str, formula: str, a: Range, b: Range, unit: str = "") -> Step:
    """A step dividing ``a`` by ``b`` (up in a, down in b)."""
    return compute(
        name, label, formula, "{a} / {b}", lambda a, b: a / b, {"a": UP, "b": DOWN}, unit, a=a, b=b
    )


_CLAIM_KEYS = ("id", "kind", "section", "claim", "reading", "stated", "unit", "source", "reason")
_KINDS = {"computed": computed, "sourced": sourced, "unreproducible": unreproducible}


@cache
def claim_data() -> tuple[dict[str, str], ...]:
    """The essay's claims from ``data/essay/claims.toml``, in the essay's order."""
    doc = tomlfile.read_bundled("essay", "claims")
    entries = tuple(doc.data.get("claim", ()))
    for index, entry in enumerate(entries):
        tomlfile.check_keys(entry, _CLAIM_KEYS, origin=doc.origin, where=f"claim[{index}]")
        if entry.get("kind") not in _KINDS:
            raise ParseError(
                f"unknown kind {entry.get('kind')!r}",
                path=doc.origin,
                field=f"claim[{index}].kind",
                hint="kinds: " + ", ".join(_KINDS),
            )
    return entries


def claim(claim_id: str, **computed_fields: Any) -> ClaimCheck:
    """The claim ``claim_id`` of the data file, judged with what the caller computed.

    ``computed_fields`` are the parts only code can give: ``steps``, and any word or figure that
    depends on a catalog value (a source line, a stated value formatted from data).
    """
    entry = next((e for e in claim_data() if e["id"] == claim_id), None)
    if entry is None:
        raise ParseError(
            f"no claim {claim_id!r}",
            path="claims.toml",
            field="claim.id",
            hint="add it to the file",
        )
    fields = {k: v for k, v in entry.items() if k != "kind"} | computed_fields
    return _KINDS[entry["kind"]](**fields)  # type: ignore[operator]
