"""Run `gpuyield serve`: check the options, build the first snapshot, serve with uvicorn."""

from __future__ import annotations

import errno
import os
import socket
import stat
from dataclasses import dataclass, field
from pathlib import Path

from gpuyield.errors import FieldError, MissingExtraError
from gpuyield.serve.app import build_app, is_loopback
from gpuyield.serve.limits import ConnectionLimits, guarded_protocol
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
    """Bearer token every request must send (None: only loopback clients are answered)."""
    forwarded_allow_ips: str | None = None
    """Proxies whose ``X-Forwarded-For``/``X-Forwarded-Proto`` are believed (uvicorn's list:
    addresses, networks or ``*``); None: every proxy header is ignored, whatever the
    ``FORWARDED_ALLOW_IPS`` environment variable says."""
    limits: ConnectionLimits = field(default_factory=ConnectionLimits)
    """Connections kept and how long a client may take to send a request."""


# A token is a line of text: anything longer than this is not a token file.
_TOKEN_FILE_BYTES = 4096
_TOKEN_FILE = "serve.token_file"
_TOKEN_HINT = "make one with: python3 -c 'import secrets; print(secrets.token_urlsafe(32))' > FILE"


def read_token(path: Path) -> str:
    """The bearer token in ``path`` (one line; surrounding whitespace ignored).

    A regular file of at most 4 KiB of UTF-8 without NUL: ``/dev/zero`` or a FIFO would block
    or never end, and a token nobody can type is a mistake, not a secret.
    """
    data = _token_bytes(path)
    if b"\x00" in data:
        raise FieldError(_TOKEN_FILE, f": {path} holds a NUL byte", hint=_TOKEN_HINT)
    try:
        token = data.decode("utf-8").strip()
    except UnicodeDecodeError:
        raise FieldError(_TOKEN_FILE, f": {path} is not UTF-8 text", hint=_TOKEN_HINT) from None
    if len(token) < 16 or any(c.isspace() for c in token) or not token.isprintable():
        raise FieldError(
            _TOKEN_FILE,
            f": {path} must hold one token of 16 or more printable characters, no spaces",
            hint=_TOKEN_HINT,
        )
    return token


def _token_bytes(path: Path) -> bytes:
    """The file's bytes, read only if it is a regular file of at most ``_TOKEN_FILE_BYTES``."""
    try:
        # O_NONBLOCK: opening a FIFO with no writer must not wait; fstat then says what it is.
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as error:
        reason = "symbolic links loop" if error.errno == errno.ELOOP else error.strerror
        raise FieldError(
            _TOKEN_FILE, f": cannot read {path}: {reason}", hint="check the path"
        ) from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise FieldError(
                _TOKEN_FILE,
                f": {path} is not a regular file (a device, a FIFO or a folder)",
                hint=_TOKEN_HINT,
            )
        data = os.read(fd, _TOKEN_FILE_BYTES + 1)
    finally:
        os.close(fd)
    if len(data) > _TOKEN_FILE_BYTES:
        raise FieldError(
            _TOKEN_FILE,
            f": {path} is larger than {_TOKEN_FILE_BYTES} bytes: not one token",
            hint=_TOKEN_HINT,
        )
    return data


def check_listen(listen: Listen) -> None:
    """Refuse to listen beyond this machine without a token."""
    if not (0 <= listen.port <= 65535):
        raise FieldError("serve.port", f"must be 0..65535, not {listen.port}", example="9464")
    limits = listen.limits
    if not 1 <= limits.max_connections <= 1_000_000:
        raise FieldError(
            "serve.max_connections",
            f"must be 1..1,000,000, not {limits.max_connections}",
            example="256",
        )
    for name, seconds in (
        ("serve.header_timeout_s", limits.header_timeout_s),
        ("serve.idle_timeout_s", limits.idle_timeout_s),
    ):
        if not 0 < seconds <= 86_400:
            raise FieldError(name, "must be more than 0s and at most 1d", example="10s")
    local = listen.host in _LOCAL_NAMES or is_loopback(listen.host)
    if not local and listen.token is None:
        raise FieldError(
            "serve.host",
            f"{listen.host} is reachable from other machines, and {_TOKEN_FILE} is not set",
            hint=f"pass {_TOKEN_FILE} FILE (clients send Authorization: Bearer <token>), "
            "or keep the default serve.host 127.0.0.1",
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
        trusted = listen.forwarded_allow_ips
        config = uvicorn.Config(
            build_app(state, token=listen.token),
            host=listen.host,
            port=listen.port,
            log_level="warning",
            access_log=False,
            http=guarded_protocol(listen.limits),
            # Proxy headers only from the proxies named on the command line: uvicorn would
            # otherwise take FORWARDED_ALLOW_IPS from the environment, and with '*' there any
            # client could say it is 127.0.0.1.
            proxy_headers=trusted is not None,
            forwarded_allow_ips=trusted if trusted is not None else "127.0.0.1",
            # Prometheus keeps its scrape connections open; the guarded protocol closes them
            # after --idle-timeout without a request, and so does uvicorn.
            timeout_keep_alive=max(1, round(listen.limits.idle_timeout_s)),
            server_header=False,
        )
        uvicorn.Server(config).run(sockets=sockets)
    finally:
        state.stop()
