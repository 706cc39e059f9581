"""Calling the served ASGI application in-process: one request, its status, headers and body.

For tests that send many requests (Hypothesis) or need a client that hangs up at a chosen moment;
the real-socket tests start `gpuyield serve` itself.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, kw_only=True, slots=True)
class Answer:
    """One response."""

    status: int
    headers: list[tuple[bytes, bytes]]
    body: bytes


def call(
    app: Callable[..., Awaitable[None]],
    path: str,
    *,
    query: bytes = b"",
    headers: list[tuple[bytes, bytes]] | None = None,
    client: tuple[str, int] | None = ("127.0.0.1", 40000),
    method: str = "GET",
    hang_up: Callable[[], bool] | None = None,
) -> Answer:
    """Send one request to ``app``. ``hang_up``: once it returns True, the client has
    disconnected (every later ``receive`` says so)."""
    sent: list[dict[str, Any]] = []
    received = 0

    async def receive() -> dict[str, Any]:
        nonlocal received
        received += 1
        if received == 1:
            return {"type": "http.request", "body": b"", "more_body": False}
        while hang_up is None or not hang_up():
            await asyncio.sleep(0.05)  # a client that stays: nothing more to receive
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": path,
        "raw_path": path.encode("utf-8", "surrogateescape"),
        "root_path": "",
        "query_string": query,
        "headers": [(b"host", b"127.0.0.1:9464"), *(headers or [])],
        "client": client,
        "server": ("127.0.0.1", 9464),
    }
    asyncio.run(app(scope, receive, send))
    start = next(m for m in sent if m["type"] == "http.response.start")
    body = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    return Answer(status=int(start["status"]), headers=list(start["headers"]), body=body)
