"""Hypothesis: any request, however hostile its path, query, headers, method or address, gets an
answer that is not a server error, keeps the token rule, and reflects nothing of its Host.

The requests go to the served application in-process (tests/serve/asgi.py) over a snapshot of the
bundled sample, with and without a token; a query that asks for another window really computes it.
"""

from __future__ import annotations

import json
from functools import cache
from urllib.parse import urlencode

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from gpuyield.serve.app import build_app
from gpuyield.serve.state import ServeSettings, ServeState
from tests.serve.asgi import Answer, call
from tests.serve.conftest import SAMPLE, SAMPLE_UNTIL, _epoch

TOKEN = "property-token-0123456789abcdef"
_ANSWERS = {200, 400, 401, 404, 405, 503}
_JSON_PATHS = {"/api/report", "/api/idle-now", "/healthz"}

PATHS = st.one_of(
    st.sampled_from(["/api/report"] * 6 + ["/metrics", "/api/idle-now", "/healthz", "/", "/metrics/",
                     "/nope", "//evil.example/", "/api/report/../metrics", "/%2e%2e/", "/\x00"]),
    st.text(max_size=20).map(lambda t: "/" + t),
)  # fmt: skip
VALUES = st.one_of(
    st.sampled_from(["", "10", "0", "-1", str(2**63), "1" * 30, "2026-11-30T10:30:00",
                     "2026-11-30T10:30:00+05:00", "9999-12-31T23:59:59", "0001-01-01", "1e9",
                     "account", "user", "job", "run", "day", "nope", "Europe/Berlin",
                     "Not/AZone", "../../etc/passwd", "'; DROP TABLE jobs; --", "\x1b[2J",
                     "１０"]),
    st.text(max_size=12),
)  # fmt: skip
KEYS = st.one_of(st.sampled_from(["since", "until", "by", "top", "tz"]), st.text(max_size=6))
HEADER_NAMES = st.sampled_from(
    [b"host", b"authorization", b"x-forwarded-for", b"forwarded", b"x-forwarded-proto", b"cookie"]
)
HEADER_VALUES = st.one_of(
    st.sampled_from([f"Bearer {TOKEN}".encode(), b"Bearer wrong", b"127.0.0.1", b"evil.example",
                     b"evil.example:80", TOKEN.encode(), b"", b"\xff\xfe"]),
    st.binary(max_size=24).map(lambda b: b.replace(b"\r", b"").replace(b"\n", b"")),
)  # fmt: skip
CLIENTS = st.sampled_from(
    [("127.0.0.1", 40000), ("127.0.0.1", 40000), ("::1", 40000), ("203.0.113.9", 40000), None]
)


@cache
def _apps() -> dict[str, object]:
    """The application over one snapshot of the sample, with and without a token."""
    import tempfile
    from pathlib import Path

    from gpuyield.ingest.slurm import SlurmInputs, ingest_slurm

    db = Path(tempfile.mkdtemp(prefix="gy-serve-props-")) / "sample.duckdb"
    inputs = SlurmInputs(
        sacct=SAMPLE / "sacct-X-D-wide.psv",
        events=SAMPLE / "sacctmgr-event-format.psv",
        nodes=SAMPLE / "scontrol-show-nodes-oneliner.txt",
        manifest=SAMPLE / "manifest.toml",
    )
    ingest_slurm(db, inputs, until_s=_epoch(SAMPLE_UNTIL))
    state = ServeState(ServeSettings(db=db, with_page=False))
    state.refresh()
    assert state.served.snapshot is not None
    return {"token": build_app(state, token=TOKEN), "open": build_app(state, token=None)}


def _check(answer: Answer, *, path: str, authorized: bool, hostile_host: bytes | None) -> None:
    assert answer.status in _ANSWERS, (answer.status, answer.body[:300])
    if not authorized:
        assert answer.status == 401
    if answer.status in (200, 400) and path in _JSON_PATHS:
        json.loads(answer.body)
    if hostile_host:
        for _, value in answer.headers:
            assert hostile_host not in value


@settings(max_examples=60, suppress_health_check=[HealthCheck.too_slow])
@given(
    which=st.sampled_from(["token", "open"]),
    path=PATHS,
    query=st.lists(st.tuples(KEYS, VALUES), max_size=4),
    headers=st.lists(st.tuples(HEADER_NAMES, HEADER_VALUES), max_size=4),
    bearer=st.sampled_from([True, True, True, False]),
    method=st.sampled_from(["GET", "GET", "GET", "HEAD", "POST", "DELETE"]),
    client=CLIENTS,
)
def test_no_request_gets_a_server_error(
    which: str,
    path: str,
    query: list[tuple[str, str]],
    headers: list[tuple[bytes, bytes]],
    bearer: bool,
    method: str,
    client: tuple[str, int] | None,
) -> None:
    app = _apps()[which]
    if bearer:  # most requests carry the token, so that most reach the routes
        headers = [(b"authorization", f"Bearer {TOKEN}".encode()), *headers]
    sent_token = [v for k, v in headers if k == b"authorization"]
    if which == "token":
        authorized = bool(sent_token) and sent_token[-1] == f"Bearer {TOKEN}".encode()
    else:
        authorized = client is not None and client[0] in ("127.0.0.1", "::1")
    hosts = [v for k, v in headers if k == b"host" and b"evil" in v]
    answer = call(
        app,  # type: ignore[arg-type]
        path,
        query=urlencode(query).encode(),
        headers=headers,
        client=client,
        method=method,
    )
    event(f"status {answer.status}")
    _check(answer, path=path, authorized=authorized, hostile_host=hosts[-1] if hosts else None)
