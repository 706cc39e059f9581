"""`/api/report` is `gpuyield report --json`, byte for byte; nothing served can write."""

from __future__ import annotations

import json
import urllib.request

import pytest

from tests.serve.conftest import Server, get, report_cli


@pytest.mark.parametrize("which", ["sample_server", "sim_server"])
def test_api_report_is_report_json(which: str, request: pytest.FixtureRequest) -> None:
    server: Server = request.getfixturevalue(which)
    reply = get(server.base + "/api/report")
    assert reply.status == 200
    assert reply.headers["content-type"] == "application/json"
    assert reply.body.decode() == report_cli(server.db)


@pytest.mark.parametrize(
    ("query", "args"),
    [
        (
            "since=2026-11-02T01:00:00&until=2026-11-03T12:00:00&tz=Europe/Berlin",
            [
                "--since",
                "2026-11-02T01:00:00",
                "--until",
                "2026-11-03T12:00:00",
                "--tz",
                "Europe/Berlin",
            ],
        ),
        ("by=account", ["--by", "account"]),
        (
            "by=job&top=5&since=2026-11-03T00:00:00",
            ["--by", "job", "--top", "5", "--since", "2026-11-03T00:00:00"],
        ),
    ],
)
def test_api_report_with_a_window_or_breakdown(
    sim_server: Server, query: str, args: list[str]
) -> None:
    reply = get(f"{sim_server.base}/api/report?{query}")
    assert reply.status == 200, reply.body
    assert reply.body.decode() == report_cli(sim_server.db, *args)


@pytest.mark.parametrize(
    ("query", "field"),
    [("since=yesterday", "since"), ("by=colour", "by: cannot break down by 'colour'"),
     ("top=many&by=job", "top"), ("window=7d", "unknown query parameter"),
     ("until=2030-01-01T00:00:00", "until is after the data's capture time")],
)  # fmt: skip
def test_bad_queries_get_400_with_the_reason(sim_server: Server, query: str, field: str) -> None:
    reply = get(f"{sim_server.base}/api/report?{query}")
    assert reply.status == 400
    body = reply.json()
    assert str(body["error"]).startswith(field), body
    assert body["hint"], body
    # The query's words, never the library's or the CLI's (``--until``, ``window.until``).
    assert "--" not in body["error"] + body["hint"] and "window." not in body["error"], body


def test_every_query_name_is_a_report_parameter() -> None:
    from gpuyield.serve.app import _REPORT_PARAMS, QUERY_PARAMS

    assert set(QUERY_PARAMS.values()) <= _REPORT_PARAMS


@pytest.mark.parametrize("path", ["/metrics", "/api/report", "/api/idle-now", "/", "/healthz"])
@pytest.mark.parametrize("method", ["POST", "PUT", "DELETE", "PATCH"])
def test_nothing_served_accepts_a_write(sim_server: Server, path: str, method: str) -> None:
    before = sim_server.db.stat().st_mtime_ns
    request = urllib.request.Request(sim_server.base + path, data=b"{}", method=method)
    with pytest.raises(urllib.error.HTTPError) as caught:
        urllib.request.urlopen(request, timeout=60)
    with caught.value:
        assert caught.value.code == 405
    assert sim_server.db.stat().st_mtime_ns == before


def test_healthz_and_unknown_paths(sim_server: Server) -> None:
    health = get(sim_server.base + "/healthz").json()
    assert health["ok"] is True
    assert health["last_error"] is None
    assert json.loads(report_cli(sim_server.db))["window"] == health["coverage"]
    assert get(sim_server.base + "/nope").status == 404
