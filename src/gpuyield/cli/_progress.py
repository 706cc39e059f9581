"""Rich progress bars for the library's ``Progress`` protocol."""

from __future__ import annotations

from types import TracebackType

from rich.progress import (
    BarColumn,
    DownloadColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)

from gpuyield.cli._common import err_console


class RichProgress:
    """One bar per phase on stderr (stdout stays clean for --json)."""

    def __init__(self, *, enabled: bool = True, counts: bool = False) -> None:
        # Phases count bytes read (ingest, collect) or, with ``counts``, steps (the report's charts).
        self._progress = Progress(
            SpinnerColumn(),
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn() if counts else DownloadColumn(),
            TimeElapsedColumn(),
            console=err_console,
            transient=True,
            # Off a terminal (cron, logs, a pipe) Rich would still print a blank line at the end.
            disable=not enabled or not err_console.is_terminal,
        )
        self._task: TaskID | None = None

    def __enter__(self) -> RichProgress:
        self._progress.__enter__()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._progress.__exit__(kind, error, tb)

    def phase(self, name: str, total: int | None = None) -> None:
        """Finish the previous bar and start one for ``name``."""
        if self._task is not None:
            self._progress.update(self._task, completed=self._progress.tasks[-1].total or 0)
        self._task = self._progress.add_task(name, total=total)

    def advance(self, amount: int) -> None:
        """Move the current bar."""
        if self._task is not None:
            self._progress.advance(self._task, amount)
