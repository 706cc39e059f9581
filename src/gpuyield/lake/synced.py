"""A command's result with what ``--lake`` then synced: one ``--json`` record for both.

``gpuyield ingest --lake`` and ``collect --lake`` write the store, then bring the lake up to date;
their JSON is the command's own record with the sync under a ``lake`` key (absent without
``--lake``). The record is built here, in the library, so the CLI only prints it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from gpuyield.lake.write import LakeSync


class Serializable(Protocol):
    """A result with a ``--json`` shape."""

    def to_dict(self) -> dict[str, Any]: ...


@dataclass(frozen=True, kw_only=True, slots=True)
class Synced:
    """A command's result and the lake sync that followed it (None without ``--lake``)."""

    result: Serializable
    lake: LakeSync | None = None

    def to_dict(self) -> dict[str, Any]:
        """The result's ``--json`` shape, plus ``lake``: what the sync wrote."""
        record = self.result.to_dict()
        return record if self.lake is None else {**record, "lake": self.lake.to_dict()}
