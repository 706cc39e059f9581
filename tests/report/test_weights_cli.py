"""`gpuyield report --weight`: the cost of waste first, the table in the weight, clear errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpuyield.cli import app
from tests.ledger.test_weights_typed import typed_db  # noqa: F401 (the fixture)

RUNNER = CliRunner()


def _report(db: Path, *args: str) -> tuple[int, str]:
    result = RUNNER.invoke(app, ["report", "--db", str(db), *args], env={"COLUMNS": "120"})
    return result.exit_code, result.output


def test_dollars_table_starts_with_the_cost_of_waste(typed_db: Path) -> None:  # noqa: F811
    code, out = _report(typed_db, "--weight", "dollars")
    assert code == 0, out
    first = out.splitlines()[0]
    window = "2026-12-02T05:00:24 .. 2026-12-02T05:00:53Z"
    assert first.startswith(f"{window}: 77% of $0.") and "went to idle, failed" in first
    assert "Yield 4.6% of GPU-seconds, 6.0% of FLOPs paid for" in out
    assert "weights: $ per GPU-hour from the manifest's [prices] (test: a rate card, list)" in out
    assert "GPU type a100-sxm: 2 node(s), 33% of installed" in out


def test_dollars_table_names_where_each_categorys_dollars_went(typed_db: Path) -> None:  # noqa: F811
    """Each category's subcategories, as shares of the installed dollars (``weighted`` in JSON)."""
    code, out = _report(typed_db, "--json")
    assert code == 0, out
    dollars = json.loads(out)["weighted"]["dollars"]
    code, out = _report(typed_db, "--weight", "dollars")
    assert code == 0, out
    notes = [
        f"{key.split('.', 1)[1]} {value / dollars['installed']:.1%}"
        for key, value in sorted(dollars["subcategories"].items())
        if key.startswith("failed.")
    ]
    assert notes, dollars["subcategories"]
    row = next(line for line in out.splitlines() if line.startswith("│ failed"))
    assert f"failed ({', '.join(notes)})" in row, row


def test_breakdown_in_h100_equivalents(typed_db: Path) -> None:  # noqa: F811
    code, out = _report(typed_db, "--weight", "h100-equiv", "--by", "run", "--top", "0")
    assert code == 0, out
    # Words, not line breaks: the table's title wraps on a narrower console (CI's test order).
    said = " ".join(out.split())
    assert "H100-equivalent hours by run" in said and "uneven" in said, out


@pytest.mark.parametrize(
    ("args", "message", "status"),
    [
        # An unknown word, or flags that do not go together: usage errors (docs/cli.md), exit 2.
        (("--weight", "dolars"), "--weight: unknown weight 'dolars'", 2),
        (("--weight", "flops", "--json"), "changes nothing in --json without --by", 2),
        (("--weight", "flops", "--html", "x.html"), "--weight does not apply to --html", 2),
        (("--weight", "flops", "--by", "day"), "works with --by account, user, partition, run", 1),
    ],
)
def test_weight_errors_say_why(
    typed_db: Path,  # noqa: F811
    args: tuple[str, ...],
    message: str,
    status: int,
) -> None:
    code, out = _report(typed_db, *args)
    assert code == status
    assert message in " ".join(out.split()), out
    assert "Traceback" not in out and "Yield" not in out


@pytest.mark.parametrize(
    ("start", "end", "words"),
    [
        ("2026-11-01T00:00:00", "2026-12-01T00:00:00", "November 2026"),
        ("2026-12-01T00:00:00", "2027-01-01T00:00:00", "December 2026"),
        ("2026-11-01T00:00:00", "2026-11-04T00:00:00", "2026-11-01 .. 2026-11-04"),
        (
            "2026-11-30T10:40:47",
            "2026-11-30T11:00:00",
            "2026-11-30T10:40:47 .. 2026-11-30T11:00:00Z",
        ),
    ],
)
def test_the_cost_of_waste_names_its_period(start: str, end: str, words: str) -> None:
    from datetime import UTC, datetime

    from gpuyield.report.weights import period_words

    def epoch(text: str) -> int:
        return int(datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp())

    assert period_words(epoch(start), epoch(end)) == words
