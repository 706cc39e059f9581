"""Loopback by default; with a token file every client, loopback included, must send the token.

The real-socket test binds all addresses and connects *from this machine's own non-loopback address*
(``source_address``): the server sees that address as the peer, exactly as it would see a remote
client, because the gate decides on the peer address the kernel reports and nothing else.
"""

from __future__ import annotations

import asyncio
import http.client
import socket
from pathlib import Path

import pytest
from typer.testing import CliRunner

from gpuyield.cli import app
from gpuyield.serve.app import TokenGate, is_loopback
from tests.serve.conftest import Server, Store, start_serve, stop

TOKEN = "s3cret-token-for-the-tests-0123456789"


@pytest.mark.parametrize(
    ("host", "loopback"),
    [("127.0.0.1", True), ("127.0.0.2", True), ("::1", True), ("::ffff:127.0.0.1", True),
     ("192.0.2.7", False), ("::ffff:192.0.2.7", False), ("fd00::2", False), (None, False),
     ("localhost", False), ("/run/gpuyield.sock", False)],
)  # fmt: skip
def test_is_loopback(host: str | None, loopback: bool) -> None:
    assert is_loopback(host) is loopback


def _status(
    gate: TokenGate, client: tuple[str, int] | None, headers: list[tuple[bytes, bytes]]
) -> int:
    sent: list[dict[str, object]] = []

    async def inner(scope: object, receive: object, send: object) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": []})  # type: ignore[operator]
        await send({"type": "http.response.body", "body": b"ok"})  # type: ignore[operator]

    async def receive() -> dict[str, object]:
        return {"type": "http.request", "body": b""}

    async def send(message: dict[str, object]) -> None:
        sent.append(message)

    gate.app = inner  # type: ignore[assignment]
    scope = {
        "type": "http",
        "method": "GET",
        "path": "/metrics",
        "headers": headers,
        "client": client,
    }
    asyncio.run(gate(scope, receive, send))  # type: ignore[arg-type]
    return int(sent[0]["status"])  # type: ignore[call-overload]


def test_gate_decides_on_the_peer_address_and_the_token() -> None:
    gate = TokenGate(None, TOKEN)  # type: ignore[arg-type]
    bearer = [(b"authorization", f"Bearer {TOKEN}".encode())]
    # With a token every request needs it, loopback included: a proxy on this machine (or a
    # believed X-Forwarded-For) makes any client look local.
    assert _status(gate, ("127.0.0.1", 5000), []) == 401
    assert _status(gate, ("::1", 5000), []) == 401
    assert _status(gate, ("127.0.0.1", 5000), bearer) == 200
    assert _status(gate, ("203.0.113.9", 5000), []) == 401
    assert _status(gate, ("203.0.113.9", 5000), bearer) == 200
    assert _status(gate, ("203.0.113.9", 5000), [(b"authorization", b"Bearer wrong")]) == 401
    assert _status(gate, ("203.0.113.9", 5000), [(b"authorization", TOKEN.encode())]) == 401
    assert _status(gate, None, bearer) == 200
    assert _status(gate, None, []) == 401
    no_token = TokenGate(None, None)  # type: ignore[arg-type]
    assert _status(no_token, ("203.0.113.9", 5000), bearer) == 401
    assert _status(no_token, ("127.0.0.1", 5000), []) == 200
    assert _status(no_token, ("::ffff:127.0.0.1", 5000), []) == 200


def _own_address() -> str | None:
    """A non-loopback IPv4 address of this machine, if it has one (standard library only: asks
    the kernel for each interface's address, as ``ip addr`` does)."""
    import fcntl
    import struct

    siocgifaddr = 0x8915
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        for _, name in socket.if_nameindex():
            try:
                packed = fcntl.ioctl(
                    probe.fileno(), siocgifaddr, struct.pack("256s", name.encode()[:15])
                )
            except OSError:
                continue  # no IPv4 address on this interface (or it is down)
            address = socket.inet_ntoa(packed[20:24])
            if not is_loopback(address):
                return address
    return None


def _request(server: Server, source: str, path: str, token: str | None) -> int:
    port = int(server.base.rsplit(":", 1)[1])
    connection = http.client.HTTPConnection(source, port, timeout=60, source_address=(source, 0))
    try:
        headers = {} if token is None else {"Authorization": f"Bearer {token}"}
        connection.request("GET", path, headers=headers)
        response = connection.getresponse()
        response.read()
        return response.status
    finally:
        connection.close()


def test_a_non_loopback_client_needs_the_token(sample_store: Store, tmp_path: Path) -> None:
    source = _own_address()
    if source is None:
        pytest.skip("this machine has no non-loopback IPv4 address to send from")
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN + "\n")
    server = start_serve(sample_store.db, tmp_path / "serve.log", "--token-file", str(token_file),
                         host="0.0.0.0")  # fmt: skip
    try:
        for path in ("/metrics", "/api/report", "/", "/healthz", "/nope"):
            assert _request(server, source, path, None) == 401, path
            assert _request(server, source, path, "wrong") == 401, path
        for path in ("/metrics", "/api/report", "/", "/healthz"):
            assert _request(server, source, path, TOKEN) == 200, path
            assert _request(server, "127.0.0.1", path, TOKEN) == 200, path
            assert _request(server, "127.0.0.1", path, None) == 401, path
    finally:
        stop(server.process)


def _cli(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, ["serve", *args])
    return result.exit_code, result.output


def test_listening_beyond_loopback_needs_a_token_file(tmp_path: Path) -> None:
    code, output = _cli("--db", str(tmp_path / "x.duckdb"), "--host", "0.0.0.0")
    assert code == 1
    assert "--token-file" in output and "0.0.0.0" in output
    short = tmp_path / "short"
    short.write_text("abc\n")
    code, output = _cli("--host", "0.0.0.0", "--token-file", str(short))
    assert code == 1 and "16 or more" in output
    code, output = _cli("--token-file", str(tmp_path / "missing"))
    assert code == 1 and "cannot read" in output


@pytest.mark.parametrize("every", ["5x", "0s", "-1m", "fast"])
def test_collect_every_must_be_a_duration(every: str) -> None:
    code, output = _cli("--collect-every", every)
    # A value that does not parse, or is out of range, is a usage error (docs/cli.md).
    assert code == 2 and "Invalid value for '--collect-every'" in output
    assert "not a duration" in output or "must be from 1s to 366d" in output


def test_collect_every_runs_gpuyield_collect_on_the_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The schedule calls the real `gpuyield collect` on --db: with no Slurm on PATH it fails
    naming the command, and creates no store."""
    from gpuyield.cli.serve import scheduled_collect
    from gpuyield.ingest.collect import CollectError
    from gpuyield.serve.state import ReadWriteLock

    monkeypatch.setenv("PATH", str(tmp_path))
    db = tmp_path / "x.duckdb"
    with pytest.raises(CollectError, match="sacct"):
        scheduled_collect(db)(ReadWriteLock())
    assert not db.exists()
