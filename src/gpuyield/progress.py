"""Progress reporting for long work, without tying the library to a terminal."""

from __future__ import annotations

from typing import Protocol


class Progress(Protocol):
    """Receives progress from long-running library calls (the CLI draws Rich progress bars)."""

    def phase(self, name: str, total: int | None = None) -> None:
        """A new phase starts; ``total`` is its size in units of ``advance`` (None: unknown)."""

    def advance(self, amount: int) -> None:
        """``amount`` more units of the current phase are done."""


class NoProgress:
    """The default: report nothing."""

    def phase(self, name: str, total: int | None = None) -> None:
        """Ignore."""

    def advance(self, amount: int) -> None:
        """Ignore."""
