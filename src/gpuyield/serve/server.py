"""Run `gpuyield serve`: check the options, build the first snapshot, serve with uvicorn."""

from __future__ import annotations

import socket
from dataclasses import dataclass
from pathlib import Path

from gpuyield.errors import InputError, MissingExtraError
from gpuyield.serve.app import build_app, is_loopback
from gpuyield.serve.state import ServeSettings, ServeState

_LOCAL_NAMES = ("localhost", "localhost.localdomain", "ip6-localhost")


@dataclass(frozen=True, kw_only=True, slots=True)
class Listen:
    """Where and for whom the server listens."""

    host: str = "127.0.0.1"
    """Address to bind; anything but loopback needs a token."""
    port: int = 9464
    """TCP port (9464: the port Prometheus' exporter list gives gpuyield's kind of exporter)."""
    token: str | None = None
    """Bearer token non-loopback clients must send."""


def read_token(path: Path) -> str:
    """The bearer token in ``path`` (one line; surrounding whitespace ignored)."""
    try:
        token = path.read_text(encoding="utf-8").strip()
    except OSError as error:
        raise InputError(
            f"--token-file: cannot read {path}: {error.strerror}", hint="check the path"
        ) from None
    if len(token) < 16 or any(c.isspace() for c in token):
        raise InputError(
            f"--token-file: {path} must hold one token of 16 or more characters, no spaces",
            hint="make one with: python3 -c 'import secrets; print(secrets.token_urlsafe(32))'",
        )
    return token


def check_listen(listen: Listen) -> None:
    """Refuse to listen beyond this machine without a token."""
    if not (0 <= listen.port <= 65535):
        raise InputError(f"--port must be 0..65535, not {listen.port}", hint="e.g. --port 9464")
    local = listen.host in _LOCAL_NAMES or is_loopback(listen.host)
    if not local and listen.token is None:
        raise InputError(
            f"--host {listen.host} is reachable from other machines, and --token-file is not set",
            hint="pass --token-file FILE (clients send Authorization: Bearer <token>), "
            "or keep the default --host 127.0.0.1",
        )


def serve(
    settings: ServeSettings, listen: Listen, *, sockets: list[socket.socket] | None = None
) -> None:
    """Serve until interrupted (Ctrl-C, SIGTERM). ``sockets``: already bound (tests)."""
    check_listen(listen)
    try:
        import uvicorn
    except ImportError:
        raise MissingExtraError("serve", "uvicorn") from None
    state = ServeState(settings)
    state.start()
    try:
        config = uvicorn.Config(
            build_app(state, token=listen.token),
            host=listen.host,
            port=listen.port,
            log_level="warning",
            access_log=False,
            # Prometheus keeps its scrape connections open; a slow client must not hold a
            # worker slot forever.
            timeout_keep_alive=30,
        )
        uvicorn.Server(config).run(sockets=sockets)
    finally:
        state.stop()
