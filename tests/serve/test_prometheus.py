"""A real Prometheus scrapes `gpuyield serve`; PromQL gives back `gpuyield report --json`.

Two servers (the bundled sample, cluster ``lab``; the simulated ``check`` cluster) are scraped every
second with the example scrape config and rules. Every figure PromQL computes is compared with the
CLI's JSON for the same window; every Grafana panel's query must return data.
"""

from __future__ import annotations

import csv
import json
import re
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.serve.conftest import REPO, Server, Store, get, report_cli
from tests.serve.prom import Prometheus, running_prometheus, wait_for

DASHBOARD = REPO / "examples" / "grafana" / "gpuyield.json"
CLUSTERS = {"lab": "sample_server", "check": "sim_server"}
# PromQL adds subcategory series in its own order: float rounding, not a different number.
REL = 1e-12


@pytest.fixture(scope="module")
def prom(
    sample_server: Server, sim_server: Server, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Prometheus]:
    targets = [s.base.removeprefix("http://") for s in (sample_server, sim_server)]
    with running_prometheus(tmp_path_factory.mktemp("prometheus"), targets) as prom:
        # Enough scrapes for range queries, and the recording rules evaluated on them.
        wait_for(prom, "count(count_over_time(gpuyield_installed_gpus[1m]) >= 5) == 2")
        wait_for(prom, "count(cluster:gpuyield_yield:ratio) == 2")
        yield prom


def _json(server: Server, *args: str) -> dict[str, object]:
    return dict(json.loads(report_cli(server.db, *args)))


@pytest.mark.parametrize("cluster", CLUSTERS)
def test_categories_and_yield_equal_report_json(
    prom: Prometheus, cluster: str, request: pytest.FixtureRequest
) -> None:
    report = _json(request.getfixturevalue(CLUSTERS[cluster]))
    sel = f'{{cluster="{cluster}"}}'
    got = prom.values(f"sum by (category) (gpuyield_gpu_seconds_total{sel})", "category")
    assert got == pytest.approx(report["categories"], rel=REL, abs=1e-6)
    subs = prom.query(f'gpuyield_gpu_seconds_total{{cluster="{cluster}",subcategory!=""}}')
    by_sub = {
        f"{r['metric']['category']}.{r['metric']['subcategory']}": float(r["value"][1])
        for r in subs
    }  # type: ignore[index]
    assert by_sub == report["subcategories"]
    installed = prom.scalar(f"gpuyield_installed_gpu_seconds_total{sel}")
    assert installed == report["installed_gpu_seconds"]
    for expr in (
        f"cluster:gpuyield_yield:ratio{sel}",
        f'sum(gpuyield_gpu_seconds_total{{cluster="{cluster}",category="released"}})'
        f" / sum(gpuyield_gpu_seconds_total{sel})",
    ):
        assert prom.scalar(expr) == pytest.approx(report["yield"], rel=REL)
    window = report["window"]
    assert isinstance(window, dict)
    end = prom.scalar(f"gpuyield_coverage_end_timestamp_seconds{sel}")
    assert _iso(end) + "Z" == window["end"]


@pytest.mark.parametrize("cluster", CLUSTERS)
def test_rolling_windows_equal_report_json_for_the_same_window(
    prom: Prometheus, cluster: str, request: pytest.FixtureRequest
) -> None:
    server: Server = request.getfixturevalue(CLUSTERS[cluster])
    sel = f'{{cluster="{cluster}"}}'
    starts = prom.values(f"gpuyield_window_start_timestamp_seconds{sel}", "window")
    assert set(starts) == {"1d", "7d", "30d"}
    end = _iso(prom.scalar(f"gpuyield_coverage_end_timestamp_seconds{sel}"))
    for name, start in starts.items():
        report = _json(server, "--since", _iso(start), "--until", end)
        for metric, key in (
            ("yield", "yield"),
            ("utilization", "utilization"),
            ("goodput", "goodput"),
        ):
            got = prom.values(f"gpuyield_{metric}_ratio{sel}", "window")
            assert got[name] == pytest.approx(report[key], rel=REL), (name, metric)
    if cluster == "check":  # three days of data: the 1-day window is its own ledger
        assert starts["1d"] > starts["7d"]


@pytest.mark.parametrize("cluster", CLUSTERS)
def test_now_figures_equal_the_last_second_and_the_capture(
    prom: Prometheus, cluster: str, request: pytest.FixtureRequest
) -> None:
    server: Server = request.getfixturevalue(CLUSTERS[cluster])
    sel = f'{{cluster="{cluster}"}}'
    end_s = prom.scalar(f"gpuyield_coverage_end_timestamp_seconds{sel}")
    last = _json(server, "--since", _iso(end_s - 1), "--until", _iso(end_s))
    categories = last["categories"]
    assert isinstance(categories, dict)
    assert prom.scalar(f"gpuyield_idle_gpus{sel}") == categories["idle"]
    assert prom.scalar(f"gpuyield_down_gpus{sel}") == categories["down"]
    assert prom.scalar(f"gpuyield_installed_gpus{sel}") == last["installed_gpu_seconds"]
    store: Store = request.getfixturevalue("sim_store" if cluster == "check" else "sample_store")
    jobs, gpus = _waiting_in_capture(store.capture)
    assert prom.scalar(f"gpuyield_pending_jobs{sel}") == jobs
    assert prom.scalar(f"gpuyield_pending_gpus{sel}") == gpus
    if cluster == "check":
        assert gpus > 0, "the simulated cluster ends with jobs waiting"


def test_accounts_equal_report_by_account(prom: Prometheus, sim_server: Server) -> None:
    report = _json(sim_server, "--by", "account")
    breakdown = report["breakdown"]
    assert isinstance(breakdown, dict)
    expected = {
        row["key"]: sum(v for k, v in row["categories"].items() if k not in ("down", "idle"))
        for row in breakdown["rows"]
        if row["key"] != "(not allocated)"
    }
    got = prom.values(
        'sum by (account) (gpuyield_account_gpu_seconds_total{cluster="check"})', "account"
    )
    assert got == pytest.approx(expected, rel=REL)
    assert len(got) >= 2


def test_every_rule_loads_and_evaluates_cleanly(prom: Prometheus) -> None:
    data = prom.api("rules")
    assert isinstance(data, dict)
    rules = [rule for group in data["groups"] for rule in group["rules"]]
    assert len(rules) == 11
    assert [r for r in rules if r["health"] != "ok"] == []


def _panel_queries() -> list[tuple[str, str, bool]]:
    """(panel title, PromQL with Grafana's variables filled in, instant?) for every target."""
    dashboard = json.loads(DASHBOARD.read_text())
    return [
        (panel["title"], t["expr"].replace("$cluster", ".*").replace("$__rate_interval", "15s"),
         bool(t.get("instant")))
        for panel in dashboard["panels"] for t in panel["targets"]
    ]  # fmt: skip


@pytest.mark.parametrize(("title", "expr", "instant"), _panel_queries())
def test_every_grafana_panel_query_returns_data(
    prom: Prometheus, title: str, expr: str, instant: bool
) -> None:
    if instant:
        result = prom.query(expr)
    else:
        end = time.time()  # Prometheus runs on this machine: the same clock
        data = prom.api("query_range", query=expr, start=str(end - 60), end=str(end), step="5")
        assert isinstance(data, dict)
        result = [r for r in data["result"] if any(v[1] != "NaN" for v in r["values"])]
    assert result, f"panel {title!r}: {expr} returned nothing"


def test_panels_use_only_exported_metrics_and_the_cluster_variable_resolves(
    prom: Prometheus, sim_server: Server, sample_server: Server
) -> None:
    # Dollars exist only where the manifest prices GPU-hours (the sample's does): the union.
    exported = {
        sample.name
        for server in (sim_server, sample_server)
        for family in text_string_to_metric_families(get(server.base + "/metrics").body.decode())
        for sample in family.samples
    }
    used = {name for _, expr, _ in _panel_queries() for name in re.findall(r"\bgpuyield_\w+", expr)}
    assert used and used <= exported, used - exported
    dashboard = json.loads(DASHBOARD.read_text())
    (variable,) = dashboard["templating"]["list"]
    match = re.fullmatch(r"label_values\((\w+), (\w+)\)", variable["query"]["query"])
    assert match is not None
    values = prom.api(f"label/{match.group(2)}/values", **{"match[]": match.group(1)})
    assert values == sorted(CLUSTERS)


def test_dollars_and_h100_equivalents_equal_report_json(
    prom: Prometheus, sample_server: Server
) -> None:
    weighted = _json(sample_server)["weighted"]
    assert isinstance(weighted, dict)
    for metric, unit in (
        ("gpuyield_dollars_total", "dollars"),
        ("gpuyield_h100_equiv_seconds_total", "h100_equiv_seconds"),
    ):
        got = prom.values(f'sum by (category) ({metric}{{cluster="lab"}})', "category")
        assert got == pytest.approx(weighted[unit]["categories"], rel=REL, abs=1e-9)


def _waiting_in_capture(capture: Path) -> tuple[int, int]:
    """Jobs PENDING in the sacct file and the GPUs their ReqTRES asks for: an oracle that does not
    go through gpuyield's parser."""
    name = "sacct.psv" if (capture / "sacct.psv").exists() else "sacct-X-D-wide.psv"
    jobs = gpus = 0
    with (capture / name).open(newline="") as handle:
        for row in csv.DictReader(handle, delimiter="|", quoting=csv.QUOTE_NONE):
            if row.get("State") == "PENDING" and "." not in (row.get("JobIDRaw") or ""):
                jobs += 1
                found = re.search(r"(?:^|,)gres/gpu=(\d+)", row.get("ReqTRES") or "")
                gpus += int(found.group(1)) if found else 0
    return jobs, gpus


def _iso(epoch_s: float) -> str:
    from gpuyield.times import iso_utc

    return iso_utc(epoch_s).removesuffix("Z")
