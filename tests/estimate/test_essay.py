"""essay-check reaches facts.md section 6's verdicts by computing them, and quotes the essay."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from gpuyield.estimate import ClaimCheck, Verdict, check_essay
from gpuyield.estimate.claims import judge
from gpuyield.estimate.numbers import Range

ESSAY = Path(__file__).resolve().parents[3] / "shared" / "seed" / "000_8bc1394eab0856b6.txt"

# facts.md section 6, "Holds:" and "Does not hold or needs caveats:", claim by claim.
FACTS_VERDICTS = {
    # "Llama 3 405B (6 x 405e9 x ~1,000 tokens per GPU per batch = 2.4e15 FLOP; 6.1 s per batch at
    # 40% of 989 TFLOP/s; 937,500 batches; ~65 days)"
    "llama3-flops-per-gpu-batch": Verdict.HOLDS,
    "llama3-seconds-per-batch": Verdict.HOLDS,
    "llama3-num-batches": Verdict.HOLDS,
    "llama3-days": Verdict.HOLDS,
    # "Behemoth 62 days if it saw 40T tokens"
    "behemoth-days": Verdict.HOLDS,
    # "Scout and Maverick 17x and 31x cheaper than Behemoth"
    "scout-vs-behemoth": Verdict.HOLDS,
    "maverick-vs-behemoth": Verdict.HOLDS,
    # "10k/350k = 2.9%"
    "meta-yield-350k": Verdict.HOLDS,
    # "210M H100-hours = 49,152 GPUs x ~178 days"
    "meta-24k-clusters": Verdict.HOLDS,
    # "144M = 100k x 60 days"
    "meta-100k-cluster": Verdict.HOLDS,
    # "Llama 3.1 total 39.3M hours"
    "llama31-total-hours": Verdict.HOLDS,
    # "xAI 40M/432M = 9.3%"
    "xai-yield": Verdict.HOLDS,
    # "Anthropic 150/2,700 = 5.6%"
    "anthropic-yield": Verdict.HOLDS,
    # "OpenAI 5%"
    "openai-yield": Verdict.HOLDS,
    # Sonnet "~200B" (103-119B at 40% BF16; 200B only at 40% of FP8 peak)
    "sonnet-size": Verdict.OFF,
    # xAI "40M H100 hours" (33.7M at 40% MFU)
    "grok-hours": Verdict.OFF,
    # Claude 3 Opus "600G" (<= 926B at FP8 and eta = 1)
    "opus-size": Verdict.OFF,
    # Meta "10k GPUs worth of models" is not reproducible from the stated inputs
    "meta-10k-gpus": Verdict.NOT_REPRODUCIBLE,
    # "9M" and "11M" hours for last year's models contradict each other
    "meta-2024-released-hours": Verdict.OFF,
    # the waste breakdown 20+20+20+20+10 leaves 10%
    "waste-breakdown": Verdict.OFF,
}


@pytest.fixture(scope="module")
def checks() -> dict[str, ClaimCheck]:
    return {check.id: check for check in check_essay()}


@pytest.mark.parametrize(("claim_id", "verdict"), sorted(FACTS_VERDICTS.items()))
def test_verdict_matches_facts_section_6(
    checks: dict[str, ClaimCheck], claim_id: str, verdict: Verdict
) -> None:
    assert checks[claim_id].verdict is verdict, checks[claim_id].reason


def test_recomputed_numbers_match_facts(checks: dict[str, ClaimCheck]) -> None:
    def value(claim_id: str) -> Range:
        recomputed = checks[claim_id].recomputed
        assert recomputed is not None, claim_id
        return recomputed

    assert value("llama3-num-batches").central == 937_500
    assert 64.5 <= value("llama3-days").central <= 65.5
    assert round(value("scout-vs-behemoth").central) == 17
    assert round(value("maverick-vs-behemoth").central) == 31
    assert value("meta-yield-350k").central == pytest.approx(10 / 350)
    assert value("meta-100k-cluster").central == pytest.approx(100e3 * 60 * 24)
    assert value("llama31-total-hours").central == pytest.approx(39.3e6)
    assert value("xai-yield").central == pytest.approx(40 / 432)
    assert value("anthropic-yield").central == pytest.approx(150 / 2700)
    assert value("grok-hours").central == pytest.approx(33.7e6, rel=0.01)
    assert value("opus-size").central == pytest.approx(25e12 / 27)  # 926B
    sonnet = value("sonnet-size")
    assert (sonnet.low, sonnet.high) == (
        pytest.approx(103e9, rel=0.01),
        pytest.approx(119e9, rel=0.01),
    )
    assert value("meta-2024-released-hours").central == pytest.approx(9.02e6, rel=0.01)
    assert value("waste-breakdown").central == pytest.approx(0.10)


def test_reasons_carry_the_caveats_of_facts(checks: dict[str, ClaimCheck]) -> None:
    assert "47 days" in checks["behemoth-days"].reason  # ">30T gives ~47 days"
    assert "178 days" in checks["meta-24k-clusters"].reason
    assert "0.60-0.65" in checks["opus-size"].reason  # "600B needs eta ~0.6-0.65"
    assert "FP8" in checks["sonnet-size"].reason
    assert "9.0M" in checks["meta-2024-released-hours"].reason


def test_judge_uses_rounding_of_the_stated_figure() -> None:
    assert judge("2M", Range.point(1.775e6), claim_id="x") is Verdict.HOLDS  # rounds to 2M
    assert judge("40M", Range.point(33.7e6), claim_id="x") is Verdict.OFF
    assert judge("62", Range.point(63.0), claim_id="x") is Verdict.HOLDS  # within 10%
    assert judge("200B", Range(low=103e9, central=119e9, high=119e9), claim_id="x") is Verdict.OFF


def test_every_claim_is_complete(checks: dict[str, ClaimCheck]) -> None:
    for check in checks.values():
        assert check.claim and check.reason, check.id
        if check.verdict in (Verdict.HOLDS, Verdict.OFF):
            assert check.recomputed is not None and check.steps, check.id
        if check.verdict is Verdict.SOURCED:
            assert check.source and check.recomputed is None, check.id
        data = check.to_dict()
        assert data["verdict"] in {"holds", "off", "not_reproducible", "sourced"}
        assert data["recomputed"] is None or isinstance(data["recomputed"], float)


def _normalise(text: str) -> str:
    text = re.sub("[\u2018\u2019\u201c\u201d'\"]", "", text)
    return re.sub(r"\s+", " ", text)


def test_claims_quote_the_essay(checks: dict[str, ClaimCheck]) -> None:
    if not ESSAY.is_file():
        pytest.skip("the essay (shared/seed) is not next to the repo")
    essay = _normalise(ESSAY.read_text(encoding="utf-8"))
    for check in checks.values():
        for part in check.claim.split(" ... "):
            assert _normalise(part) in essay, f"{check.id}: {part!r}"
