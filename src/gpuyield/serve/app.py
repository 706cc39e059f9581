"""The HTTP side of `gpuyield serve`: a read-only Starlette app over the current snapshot.

Routes: ``/metrics`` (Prometheus), ``/api/report`` (``gpuyield report --json``), ``/api/idle-now``
(``gpuyield report idle-now --json``: who holds GPUs measured idle), ``/`` (the HTML
report of the last 7 days), ``/healthz``. Only GET and HEAD exist, so nothing served can change the
store. Without ``--token-file`` only clients on this machine are answered; with it, every request
must carry the token, whatever address it comes from or claims (proxy headers count only with
``--forwarded-allow-ips``, and never stand in for the token).
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import ipaddress
import json
import threading
from collections.abc import Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING

import duckdb

from gpuyield import parsing, store
from gpuyield.errors import GpuyieldError, InputError, renamed
from gpuyield.report.breakdown import MAX_TOP
from gpuyield.report.document import report_json_text
from gpuyield.report.summary import build_report_with_breakdown
from gpuyield.serve.limits import Cancellable, Cancelled
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
#: The library's field names in /api/report's words: the query parameter that set each one
#: (``window.until`` is ``until``). tests/serve/test_api.py checks every value is a parameter.
QUERY_PARAMS: Mapping[str, str] = MappingProxyType(
    {
        "window.since": "since",
        "window.until": "until",
        "report.since": "since",
        "report.until": "until",
        "report.by": "by",
        "report.top": "top",
        "report.tz": "tz",
    }
)
# How often a request computing a report looks whether its client is still there.
_HANG_UP_POLL_S = 0.5
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
    """ASGI middleware: with a token, a request without ``Authorization: Bearer <token>`` gets
    401 whatever its address; without one, a peer that is not loopback gets 401.

    The address is the peer the kernel reports, or what ``X-Forwarded-For`` says only when
    ``--forwarded-allow-ips`` names the proxy: so a proxy on this machine forwarding remote
    clients makes them look local. With a token that no longer matters: the token decides.
    """

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
        if self._expected is None:
            client = scope.get("client")
            return is_loopback(client[0] if client else None)
        sent = b""
        for name, value in scope["headers"]:
            if name == b"authorization":
                sent = value  # the last one, as dict() took it; repeats change nothing
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
    # No redirect from /metrics/ to /metrics: Starlette builds its URL from the request's Host
    # header, which would put whatever a client wrote there into our answer.
    app.router.redirect_slashes = False
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
            work = Cancellable()
            computing = asyncio.ensure_future(run_in_threadpool(_report_text, state, params, work))
            text = await _unless_hung_up(request, computing, work)
    except GpuyieldError as error:
        said = renamed(error, QUERY_PARAMS, example_hint=lambda name, value: f"e.g. {name}={value}")
        return _error(400 if isinstance(error, InputError) else 500, said.message, said.hint)
    except Cancelled:
        return _error(499, "the client closed the request", None)  # nobody reads it
    return Response(text + "\n", media_type="application/json")


async def _unless_hung_up(
    request: Request, computing: asyncio.Future[str], work: Cancellable
) -> str:
    """The computation's result; if the client hangs up first, the computation is stopped
    (DuckDB interrupted, or never started) and ``Cancelled`` raised."""
    while True:
        done, _ = await asyncio.wait({computing}, timeout=_HANG_UP_POLL_S)
        if done:
            return computing.result()
        if await request.is_disconnected():
            work.cancel()
            with contextlib.suppress(Cancelled, duckdb.InterruptException):
                await computing
            raise Cancelled


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


def _report_text(state: ServeState, params: dict[str, str], work: Cancellable) -> str:
    """``gpuyield report --json [--since --until --by --top --tz]`` against the store: the query
    parameters read by the CLI's grammar (``gpuyield.parsing``)."""
    tz = parsing.check_zone(params.get("tz") or parsing.DEFAULT_ZONE, field="report.tz")
    since, until = params.get("since"), params.get("until")
    since_s = parsing.parse_instant(since, tz=tz, field="report.since") if since else None
    until_s = parsing.parse_instant(until, tz=tz, field="report.until") if until else None
    text = params.get("top")
    top = (
        parsing.parse_count(text, field="report.top", at_most=MAX_TOP, example="10")
        if text
        else None
    )
    # One ledger at a time; a request whose client hung up while it waited never starts one.
    while not _LEDGER_SLOTS.acquire(timeout=_HANG_UP_POLL_S):
        work.check()
    try:
        with state.store_lock.reading():
            work.check()
            con = store.connect(state.settings.db, read_only=True)
            try:
                work.attach(con)
                result = build_report_with_breakdown(
                    state.settings.db,
                    since_s=since_s,
                    until_s=until_s,
                    by=params.get("by") or None,
                    top=top,
                    con=con,
                )
            finally:
                work.detach()
                con.close()
    finally:
        _LEDGER_SLOTS.release()
    return report_json_text(result.report, result.breakdown)


def _error(status: int, message: str, hint: str | None) -> Response:
    from starlette.responses import Response

    body = json.dumps({"error": message, "hint": hint})
    return Response(body + "\n", status_code=status, media_type="application/json")
