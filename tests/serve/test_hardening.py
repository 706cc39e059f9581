"""`gpuyield serve` against hostile clients (issue 26): proxy headers, slow and idle connections,
too many connections, Host reflection, numbers too large for SQL, token files, abandoned work.

The servers are real (`python -m gpuyield serve` on loopback) and so is the reverse proxy in front
of one of them (tests/serve/forwarding_proxy.py, a process of its own). Waits are bounded, never
timed: a connection the server should close must be closed before the client has finished what
it would take a patient server to wait for.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import duckdb
import pytest
from typer.testing import CliRunner

from gpuyield.cli import app
from tests.serve.asgi import call
from tests.serve.conftest import Reply, Server, Store, get, launch_serve, ready, stop

TOKEN = "hardening-token-0123456789abcdef"
# Bounded waits for what the server should do within a second or two (CI machines are loaded).
CLOSE_WITHIN_S = 60.0


@pytest.fixture(scope="module")
def plain(sample_store: Store, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """Loopback, no token, small limits, and FORWARDED_ALLOW_IPS='*' in its environment (common
    behind a proxy), which must change nothing without --forwarded-allow-ips."""
    log = tmp_path_factory.mktemp("plain") / "serve.log"
    os.environ["FORWARDED_ALLOW_IPS"] = "*"
    try:
        server = launch_serve(
            sample_store.db, log, "--max-connections", "8", "--header-timeout", "1s",
            "--idle-timeout", "2s",
        )  # fmt: skip
    finally:
        del os.environ["FORWARDED_ALLOW_IPS"]
    ready(server)
    yield server
    stop(server.process)


def _port(server: Server) -> int:
    return int(server.base.rsplit(":", 1)[1])


def _raw(port: int, request: bytes) -> bytes:
    """Send ``request`` on a fresh connection; everything the server answers until it closes."""
    with socket.create_connection(("127.0.0.1", port), timeout=CLOSE_WITHIN_S) as sock:
        sock.sendall(request)
        chunks = []
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks)


def _closed_by_server(sock: socket.socket) -> bool:
    """Whether the server closed ``sock`` (waits up to CLOSE_WITHIN_S for it to say)."""
    sock.settimeout(CLOSE_WITHIN_S)
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False


# --- proxy headers -----------------------------------------------------------------------------


def test_forwarded_headers_are_ignored_without_the_flag(plain: Server) -> None:
    # Believed, this would make the loopback client a remote one (401 without a token).
    spoofed = get(plain.base + "/metrics", headers={"X-Forwarded-For": "203.0.113.9"})
    assert spoofed.status == 200


@pytest.fixture(scope="module")
def proxied(
    sample_store: Store, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, str]]:
    """Two servers behind --forwarded-allow-ips 127.0.0.1, each behind its own forwarding proxy:
    one with a token, one without."""
    root = tmp_path_factory.mktemp("proxied")
    token_file = root / "token"
    token_file.write_text(TOKEN + "\n")
    servers = {
        "token": launch_serve(sample_store.db, root / "token.log", "--token-file", str(token_file),
                              "--forwarded-allow-ips", "127.0.0.1"),
        "open": launch_serve(sample_store.db, root / "open.log",
                             "--forwarded-allow-ips", "127.0.0.1"),
    }  # fmt: skip
    proxies: list[subprocess.Popen[str]] = []
    try:
        bases = {}
        for name, server in servers.items():
            ready(server)
            proxy = subprocess.Popen(
                [sys.executable, str(Path(__file__).with_name("forwarding_proxy.py")),
                 str(_port(server))],
                stdout=subprocess.PIPE, text=True,
            )  # fmt: skip
            proxies.append(proxy)
            assert proxy.stdout is not None
            word, port = proxy.stdout.readline().split()
            assert word == "ready"
            bases[name] = f"http://127.0.0.1:{port}"
        yield bases
    finally:
        for proxy in proxies:
            proxy.kill()
            proxy.wait()
            if proxy.stdout is not None:
                proxy.stdout.close()
        for server in servers.values():
            stop(server.process)


def test_behind_a_proxy_the_token_decides(proxied: dict[str, str]) -> None:
    bearer = {"Authorization": f"Bearer {TOKEN}"}
    for path in ("/metrics", "/api/report", "/healthz", "/"):
        assert get(proxied["token"] + path).status == 401, path
        # A client claiming to be this machine: the proxy appends its real address, and even
        # believed, an address never stands in for the token.
        claimed = {"X-Forwarded-For": "127.0.0.1"}
        assert get(proxied["token"] + path, headers=claimed).status == 401, path
        assert get(proxied["token"] + path, headers=bearer).status == 200, path


def test_with_the_flag_the_forwarded_address_is_believed(proxied: dict[str, str]) -> None:
    # The proxy (trusted) appends 127.0.0.1; uvicorn skips it and takes the client's claim,
    # a remote address: without a token a remote client is refused.
    assert get(proxied["open"] + "/metrics").status == 200
    remote = get(proxied["open"] + "/metrics", headers={"X-Forwarded-For": "203.0.113.9"})
    assert remote.status == 401


# --- connections -------------------------------------------------------------------------------


def test_an_idle_connection_is_closed(plain: Server) -> None:
    with socket.create_connection(("127.0.0.1", _port(plain)), timeout=10) as sock:
        assert _closed_by_server(sock)


def test_a_trickled_request_is_closed_before_it_ends(plain: Server) -> None:
    head = b"GET /metrics HTTP/1.1\r\nHost: x\r\n" + b"X-Pad: " + b"a" * 400 + b"\r\n\r\n"
    sent = 0
    with socket.create_connection(("127.0.0.1", _port(plain)), timeout=10) as sock:
        try:
            # One byte every 0.1 s: the whole head would take 40 s; --header-timeout is 1 s.
            for byte in head:
                sock.sendall(bytes([byte]))
                sent += 1
                time.sleep(0.1)
        except (BrokenPipeError, ConnectionResetError):
            pass
        else:
            pytest.fail("the server waited for the whole trickled request")
    assert sent < len(head)


def test_connections_past_the_limit_are_closed_and_the_rest_served(plain: Server) -> None:
    port = _port(plain)
    held = [socket.create_connection(("127.0.0.1", port), timeout=10) for _ in range(8)]
    try:
        extra = socket.create_connection(("127.0.0.1", port), timeout=10)
        with extra:
            assert _closed_by_server(extra)
    finally:
        for sock in held:
            sock.close()
    # The held ones are gone (closed here, or by the header timeout): the server answers.
    deadline = time.monotonic() + CLOSE_WITHIN_S
    while (reply := _try_get(plain.base + "/metrics")) is None and time.monotonic() < deadline:
        time.sleep(0.2)
    assert reply is not None and reply.status == 200


def _try_get(url: str) -> Reply | None:
    try:
        return get(url, timeout_s=10)
    except OSError:
        return None


# --- requests ----------------------------------------------------------------------------------


def test_the_host_header_is_never_reflected(plain: Server) -> None:
    for path in (b"/metrics/", b"/api/report/", b"//evil.example/", b"/nope"):
        answer = _raw(
            _port(plain),
            b"GET " + path + b" HTTP/1.1\r\nHost: evil.example\r\nConnection: close\r\n\r\n",
        )
        status = int(answer.split(b" ", 2)[1])
        assert status in (404, 400), answer[:200]
        assert b"evil.example" not in answer.replace(path, b""), answer[:400]
        assert b"location:" not in answer.lower()


@pytest.mark.parametrize(
    ("query", "words"),
    [
        (f"top={2**63}", "top"),
        (f"top={2**64 + 7}", "top"),
        ("top=1" + "0" * 4000, "top"),
        ("top=-1", "top"),
        ("top=%EF%BC%91", "top"),  # a fullwidth digit: isdigit() says yes, int() reads it
        ("since=9999-12-31T00:00:00", "since"),
        ("since=0001-01-01T00:00:00&tz=Pacific/Kiritimati", "since"),
        ("until=1970-01-01T00:00:00", "until"),
        ("by=account&top=" + str(10**12), "top"),
    ],
)
def test_numbers_are_bounded_before_sql(plain: Server, query: str, words: str) -> None:
    reply = get(plain.base + "/api/report?" + query)
    assert reply.status == 400, reply.body[:300]
    body = json.loads(reply.body)
    assert words in body["error"] and body["hint"]


# --- token files -------------------------------------------------------------------------------


def _token_file(kind: str, tmp_path: Path) -> Path:
    path = tmp_path / kind
    if kind == "dev-zero":
        return Path("/dev/zero")
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "directory":
        path.mkdir()
    elif kind == "not-utf8":
        path.write_bytes(b"\xff\xfe" + b"a" * 30)
    elif kind == "nul":
        path.write_bytes(b"a" * 20 + b"\x00" + b"b" * 20)
    elif kind == "huge":
        path.write_bytes(b"a" * 100_000)
    elif kind == "escape":
        path.write_bytes(b"abcdefghijklmnop\x1b[31mqrstuvwx")
    return path


@pytest.mark.parametrize(
    ("kind", "words"),
    [
        ("dev-zero", "not a regular file"),
        ("fifo", "not a regular file"),
        ("directory", "not a regular file"),
        ("not-utf8", "not UTF-8"),
        ("nul", "NUL"),
        ("huge", "larger than 4096 bytes"),
        ("escape", "one token"),
    ],
)
def test_token_files_are_refused_cleanly(kind: str, words: str, tmp_path: Path) -> None:
    path = _token_file(kind, tmp_path)
    result = CliRunner().invoke(
        app, ["serve", "--db", str(tmp_path / "x.duckdb"), "--token-file", str(path)]
    )
    assert result.exception is None or isinstance(result.exception, SystemExit)
    assert result.exit_code == 1, result.output
    text = " ".join(result.output.split())  # Rich wraps at 80 columns off a terminal
    assert text.startswith("error: --token-file") and words in text, result.output
    assert text.count("error:") == 1 and text.count("hint:") == 1 and "\x1b" not in text


@pytest.mark.parametrize(
    ("flags", "words", "status"),
    [
        # Refused while the command line is read (a usage error, docs/cli.md): exit 2.
        (["--max-connections", "0"], "--max-connections", 2),
        (["--header-timeout", "1e400s"], "--header-timeout", 2),
        (["--idle-timeout", "0s"], "--idle-timeout", 2),
        (["--collect-every", "9" * 400 + "s"], "--collect-every", 2),
        # Refused by the server's own limits (the library's error): exit 1.
        (["--header-timeout", "2d"], "--header-timeout", 1),
    ],
)
def test_limits_must_be_sane(flags: list[str], words: str, status: int, tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["serve", "--db", str(tmp_path / "x.duckdb"), *flags])
    assert result.exit_code == status and words in result.output, result.output
    assert "Traceback" not in result.output


# --- work for a client that hung up ------------------------------------------------------------


def _endless_report(seen: dict[str, bool], started: threading.Event) -> object:
    """Stands in for a ledger of a huge store: a query of hours on the connection it is given."""

    def build(db: object, *, con: duckdb.DuckDBPyConnection, **_: object) -> object:
        seen["started"] = True
        started.set()
        try:
            con.execute("SELECT count(*) FROM range(1000000000000000)").fetchall()
        except duckdb.InterruptException:
            seen["interrupted"] = True
            raise
        raise AssertionError("the query was not interrupted")

    return build


def test_work_for_a_client_that_hung_up_is_interrupted(
    sample_store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    from gpuyield.serve import app as served
    from gpuyield.serve.state import ServeSettings, ServeState

    seen: dict[str, bool] = {}
    started = threading.Event()
    monkeypatch.setattr(served, "build_report_with_breakdown", _endless_report(seen, started))
    state = ServeState(ServeSettings(db=sample_store.db, with_page=False))
    answer = call(
        served.build_app(state, token=None), "/api/report", query=b"by=account",
        hang_up=started.is_set,
    )  # fmt: skip
    assert answer.status == 499
    assert seen == {"started": True, "interrupted": True}
    assert served._LEDGER_SLOTS.acquire(blocking=False)  # released for the next request
    served._LEDGER_SLOTS.release()


def test_a_request_that_hung_up_while_waiting_never_starts(
    sample_store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    from gpuyield.serve import app as served
    from gpuyield.serve.state import ServeSettings, ServeState

    seen: dict[str, bool] = {}
    monkeypatch.setattr(
        served, "build_report_with_breakdown", _endless_report(seen, threading.Event())
    )
    state = ServeState(ServeSettings(db=sample_store.db, with_page=False))
    assert served._LEDGER_SLOTS.acquire(blocking=False)  # another window is being computed
    try:
        answer = call(
            served.build_app(state, token=None), "/api/report", query=b"by=account",
            hang_up=lambda: True,
        )  # fmt: skip
    finally:
        served._LEDGER_SLOTS.release()
    assert answer.status == 499 and seen == {}
