"""The essay's claims are data (data/essay/claims.toml): complete, sourced, read by one checker."""

from __future__ import annotations

import pytest

from gpuyield.errors import ParseError
from gpuyield.estimate import claims as claims_mod
from gpuyield.estimate.essay import check_essay


def test_every_claim_in_the_file_is_checked_in_its_order() -> None:
    entries = claims_mod.claim_data()
    assert [c.id for c in check_essay()] == [e["id"] for e in entries]
    assert len({e["id"] for e in entries}) == len(entries)


def test_words_and_sources_come_from_the_file() -> None:
    by_id = {c.id: c for c in check_essay()}
    for entry in claims_mod.claim_data():
        check = by_id[entry["id"]]
        assert check.verdict.value in {"holds", "off", "sourced", "not_reproducible"}
        for key in ("section", "claim", "stated", "unit"):
            if key in entry:
                assert getattr(check, key) == entry[key], (entry["id"], key)
        if entry["kind"] == "sourced":
            assert check.source, f"{entry['id']}: a quoted figure needs its source"


def test_a_claim_the_file_lacks_is_an_error_naming_it() -> None:
    with pytest.raises(ParseError, match="no claim 'not-a-claim'"):
        claims_mod.claim("not-a-claim")
