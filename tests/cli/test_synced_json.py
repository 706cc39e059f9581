"""``ingest --lake --json`` and ``collect --lake --json``: the command's record, then ``lake``.

The record is built by the library (``gpuyield.lake.synced``), so the CLI builds no JSON; these
pin its shape: unchanged without a sync, the sync's own record under ``lake`` with one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gpuyield.lake import LakeSync
from gpuyield.lake.synced import Synced


@dataclass(frozen=True)
class _Ingested:
    rows: int

    def to_dict(self) -> dict[str, Any]:
        return {"rows": self.rows, "rejected": 0}


def _sync(lake: str) -> LakeSync:
    return LakeSync(
        lake=lake,
        writer="w1",
        generation=2,
        files_written=3,
        rows_written=40,
        files_unchanged=5,
        files_retired=1,
    )


def test_without_a_sync_the_record_is_the_commands_own() -> None:
    result = _Ingested(rows=7)
    assert Synced(result=result).to_dict() == {"rows": 7, "rejected": 0}


def test_the_sync_comes_last_under_lake() -> None:
    sync = _sync("/the/lake")
    record = Synced(result=_Ingested(rows=7), lake=sync).to_dict()
    assert list(record) == ["rows", "rejected", "lake"]
    assert record["lake"] == sync.to_dict()
    assert record["lake"]["lake"] == "/the/lake"
