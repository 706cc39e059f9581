"""What one client may cost `gpuyield serve`: connections, time to send a request, work it left.

uvicorn closes a connection idle between requests (keep-alive), but not one that never sends a
request, nor one that sends its request a byte every few seconds: a thousand such connections
used every file descriptor of a server with ``ulimit -n 1024``, before any token was checked, and
``/metrics`` stopped answering for everyone. The HTTP protocol here (uvicorn's h11 protocol, with
two limits added) closes

- a connection beyond ``max_connections`` at once (its descriptor is back before it costs more);
- a connection that has not delivered a whole request head ``header_timeout_s`` after it opened,
  or ``idle_timeout_s`` after its previous response: idle or trickling, it is closed either way.

``Cancellable`` stops the ledger computation of a request whose client has hung up.
"""

from __future__ import annotations

import asyncio
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import duckdb


@dataclass(frozen=True, kw_only=True, slots=True)
class ConnectionLimits:
    """How many connections the server keeps, and how long each may take to ask."""

    max_connections: int = 256
    """Open connections at most; one more is closed at once."""
    header_timeout_s: float = 10.0
    """A new connection must deliver a whole request head within this many seconds."""
    idle_timeout_s: float = 30.0
    """After a response, the next request head must arrive within this many seconds."""


def guarded_protocol(limits: ConnectionLimits) -> type[asyncio.Protocol]:
    """uvicorn's h11 HTTP protocol with ``limits`` enforced (uvicorn imported only here: the
    serve extra)."""
    from uvicorn.protocols.http.h11_impl import H11Protocol

    class GuardedH11Protocol(H11Protocol):
        _deadline: asyncio.TimerHandle | None = None

        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            super().connection_made(transport)  # type: ignore[arg-type]
            if len(self.connections) > limits.max_connections:
                self.transport.abort()  # over the limit: the descriptor goes back now
                return
            self._arm(limits.header_timeout_s)

        def on_response_complete(self) -> None:
            super().on_response_complete()
            if not self.transport.is_closing():
                self._arm(limits.idle_timeout_s)

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            super().connection_lost(exc)

        def _arm(self, seconds: float) -> None:
            """Close the connection unless a new request has begun ``seconds`` from now (a new
            request replaces ``cycle``: its head has arrived whole)."""
            self._disarm()
            waiting_after = self.cycle
            self._deadline = self.loop.call_later(seconds, self._expire, waiting_after)

        def _disarm(self) -> None:
            if self._deadline is not None:
                self._deadline.cancel()
                self._deadline = None

        def _expire(self, waiting_after: Any) -> None:
            self._deadline = None
            if self.cycle is waiting_after and not self.transport.is_closing():
                self.transport.close()

    return GuardedH11Protocol


class Cancelled(Exception):
    """The client hung up: the work for it was stopped."""


class Cancellable:
    """Work for one request that can be stopped from another thread: ``cancel`` interrupts the
    DuckDB connection it runs on (``attach``), or stops it before it opens one."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._con: duckdb.DuckDBPyConnection | None = None
        self.cancelled = False

    def attach(self, con: duckdb.DuckDBPyConnection) -> None:
        """The connection the work runs on; raises ``Cancelled`` if it was cancelled already."""
        with self._lock:
            if self.cancelled:
                raise Cancelled
            self._con = con

    def detach(self) -> None:
        with self._lock:
            self._con = None

    def check(self) -> None:
        """Raise ``Cancelled`` if the client has hung up."""
        if self.cancelled:
            raise Cancelled

    def cancel(self) -> None:
        with self._lock:
            self.cancelled = True
            if self._con is not None:
                self._con.interrupt()
