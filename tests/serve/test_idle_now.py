"""`/api/idle-now` is `gpuyield idle-now --json` from the snapshot; a gauge per account sums it."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from gpuyield.report.idle_now import build_idle_now, idle_now_json_text
from gpuyield.serve.metrics import CollectionStats, render
from gpuyield.serve.snapshot import build_snapshot
from tests.ledger.test_utilization import fixture_db
from tests.serve.conftest import Server, get, run_cli, start_serve, stop


@pytest.fixture(scope="module")
def measured_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """`gpuyield serve` on the utilization fixture."""
    root = tmp_path_factory.mktemp("idle-now-serve")
    server = start_serve(fixture_db(root / "store"), root / "serve.log")
    try:
        yield server
    finally:
        stop(server.process)


def test_api_idle_now_is_the_library_and_the_cli(measured_server: Server) -> None:
    reply = get(measured_server.base + "/api/idle-now")
    assert reply.status == 200
    assert reply.headers["content-type"] == "application/json"
    library = build_idle_now(measured_server.db)
    assert reply.body.decode() == idle_now_json_text(library) + "\n"
    assert reply.body.decode() == run_cli(
        "report", "idle-now", "--db", str(measured_server.db), "--json"
    )
    body = reply.json()
    assert body["measured"] is True and body["jobs"], body
    head = urllib.request.Request(measured_server.base + "/api/idle-now", method="HEAD")
    with urllib.request.urlopen(head, timeout=60) as response:
        assert response.status == 200


def test_api_idle_now_refuses_writes_and_queries(measured_server: Server) -> None:
    before = measured_server.db.stat().st_mtime_ns
    request = urllib.request.Request(
        measured_server.base + "/api/idle-now", data=b"{}", method="POST"
    )
    with pytest.raises(urllib.error.HTTPError) as caught:
        urllib.request.urlopen(request, timeout=60)
    with caught.value:
        assert caught.value.code == 405
    assert measured_server.db.stat().st_mtime_ns == before
    reply = get(measured_server.base + "/api/idle-now?top=3")
    assert reply.status == 400 and "top" in str(reply.json()["error"])


def test_api_idle_now_without_samples_says_not_measured(sim_server: Server) -> None:
    reply = get(sim_server.base + "/api/idle-now")
    assert reply.status == 200
    body = reply.json()
    assert body["measured"] is False and body["jobs"] == [] and "not measured" in str(body["note"])


def test_account_gauges_sum_to_the_allocated_idle_gauge(tmp_path: Path) -> None:
    snapshot = build_snapshot(fixture_db(tmp_path), top_accounts=1, with_page=False)
    text = render(snapshot, CollectionStats()).decode()
    samples = [s for f in text_string_to_metric_families(text) for s in f.samples]
    total = next(s.value for s in samples if s.name == "gpuyield_allocated_idle_gpus")
    by_account = {
        s.labels["account"]: s.value
        for s in samples
        if s.name == "gpuyield_allocated_idle_gpus_by_account"
    }
    assert by_account and sum(by_account.values()) == pytest.approx(total)
    assert total == pytest.approx(snapshot.idle_now.idle_gpus)
    accounts = snapshot.idle_now.accounts
    assert len(by_account) == min(len(accounts), 2)  # one account, then (others) if any is left
    assert by_account[accounts[0].account] == accounts[0].idle_gpus
    assert json.loads(snapshot.idle_now_json) == snapshot.idle_now.to_dict()
