"""The HTTP side of `gpuyield serve`: a read-only Starlette app over the current snapshot.

Routes: ``/metrics`` (Prometheus), ``/api/report`` (``gpuyield report --json``), ``/api/idle-now``
(``gpuyield idle-now --json``: who holds GPUs measured idle), ``/`` (the HTML
report of the last 7 days), ``/healthz``. Only GET and HEAD exist, so nothing served can change the
store. A client that is not on this machine must send the bearer token (``--token-file``).
"""

from __future__ import annotations

import hmac
import ipaddress
import json
import threading
from datetime import datetime
from typing import TYPE_CHECKING
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from gpuyield.errors import GpuyieldError, InputError
from gpuyield.report.document import report_json_text
from gpuyield.report.summary import build_report_with_breakdown
from gpuyield.serve.state import ServeState

if TYPE_CHECKING:
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import Response
    from starlette.types import ASGIApp, Receive, Scope, Send

_METRICS_TYPE = "text/plain; version=0.0.4; charset=utf-8"
# The page is self-contained: inline CSS and SVG, no script; anything else it tried would be a bug.
_PAGE_CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:; frame-ancestors 'none'"
_REPORT_PARAMS = frozenset({"since", "until", "by", "top", "tz"})
# A ledger of a large store takes gigabytes: other windows are computed one at a time.
_LEDGER_SLOTS = threading.BoundedSemaphore(1)


def is_loopback(host: str | None) -> bool:
    """Whether a peer address is this machine (127.0.0.0/8, ::1, or IPv4-mapped loopback)."""
    if host is None:
        return False
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False  # a Unix socket or a name: not a peer address we can vouch for
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return address.is_loopback


class TokenGate:
    """ASGI middleware: a non-loopback peer without ``Authorization: Bearer <token>`` gets 401."""

    def __init__(self, app: ASGIApp, token: str | None) -> None:
        self.app = app
        self._expected = None if token is None else f"Bearer {token}".encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or self._allowed(scope):
            await self.app(scope, receive, send)
            return
        from starlette.responses import PlainTextResponse

        response = PlainTextResponse(
            "401 unauthorized: send Authorization: Bearer <token from --token-file>\n",
            status_code=401,
            headers={"WWW-Authenticate": 'Bearer realm="gpuyield"'},
        )
        await response(scope, receive, send)

    def _allowed(self, scope: Scope) -> bool:
        client = scope.get("client")
        if is_loopback(client[0] if client else None):
            return True
        if self._expected is None:
            return False
        sent = dict(scope["headers"]).get(b"authorization", b"")
        # Constant time: the comparison must not tell an attacker how much of a guess was right.
        return hmac.compare_digest(sent, self._expected)


def build_app(state: ServeState, *, token: str | None) -> ASGIApp:
    """The ASGI application over ``state``, behind the token gate."""
    from starlette.applications import Starlette
    from starlette.routing import Route

    read_only = ["GET", "HEAD"]
    app: Starlette = Starlette(
        routes=[
            Route("/metrics", _metrics, methods=read_only),
            Route("/api/report", _api_report, methods=read_only),
            Route("/api/idle-now", _api_idle_now, methods=read_only),
            Route("/healthz", _healthz, methods=read_only),
            Route("/", _page, methods=read_only),
        ]
    )
    app.state.gpuyield = state
    return TokenGate(app, token)


def _state(request: Request) -> ServeState:
    state: ServeState = request.app.state.gpuyield
    return state


async def _metrics(request: Request) -> Response:
    from starlette.responses import Response

    return Response(_state(request).served.metrics, media_type=_METRICS_TYPE)


async def _page(request: Request) -> Response:
    from starlette.responses import HTMLResponse

    snapshot = _state(request).served.snapshot
    if snapshot is None:
        return HTMLResponse(
            "<!DOCTYPE html><title>gpuyield</title><p>No numbers yet: see /healthz.</p>",
            status_code=503,
            headers={"Retry-After": "30", "Content-Security-Policy": _PAGE_CSP},
        )
    return HTMLResponse(snapshot.page, headers={"Content-Security-Policy": _PAGE_CSP})


async def _healthz(request: Request) -> Response:
    from starlette.responses import JSONResponse

    served = _state(request).served
    snap = served.snapshot
    body = {
        "ok": snap is not None,
        "coverage": None if snap is None else snap.report.to_dict()["window"],
        "snapshot_built_at": None if snap is None else snap.built_at_s,
        "collection_running": served.stats.collection_running,
        "last_error": served.stats.last_error or None,
    }
    return JSONResponse(body, status_code=200 if snap is not None else 503)


async def _api_report(request: Request) -> Response:
    from starlette.concurrency import run_in_threadpool
    from starlette.responses import Response

    state = _state(request)
    params = dict(request.query_params)
    unknown = sorted(set(params) - _REPORT_PARAMS)
    try:
        if unknown:
            raise InputError(
                f"unknown query parameter {unknown[0]!r}",
                hint=f"use {', '.join(sorted(_REPORT_PARAMS))}",
            )
        if not any(params.get(k) for k in ("since", "until", "by", "top")):
            snap = state.served.snapshot
            if snap is None:
                return _error(503, "no numbers yet", "the first snapshot is still being built")
            text = snap.report_json
        else:
            text = await run_in_threadpool(_report_text, state, params)
    except GpuyieldError as error:
        return _error(400 if isinstance(error, InputError) else 500, error.message, error.hint)
    return Response(text + "\n", media_type="application/json")


async def _api_idle_now(request: Request) -> Response:
    """The snapshot's idle list, computed with it: a request never reads the store."""
    from starlette.responses import Response

    if request.query_params:
        first = sorted(request.query_params)[0]
        return _error(400, f"unknown query parameter {first!r}", "/api/idle-now takes none")
    snap = _state(request).served.snapshot
    if snap is None:
        return _error(503, "no numbers yet", "the first snapshot is still being built")
    return Response(snap.idle_now_json + "\n", media_type="application/json")


def _report_text(state: ServeState, params: dict[str, str]) -> str:
    """``gpuyield report --json [--since --until --by --top --tz]`` against the store."""
    tz = params.get("tz") or "UTC"
    since_s = _instant(params.get("since"), tz, "since")
    until_s = _instant(params.get("until"), tz, "until")
    top = _top(params.get("top"))
    with _LEDGER_SLOTS, state.store_lock.reading():
        result = build_report_with_breakdown(
            state.settings.db,
            since_s=since_s,
            until_s=until_s,
            by=params.get("by") or None,
            top=top,
        )
    return report_json_text(result.report, result.breakdown)


def _instant(text: str | None, tz: str, name: str) -> int | None:
    if not text:
        return None
    try:
        value = datetime.fromisoformat(text)
        if value.tzinfo is None:
            value = value.replace(tzinfo=ZoneInfo(tz))
    except (ValueError, ZoneInfoNotFoundError):
        raise InputError(
            f"{name}: not an ISO time (or tz not a time zone): {text!r}",
            hint="write it like 2026-11-30T11:00:00, tz like Europe/Berlin",
        ) from None
    return int(value.timestamp())


def _top(text: str | None) -> int | None:
    if not text:
        return None
    try:
        return int(text)
    except ValueError:
        raise InputError(f"top: not a whole number: {text!r}", hint="e.g. top=10") from None


def _error(status: int, message: str, hint: str | None) -> Response:
    from starlette.responses import Response

    body = json.dumps({"error": message, "hint": hint})
    return Response(body + "\n", status_code=status, media_type="application/json")
